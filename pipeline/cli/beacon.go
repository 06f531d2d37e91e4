package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"millrace/agents/beacon"
	"millrace/agents/ship"
	"millrace/audit"
)

func init() {
	register("beacon", "beacon --listen ADDR --topic T [--metrics-topic T] [--metrics-listen ADDR] [--config beacon.yaml]", runBeacon)
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

// runBeacon serves the click beacon and metrics intake until SIGINT/SIGTERM,
// then stops accepting, lets requests in flight finish (each answers only
// after the broker acknowledged its events) and flushes the producer.
func runBeacon(ctx context.Context, e env, args []string) error {
	f := newFlags("beacon")
	brokers := f.brokers()
	listen := f.String("listen", "", "HTTP address (default from the config, else :8090)")
	topic := f.String("topic", "", "topic for click events (default clicks)")
	metricsTopic := f.String("metrics-topic", "", "topic for POST /v1/metrics samples (default ops.metrics)")
	metricsListen := f.String("metrics-listen", "", "serve Prometheus /metrics on this address instead of the ingest one (default from the config)")
	configFile := f.String("config", "", "YAML file with ship: and beacon: sections (flags override)")
	shutdownTimeout := f.Duration("shutdown-timeout", 30*time.Second, "how long shutdown may wait for requests in flight and acknowledgements")
	logLevel := f.String("log-level", "info", "debug, info, warn or error")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	logger, err := newLogger(e, *logLevel)
	if err != nil {
		return err
	}
	var cfg beaconFile
	if *configFile != "" {
		if err := loadYAML(*configFile, &cfg); err != nil {
			return err
		}
	}
	if explicit := visited(f); explicit["brokers"] || explicit["b"] || len(cfg.Ship.Brokers) == 0 {
		cfg.Ship.Brokers = seeds(*brokers)
	}
	if *listen != "" {
		cfg.Beacon.Listen = *listen
	}
	if *metricsListen != "" {
		cfg.Beacon.MetricsListen = *metricsListen
	}
	if *topic != "" {
		cfg.Beacon.Topic = *topic
	}
	if *metricsTopic != "" {
		cfg.Beacon.MetricsTopic = *metricsTopic
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
	ensureAuditTopic(ctx, cfg.Audit, shipper.Config().Brokers, logger)
	instance := cfg.Audit.Instance
	if instance == "" {
		instance = audit.HostInstance(server.Config().Listen)
	}
	clicks, err := startAuditCounter(cfg.Audit, audit.RoleBeacon, instance, false, shipper, logger)
	if err != nil {
		shipper.Close()
		return err
	}
	metrics, err := startAuditCounter(cfg.Audit, audit.RoleIntake, instance, false, shipper, logger)
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
	fmt.Fprintf(e.stderr, "millrace beacon serving on http://%s (tracker: /beacon.js, events: POST /v1/events, pixel: /b.gif, metrics in: POST /v1/metrics)\n", server.Addr())
	if a := server.MetricsAddr(); a != nil {
		fmt.Fprintf(e.stderr, "prometheus metrics on http://%s/metrics\n", a)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
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
