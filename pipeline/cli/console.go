package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"millrace/internal/httpserver"
	"millrace/pipeline/monitor"
)

func init() {
	register("console", "console [-b BROKERS] [--listen 127.0.0.1:8091] [--interval 2s] [--metrics-topic T]   web console at /console", runConsole)
}

// runConsole serves the web console for a cluster until SIGINT/SIGTERM.
func runConsole(ctx context.Context, e env, args []string) error {
	f := newFlags("console")
	brokers := f.brokers()
	listen := f.String("listen", "127.0.0.1:8091", "HTTP address of the console")
	interval := f.Duration("interval", 2*time.Second, "time between cluster reads")
	metricsTopic := f.String("metrics-topic", monitor.DefaultMetricsTopic, "ops metrics topic to follow for component throughput")
	logLevel := f.String("log-level", "info", "debug, info, warn or error")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	logger, err := newLogger(e, *logLevel)
	if err != nil {
		return err
	}
	s := seeds(*brokers)
	if len(s) == 0 {
		return usageError("no brokers given")
	}
	col, err := monitor.New(monitor.Config{Brokers: s, Interval: *interval, MetricsTopic: *metricsTopic}, logger.With("component", "console"))
	if err != nil {
		return usageError("%v", err)
	}
	defer col.Shutdown(context.Background())
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = col.Ping(pingCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot reach brokers %s: %w", *brokers, err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if err := col.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	console := monitor.Handler(col)
	mux.Handle("/console", console)
	mux.Handle("/console/", console)
	mux.Handle("GET /{$}", http.RedirectHandler("/console", http.StatusFound))
	srv := httpserver.New(mux, httpserver.Timeouts{}, logger)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(e.stdout, "millrace console at http://%s/console (brokers %s)\n", ln.Addr(), *brokers)
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
