package appliance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/beacon"
	"millrace/agents/otlp"
	"millrace/agents/promwrite"
	"millrace/agents/ship"
	"millrace/agents/syslog"
	"millrace/agents/tail"
	"millrace/audit"
	"millrace/broker"
	"millrace/broker/log"
	"millrace/internal/clientauth"
	"millrace/internal/httpserver"
	"millrace/pipeline/monitor"
	"millrace/sinks/iceberg"
	"millrace/sinks/lake"
	"millrace/store"
)

// Appliance is a running pipeline. Start brings the parts up in dependency
// order (broker, topics, producer, agents, sinks, web server); Shutdown takes
// them down in reverse, so agents flush into a broker that is still there
// and sinks publish what they completed.
type Appliance struct {
	cfg      Config
	logger   *slog.Logger
	registry *prometheus.Registry

	broker    *broker.Broker
	brokerErr chan error // Run's result, when the broker is embedded
	brokers   []string
	shipper   *ship.Shipper // the beacon's, the ops publisher's and, unless secure, the tailers'
	beacon    *beacon.Server
	syslog    *syslog.Server // nil when syslog.enabled is false
	otlp      *otlp.Receiver // nil when otlp.enabled is false
	tailers   []*tail.Tailer
	audits    []*audit.Counter // the agents' audit counters
	intake    *audit.Counter   // metric samples posted to /v1/metrics; nil with the audit off
	sinks     []*lake.Runner
	stores    []store.Store
	http      *http.Server
	httpAddr  net.Addr
	metrics   *http.Server // /metrics, at HTTP.MetricsListen
	metricsAt net.Addr
	httpSec   httpSecurity       // TLS and authentication of both web servers
	console   *monitor.Collector // feeds /console
	auditor   *monitor.Auditor   // the console's audit table and gauge; nil without one
	bg        sync.WaitGroup     // demo writer, ops publisher, HTTP server
	stopBG    context.CancelFunc

	// secure is secure mode's material; nil when security is off.
	secure *secureMaterial
	// tailShipper is the tailers' own producer in secure mode, where they
	// authenticate as a user of their own; nil otherwise.
	tailShipper *ship.Shipper
	// consoleSecurity is the console's and its audit's client settings.
	consoleSecurity clientauth.Settings
	// logDefaults are the embedded broker's topic defaults, against
	// which tiered_storage judges the topics it tiers.
	logDefaults log.Config
}

