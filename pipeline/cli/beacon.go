package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"millrace/agents/beacon"
	"millrace/agents/promwrite"
	"millrace/agents/ship"
	"millrace/audit"
)

func init() {
	addCommand("", beaconCommand)
}

func beaconCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "beacon --listen ADDR --topic T [--metrics-topic T] [--metrics-listen ADDR] [--config beacon.yaml]",
		Short: "serve the click beacon, the metrics intake and Prometheus remote write, answering once the broker acknowledged",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	var o beaconOptions
	f.StringVar(&o.listen, "listen", "", "HTTP address (default from the config, else :8090)")
	f.StringVarP(&o.topic, "topic", "t", "", "topic for click events (default clicks)")
	f.StringVar(&o.metricsTopic, "metrics-topic", "", "topic for POST /v1/metrics samples (default ops.metrics)")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address instead of the ingest one (default from the config)")
	f.StringVarP(&o.configFile, "config", "c", "", "YAML file with ship: and beacon: sections (flags override)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown may wait for requests in flight and acknowledgements")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	addOpsFlags(f, &o.ops)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runBeacon(cmd.Context(), e, o) }
	return cmd
}

// beaconOptions are the flags of beacon.
type beaconOptions struct {
	listen, topic, metricsTopic, metricsListen, configFile, logLevel string
	shutdownTimeout                                                  time.Duration
	ops                                                              opsOptions
}

// beaconFile is the YAML layout of `millrace beacon --config`.
type beaconFile struct {
	// Ship is the producer: brokers, acks, compression, buffers.
	Ship ship.Config `yaml:"ship"`
	// Beacon is the HTTP ingest server.
	Beacon beacon.Config `yaml:"beacon"`
	// Audit publishes the counts of acknowledged events (on by default).
	Audit audit.Config `yaml:"audit"`
}

// runBeacon serves the click beacon, the metrics intake and Prometheus
// remote write until SIGINT/SIGTERM,
// then stops accepting, lets requests in flight finish (each answers only
// after the broker acknowledged its events) and flushes the producer.
func runBeacon(ctx context.Context, e *env, o beaconOptions) error {
	logger, err := newLogger(*e, o.logLevel)
	if err != nil {
		return err
	}
	var cfg beaconFile
	if o.configFile != "" {
		if err := loadYAML(o.configFile, &cfg); err != nil {
			return err
		}
	}
	if e.client.brokersGiven() || len(cfg.Ship.Brokers) == 0 {
		cfg.Ship.Brokers = e.client.seeds()
	}
	if err := e.client.applyTo(&cfg.Ship.Security); err != nil {
		return err
	}
	if o.listen != "" {
		cfg.Beacon.Listen = o.listen
	}
	if o.metricsListen != "" {
		cfg.Beacon.MetricsListen = o.metricsListen
	}
	if o.topic != "" {
		cfg.Beacon.Topic = o.topic
	}
	if o.metricsTopic != "" {
		cfg.Beacon.MetricsTopic = o.metricsTopic
	}

	reg := newRegistry()
	shipper, err := ship.New(cfg.Ship, reg, logger)
	if err != nil {
		return err
	}
	server, err := beacon.New(cfg.Beacon, shipper, reg, logger)
	if err != nil {
		shipper.Close()
		return err
	}
	if err := cfg.Audit.WithDefaults().Validate(); err != nil {
		shipper.Close()
		return err
	}
	if err := shipper.Start(ctx); err != nil {
		shipper.Close()
		return err
	}
	ensureAuditTopic(ctx, cfg.Audit, shipper.Config(), logger)
	instance := cfg.Audit.Instance
	if instance == "" {
		instance = audit.HostInstance(server.Config().Listen)
	}
	clicks, err := startAuditCounter(cfg.Audit, audit.RoleBeacon, instance, false, server.Config().MaxClockSkew, shipper, logger)
	if err != nil {
		shipper.Close()
		return err
	}
	metrics, err := startAuditCounter(cfg.Audit, audit.RoleIntake, instance, false, 0, shipper, logger)
	if err != nil {
		err = errors.Join(err, shutdownAudit(ctx, clicks))
		shipper.Close()
		return err
	}
	server.SetAudit(clicks, metrics)
	if err := server.Start(ctx); err != nil {
		err = errors.Join(err, shutdownAudit(ctx, clicks), shutdownAudit(ctx, metrics))
		shipper.Close()
		return err
	}
	fmt.Fprintf(e.stderr, "millrace beacon serving on %s://%s (tracker: /beacon.js, events: POST /v1/events, pixel: /b.gif, metrics in: POST /v1/metrics)\n", server.Scheme(), server.Addr())
	if server.RemoteWriteOn() {
		fmt.Fprintf(e.stderr, "prometheus remote write on %s://%s%s\n", server.Scheme(), server.Addr(), promwrite.Path)
	}
	if a := server.MetricsAddr(); a != nil {
		fmt.Fprintf(e.stderr, "prometheus metrics on %s://%s/metrics\n", server.Scheme(), a)
	}
	stopOps, err := startOpsMetrics(o.ops, reg, cfg.Ship.Brokers, cfg.Ship.Security, o.ops.sourceFor("beacon", server.Addr().String()), logger)
	if err != nil {
		logger.Warn("not publishing own metrics", "err", err)
		stopOps = func() {}
	}
	defer stopOps()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	herr := server.Shutdown(sctx)
	// After the requests in flight, before the producer: the last counts.
	aerr := errors.Join(shutdownAudit(sctx, clicks), shutdownAudit(sctx, metrics))
	serr := shipper.Shutdown(sctx)
	if herr != nil || aerr != nil || serr != nil {
		return fmt.Errorf("shutdown: http: %v; audit: %v; ship: %v", herr, aerr, serr)
	}
	return nil
}
