package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"millrace/audit"
	"millrace/internal/httpserver"
	"millrace/pipeline/monitor"
	"millrace/store"
)

func init() {
	addCommand("", consoleCommand)
}

func consoleCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use: "console [-b BROKERS] [--listen 127.0.0.1:8091] [--interval 2s] [--metrics-topic T] " +
			"[--lake file:///PATH|s3://BUCKET/PREFIX [--s3-endpoint URL] [--s3-region R] [--audit-interval 1m] [--audit-since 24h]]",
		Short: "web console at /console, Prometheus /metrics",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	var o consoleOptions
	f.StringVar(&o.listen, "listen", "127.0.0.1:8091", "HTTP address of the console")
	f.DurationVar(&o.interval, "interval", 2*time.Second, "time between cluster reads")
	f.StringVar(&o.metricsTopic, "metrics-topic", monitor.DefaultMetricsTopic, "ops metrics topic to follow for component throughput")
	f.StringArrayVar(&o.sampleTopics, "samples-topic", []string{monitor.DefaultSampleTopic}, "topic of posted metric samples to chart (repeatable)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.lakeURL, "lake", "", "lake root the sinks land into, to audit: file:///PATH or s3://BUCKET/PREFIX (none: no audit)")
	f.StringVar(&o.auditTopic, "audit-topic", audit.Topic, "topic the agents and sinks publish their counts to")
	f.DurationVar(&o.auditInterval, "audit-interval", monitor.DefaultAuditInterval, "time between audits of the lake (each reads the audit topic and the window's footers)")
	f.DurationVar(&o.auditSince, "audit-since", monitor.DefaultAuditSince, "audit the hours from this long ago")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an s3:// lake (default https://s3.amazonaws.com)")
	f.StringVar(&o.s3Region, "s3-region", "", "S3 region (default us-east-1)")
	f.StringVar(&o.httpAuth.TokenFile, "http-token-file", "", "file holding the bearer token the console and /metrics require (browsers log in once with /console?token=...)")
	f.StringVar(&o.httpAuth.BasicFile, "http-basic-file", "", "file of user:password lines for HTTP basic auth on the console and /metrics")
	f.StringVar(&o.httpTLS.Cert, "http-tls-cert", "", "serve HTTPS with this PEM certificate chain (it may hold the key too)")
	f.StringVar(&o.httpTLS.Key, "http-tls-key", "", "PEM private key of --http-tls-cert, when in a file of its own")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runConsole(cmd.Context(), e, o) }
	return cmd
}

// consoleOptions are the flags of console.
type consoleOptions struct {
	listen, metricsTopic, logLevel, lakeURL, auditTopic, s3Endpoint, s3Region string
	interval, auditInterval, auditSince                                       time.Duration
	sampleTopics                                                              []string
	// httpAuth and httpTLS protect the console's own HTTP server.
	httpAuth httpserver.AuthConfig
	httpTLS  httpserver.TLSConfig
}

// runConsole serves the web console for a cluster until SIGINT/SIGTERM.
func runConsole(ctx context.Context, e *env, o consoleOptions) error {
	logger, err := newLogger(*e, o.logLevel)
	if err != nil {
		return err
	}
	s := e.client.seeds()
	if len(s) == 0 {
		return usageError("no brokers given")
	}
	security, err := e.client.settings()
	if err != nil {
		return err
	}
	var tlsConfig *httpserver.TLSConfig
	if o.httpTLS.Cert != "" || o.httpTLS.Key != "" {
		if o.httpTLS.Cert == "" {
			return usageError("--http-tls-key needs --http-tls-cert")
		}
		tlsConfig = &o.httpTLS
	}
	reg := prometheus.NewRegistry()
	web, err := httpserver.LoadSecurity(tlsConfig, o.httpAuth, reg, logger.With("component", "http"))
	if err != nil {
		return usageError("%v", err)
	}
	// The metrics page shows the last hour: read that much back at start.
	col, err := monitor.New(monitor.Config{Brokers: s, Security: security, Interval: o.interval, MetricsTopic: o.metricsTopic,
		SampleTopics: o.sampleTopics, Lookback: time.Hour}, logger.With("component", "console"))
	if err != nil {
		return usageError("%v", err)
	}
	defer col.Shutdown(context.Background())
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = col.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot reach brokers %s: %w", e.client.brokers, err)
	}
	ln, err := web.Listen(o.listen, "console", logger)
	if err != nil {
		return err
	}
	var audits monitor.AuditSource
	if o.lakeURL != "" {
		// Credentials for an s3:// lake come from AWS_ACCESS_KEY_ID and
		// AWS_SECRET_ACCESS_KEY, as for `millrace sink`.
		st, err := store.Open(ctx, o.lakeURL, store.Options{S3Endpoint: o.s3Endpoint, S3Region: o.s3Region, Logger: logger})
		if err != nil {
			ln.Close()
			return err
		}
		defer st.Close()
		url, err := store.CanonicalURL(o.lakeURL)
		if err != nil {
			ln.Close()
			return err
		}
		auditor, err := monitor.NewAuditor(monitor.AuditConfig{Brokers: s, Security: security, Topic: o.auditTopic, Since: o.auditSince, Interval: o.auditInterval,
			Lakes: []monitor.AuditLake{{Name: o.lakeURL, Store: st, URL: url}}}, reg, logger.With("component", "audit"))
		if err != nil {
			ln.Close()
			return usageError("%v", err)
		}
		auditor.Start(ctx)
		// Deferred after st.Close, so it runs first: no run is left reading the lake.
		defer auditor.Shutdown(context.Background())
		audits = auditor
	}
	if err := col.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	console := monitor.Handler(col, audits)
	mux.Handle("/console", console)
	mux.Handle("/console/", console)
	mux.Handle("GET /{$}", http.RedirectHandler("/console", http.StatusFound))
	srv := httpserver.New(web.Protect(mux), httpserver.Timeouts{}, logger)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(e.stdout, "millrace console at %s://%s/console (brokers %s)\n", web.Scheme(), ln.Addr(), e.client.brokers)
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