// Start validates cfg and starts every configured part. On error, what was
// started is shut down again.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (a *Appliance, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var secure *secureMaterial
	consoleSecurity := cfg.Security
	if cfg.Secure {
		if secure, err = prepareSecure(&cfg, logger); err != nil {
			return nil, err
		}
		consoleSecurity = secure.clientSettings(ConsoleUser)
	}
	a = &Appliance{cfg: cfg, logger: logger, registry: reg, secure: secure, consoleSecurity: consoleSecurity}
	// A failed start stops what it started. The appliance is held here:
	// `return nil, err` below sets a to nil before this runs.
	started := a
	defer func() {
		if err != nil {
			started.Shutdown(context.Background())
		}
	}()
	bgCtx, stop := context.WithCancel(context.Background())
	a.stopBG = stop

	if err := a.startBroker(); err != nil {
		return nil, err
	}
	if err := a.createTopics(ctx); err != nil {
		return nil, err
	}
	// Before the sinks and the console start: their first fetch already
	// meets its quota.
	if err := a.applyQuotas(ctx); err != nil {
		return nil, err
	}
	shipCfg := cfg.Ship
	shipCfg.Brokers = a.brokers
	shipReg := prometheus.Registerer(reg)
	if secure != nil {
		// Two producers, one per user: their metrics are told apart by
		// a producer label.
		shipReg = prometheus.WrapRegistererWith(prometheus.Labels{"producer": "beacon"}, reg)
	}
	if a.shipper, err = ship.New(shipCfg, shipReg, logger); err != nil {
		return nil, err
	}
	if err := a.shipper.Start(ctx); err != nil {
		return nil, err
	}
	tailProducer := a.shipper
	if secure != nil && len(cfg.Tail) > 0 {
		tailCfg := shipCfg
		tailCfg.Security = secure.clientSettings(TailUser)
		if a.tailShipper, err = ship.New(tailCfg, prometheus.WrapRegistererWith(prometheus.Labels{"producer": "tail"}, reg), logger.With("producer", "tail")); err != nil {
			return nil, err
		}
		if err := a.tailShipper.Start(ctx); err != nil {
			return nil, err
		}
		tailProducer = a.tailShipper
	}
	if cfg.Demo.WriteLog != "" {
		a.bg.Add(1)
		go func() {
			defer a.bg.Done()
			writeDemoLog(bgCtx, cfg.Demo.WriteLog, cfg.Demo.Interval, logger)
		}()
	}
	for _, tc := range cfg.Tail {
		t, err := tail.New(tc.Config, tailProducer, prometheus.WrapRegistererWith(prometheus.Labels{"input": tc.Name}, reg), logger.With("input", tc.Name))
		if err != nil {
			return nil, fmt.Errorf("tail %s: %w", tc.Name, err)
		}
		if cfg.Audit.On() {
			id, err := audit.InstanceID(t.Config().DataDir)
			if err != nil {
				return nil, fmt.Errorf("tail %s: %w", tc.Name, err)
			}
			c, err := a.startAudit(audit.RoleTail, id, true, 0, tailProducer)
			if err != nil {
				return nil, fmt.Errorf("tail %s: %w", tc.Name, err)
			}
			t.SetAudit(c)
		}
		// The tailer's own context is not ctx: cancelling it means a crash,
		// and the appliance stops its tailers cleanly through Shutdown.
		if err := t.Start(context.Background()); err != nil {
			return nil, fmt.Errorf("tail %s: %w", tc.Name, err)
		}
		a.tailers = append(a.tailers, t)
	}
	if err := a.startSyslog(ctx); err != nil {
		return nil, err
	}
	for _, sc := range cfg.Sinks {
		if err := a.startSink(ctx, sc); err != nil {
			return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
		}
	}
	if err := a.startHTTP(); err != nil {
		return nil, err
	}
	if err := a.startOTLP(); err != nil {
		return nil, err
	}
	if cfg.OpsMetrics.Interval > 0 {
		a.bg.Add(1)
		go func() {
			defer a.bg.Done()
			a.publishOpsMetrics(bgCtx)
		}()
	}
	return a, nil
}

func (a *Appliance) startBroker() error {
	if len(a.cfg.Brokers) > 0 {
		a.brokers = a.cfg.Brokers
		return nil
	}
	bc, err := a.cfg.brokerConfig()
	if err != nil {
		return err
	}
	if a.secure != nil {
		if err := secureBrokerConfig(&bc, *a.secure, a.cfg.Broker.Listen); err != nil {
			return err
		}
		// Before the broker opens the store: its first request already
		// meets the users and the ACLs.
		if err := provisionStore(filepath.Join(bc.DataDir, "coord"), *a.secure, secureACLs(a.cfg), a.logger); err != nil {
			return err
		}
	}
	bc.Metrics = a.registry
	a.logDefaults = bc.Log
	b, err := broker.Open(bc, a.logger)
	if err != nil {
		return err
	}
	a.broker = b
	a.brokerErr = make(chan error, 1)
	go func() { a.brokerErr <- b.Run(context.Background()) }()
	addr := b.Addr().String()
	if a.secure != nil {
		addr = dialable(b.Addr())
	}
	a.brokers = []string{addr}
	return nil
}

// admin returns an admin client of the appliance's brokers, through its
// security settings; the caller closes it.
func (a *Appliance) admin() (*kadm.Client, error) {
	security, err := a.cfg.Security.Opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(security, kgo.SeedBrokers(a.brokers...))...)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// createTopics creates the configured topics that do not exist yet and,
// with the embedded broker, every other topic the appliance's parts write
// to (see usedTopics), since that broker does not create topics on demand.
func (a *Appliance) createTopics(ctx context.Context) error {
	topics := a.cfg.Topics
	if a.broker != nil {
		topics = a.cfg.tieredTopics(slices.Concat(topics, a.cfg.usedTopics()), a.logDefaults)
	}
	if len(topics) == 0 {
		return nil
	}
	adm, err := a.admin()
	if err != nil {
		return err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, t := range topics {
		configs := make(map[string]*string, len(t.Config))
		for k, v := range t.Config {
			configs[k] = &v
		}
		resp, err := adm.CreateTopic(ctx, t.Partitions, t.ReplicationFactor, configs, t.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", t.Name, err)
		}
	}
	return nil
}

func (a *Appliance) startSink(ctx context.Context, sc SinkConfig) error {
	out := sc.Out
	if !strings.Contains(out, "://") {
		abs, err := filepath.Abs(out)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return err
		}
		out = "file://" + abs
	}
	st, err := store.Open(ctx, out, store.Options{S3Endpoint: sc.S3Endpoint, S3Region: sc.S3Region, Logger: a.logger})
	if err != nil {
		return err
	}
	a.stores = append(a.stores, st)
	lc := sc.Config
	lc.Brokers = a.brokers
	if lc.Lake, err = store.CanonicalURL(out); err != nil {
		return err
	}
	if lc.Format == lake.FormatIceberg && lc.Iceberg.Warehouse == "" {
		lc.Iceberg.Warehouse = lc.Lake // the tables live where the sink writes
	}
	r, err := lake.NewRunner(ctx, lc, st, prometheus.WrapRegistererWith(prometheus.Labels{"sink": sc.Name}, a.registry), a.logger.With("sink", sc.Name))
	if err != nil {
		return err
	}
	a.sinks = append(a.sinks, r)
	return nil
}

// startHTTP serves the demo page at /, the console, and — when the beacon
// is on — its routes (/beacon.js, /b.gif, /v1/events, /v1/metrics,
// /api/v1/write, /healthz, /readyz) on HTTP.Listen, and Prometheus
// /metrics on HTTP.MetricsListen. With http.auth the console, /metrics and
// remote write need credentials; the beacon's other routes and the demo
// page stay public.
func (a *Appliance) startHTTP() error {
	sec, err := a.loadHTTPSecurity()
	if err != nil {
		return err
	}
	a.httpSec = sec
	mux := http.NewServeMux()
	if a.cfg.Beacon != nil {
		bc := *a.cfg.Beacon
		// Tells the beacon's handler to leave /metrics out: it is served
		// on the metrics listener below.
		bc.MetricsListen = a.cfg.HTTP.MetricsListen
		b, err := beacon.New(bc, a.shipper, a.registry, a.logger)
		if err != nil {
			return err
		}
		if a.cfg.Audit.On() {
			clicks, err := a.startAudit(audit.RoleBeacon, a.beaconInstance(), false, b.Config().MaxClockSkew, a.shipper)
			if err != nil {
				return err
			}
			metrics, err := a.intakeAudit()
			if err != nil {
				return err
			}
			b.SetAudit(clicks, metrics)
		}
		a.beacon = b
		mux.Handle("/", b.Handler())
		if b.RemoteWriteOn() {
			// Remote write senders are servers, which send credentials
			// (remote_write's basic_auth or authorization): http.auth
			// protects the route, unlike the beacon's public routes.
			mux.Handle(promwrite.Path, sec.Protect(b.Handler()))
		}
	}
	mux.HandleFunc("GET /{$}", a.serveDemoPage)
	// The metrics page charts the beacon's posted samples beside the
	// components' own, over the last hour: read that much back at start.
	samples := []string{}
	if a.cfg.Beacon != nil {
		bc := a.cfg.Beacon.WithDefaults()
		samples = append(samples, bc.MetricsTopic)
		if bc.RemoteWrite.On() && bc.RemoteWrite.Topic != bc.MetricsTopic {
			samples = append(samples, bc.RemoteWrite.Topic)
		}
	}
	collector, err := monitor.New(monitor.Config{Brokers: a.brokers, Security: a.consoleSecurity, MetricsTopic: a.cfg.OpsMetrics.Topic,
		SampleTopics: samples, Lookback: time.Hour}, a.logger.With("component", "console"))
	if err != nil {
		return err
	}
	a.console = collector
	collector.Start(context.Background())
	var audits monitor.AuditSource
	if a.cfg.Audit.On() && len(a.cfg.Sinks) > 0 && a.cfg.HTTP.AuditInterval > 0 {
		lakes := make([]monitor.AuditLake, len(a.cfg.Sinks))
		for i, sc := range a.cfg.Sinks {
			// startSink opened a.stores[i] for a.cfg.Sinks[i].
			url, err := store.CanonicalURL(sc.Out)
			if err != nil {
				return err
			}
			lakes[i] = monitor.AuditLake{Name: sc.Name, Store: a.stores[i], URL: url, Topics: sc.Topics, Tables: tablesOf(sc, url)}
		}
		auditor, err := monitor.NewAuditor(monitor.AuditConfig{Brokers: a.brokers, Security: a.consoleSecurity, Topic: a.cfg.Audit.Topic, Lakes: lakes,
			Since: a.cfg.HTTP.AuditSince, Interval: a.cfg.HTTP.AuditInterval}, a.registry, a.logger.With("component", "audit"))
		if err != nil {
			return err
		}
		a.auditor = auditor
		auditor.Start(context.Background())
		audits = auditor
	}
	console := sec.Protect(monitor.Handler(a.console, audits))
	mux.Handle("/console", console)
	mux.Handle("/console/", console)
	ln, err := sec.Listen(a.cfg.HTTP.Listen, "http", a.logger)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	a.httpAddr = ln.Addr()
	// The beacon's timeouts hold for the whole server: it serves the
	// beacon's routes, whose answers wait for the broker (write_timeout
	// covers ack_timeout).
	var timeouts httpserver.Timeouts
	if a.beacon != nil {
		timeouts = a.beacon.Config().HTTPTimeouts()
	}
	a.http = httpserver.New(mux, timeouts, a.logger.With("component", "http"))
	a.serve(a.http, ln, "http")
	metricsLn, err := sec.Listen(a.cfg.HTTP.MetricsListen, "metrics", a.logger)
	if err != nil {
		return fmt.Errorf("http.metrics_listen: %w", err)
	}
	a.metricsAt = metricsLn.Addr()
	metricsMux := http.NewServeMux()
	metricsMux.Handle("GET /metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	a.metrics = httpserver.New(sec.Protect(metricsMux), httpserver.Timeouts{}, a.logger.With("component", "metrics"))
	a.serve(a.metrics, metricsLn, "metrics")
	return nil
}

// startAudit makes and starts an agent's audit counter on the agent's
// producer; Shutdown stops it. skew, when not 0, is how far its events'
// times may be from their acknowledgement (audit.Counter.SetEventSkew).
func (a *Appliance) startAudit(role, instance string, distinct bool, skew time.Duration, producer *ship.Shipper) (*audit.Counter, error) {
	c, err := audit.NewCounter(a.cfg.Audit, role, instance, distinct, producer, a.logger)
	if err != nil {
		return nil, err
	}
	if skew > 0 {
		c.SetEventSkew(skew)
	}
	c.Start(context.Background())
	a.audits = append(a.audits, c)
	return c, nil
}

// intakeAudit is the counter of metric samples, made on first use, or nil
// with the audit off. Its instance is the beacon's.
func (a *Appliance) intakeAudit() (*audit.Counter, error) {
	if a.intake != nil || !a.cfg.Audit.On() {
		return a.intake, nil
	}
	c, err := a.startAudit(audit.RoleIntake, a.beaconInstance(), false, 0, a.shipper)
	a.intake = c
	return c, err
}

// beaconInstance is the audit instance of the beacon and the ops
// publisher: audit.instance, or the host name and http.listen.
func (a *Appliance) beaconInstance() string {
	if a.cfg.Audit.Instance != "" {
		return a.cfg.Audit.Instance
	}
	return audit.HostInstance(a.cfg.HTTP.Listen)
}

// serve runs srv on ln until Shutdown, in a goroutine of a.bg.
func (a *Appliance) serve(srv *http.Server, ln net.Listener, what string) {
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logger.Error("http server failed", "server", what, "err", err)
		}
	}()
}

// SinkInfo names a sink and where it lands.
type SinkInfo struct {
	Name, Out string
	// Tables are the Iceberg tables a format: iceberg sink lands
	// ("<namespace>.<topic>"), and Catalog where they are recorded (the
	// SQLite file, or the catalog's URL); empty for a Hive sink.
	Tables  []string
	Catalog string
}

// Sinks lists the configured sinks with their resolved outputs.
func (a *Appliance) Sinks() []SinkInfo {
	out := make([]SinkInfo, 0, len(a.cfg.Sinks))
	for _, s := range a.cfg.Sinks {
		info := SinkInfo{Name: s.Name, Out: s.Out}
		if s.Format == lake.FormatIceberg {
			ns := s.Iceberg.Namespace
			if ns == "" {
				ns = "millrace"
			}
			for _, t := range s.Topics {
				info.Tables = append(info.Tables, ns+"."+t)
			}
			if info.Catalog = s.Iceberg.URI; info.Catalog == "" {
				info.Catalog = filepath.Join(s.Out, "catalog.db")
			}
		}
		out = append(out, info)
	}
	return out
}

// tablesOf is the catalog of a format: iceberg sink's tables, whose
// warehouse is its out (lakeURL), for the console's audit and Lake tab;
// nil for a Hive sink.
func tablesOf(sc SinkConfig, lakeURL string) *iceberg.Config {
	if sc.Format != lake.FormatIceberg {
		return nil
	}
	c := &iceberg.Config{Catalog: sc.Iceberg.Catalog, Namespace: sc.Iceberg.Namespace, Directory: strings.TrimPrefix(lakeURL, "file://")}
	if c.Catalog == "" || c.Catalog == iceberg.CatalogSQLite {
		c.Path = sc.Iceberg.URI
	} else {
		c.URL = sc.Iceberg.URI
	}
	return c
}

// Brokers are the brokers every part uses.
func (a *Appliance) Brokers() []string { return a.brokers }

// HTTPAddr is where the web server listens.
func (a *Appliance) HTTPAddr() net.Addr { return a.httpAddr }

// SchemaRegistryAddr is where the embedded broker's schema registry
// listens; nil without one (schema_registry.enabled false, or brokers:).
func (a *Appliance) SchemaRegistryAddr() net.Addr {
	if a.broker == nil {
		return nil
	}
	return a.broker.SchemaRegistryAddr()
}

// SchemaRegistryScheme is "https" when the schema registry serves TLS
// (security: on) and "http" otherwise.
func (a *Appliance) SchemaRegistryScheme() string {
	if a.secure != nil {
		return "https"
	}
	return "http"
}

// MetricsAddr is where Prometheus /metrics is served.
func (a *Appliance) MetricsAddr() net.Addr { return a.metricsAt }

// BrokerDone delivers the embedded broker's exit (nil channel when the
// brokers are external): a broker that stops on its own ends the appliance.
func (a *Appliance) BrokerDone() <-chan error { return a.brokerErr }

// Shutdown stops intake first (HTTP, OTLP, tailers, syslog), waits for the broker to
// acknowledge what they read, lets sinks publish and commit, and stops the
// broker last. It returns every error met on the way.
func (a *Appliance) Shutdown(ctx context.Context) error {
	var errs []error
	if a.http != nil {
		errs = append(errs, a.http.Shutdown(ctx))
	}
	errs = append(errs, a.shutdownOTLP(ctx))
	if a.metrics != nil {
		errs = append(errs, a.metrics.Shutdown(ctx))
	}
	if a.console != nil {
		errs = append(errs, a.console.Shutdown(ctx))
	}
	// Before the stores it reads are closed.
	if a.auditor != nil {
		errs = append(errs, a.auditor.Shutdown(ctx))
	}
	for _, t := range a.tailers {
		errs = append(errs, t.Shutdown(ctx))
	}
	errs = append(errs, a.shutdownSyslog(ctx))
	if a.stopBG != nil {
		a.stopBG()
	}
	a.bg.Wait()
	// After every agent (the ops publisher too) and its last checkpoint,
	// before the producer: the last counts are published.
	for _, c := range a.audits {
		errs = append(errs, c.Shutdown(ctx))
	}
	if a.shipper != nil {
		errs = append(errs, a.shipper.Shutdown(ctx))
	}
	if a.tailShipper != nil {
		errs = append(errs, a.tailShipper.Shutdown(ctx))
	}
	for _, r := range a.sinks {
		errs = append(errs, r.Shutdown(ctx))
	}
	for _, st := range a.stores {
		errs = append(errs, st.Close())
	}
	if a.broker != nil {
		errs = append(errs, a.broker.Close(), <-a.brokerErr)
	}
	return errors.Join(errs...)
}
