package cli

import (
	"context"
	"fmt"

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
	addAgentFlags(f, &o.agent, "YAML file with ship: and beacon: sections (flags override)", "how long shutdown may wait for requests in flight and acknowledgements")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runBeacon(cmd.Context(), e, o) }
	return cmd
}

// beaconOptions are the flags of beacon.
type beaconOptions struct {
	listen, topic, metricsTopic, metricsListen string
	agent                                      agentOptions
}

// beaconFile is the YAML layout of `millrace beacon --config`.
type beaconFile struct {
	// The ship: and audit: sections.
	agentSections `yaml:",inline"`
	// Beacon is the HTTP ingest server.
	Beacon beacon.Config `yaml:"beacon"`
}

// runBeacon serves the click beacon, the metrics intake and Prometheus
// remote write until SIGINT/SIGTERM,
// then stops accepting, lets requests in flight finish (each answers only
// after the broker acknowledged its events) and flushes the producer.
func runBeacon(ctx context.Context, e *env, o beaconOptions) error {
	var cfg beaconFile
	p, err := newAgentProc(e, "beacon", o.agent, &cfg)
	if err != nil {
		return err
	}
	override([]flagOverride{
		{o.listen, &cfg.Beacon.Listen}, {o.metricsListen, &cfg.Beacon.MetricsListen},
		{o.topic, &cfg.Beacon.Topic}, {o.metricsTopic, &cfg.Beacon.MetricsTopic},
	})
	// The server serves /metrics itself, on --metrics-listen or its own address.
	server, err := startProducer(ctx, p, cfg.Ship, "", func(s *ship.Shipper) (*beacon.Server, error) {
		return beacon.New(cfg.Beacon, s, p.reg, p.logger)
	})
	if err != nil {
		return err
	}
	instance := p.instance(server.Config().Listen)
	clicks, err := p.startCounter(ctx, audit.RoleBeacon, instance, false, server.Config().MaxClockSkew)
	if err != nil {
		return err
	}
	metrics, err := p.startCounter(ctx, audit.RoleIntake, instance, false, 0)
	if err != nil {
		return err
	}
	server.SetAudit(clicks, metrics)
	if err := server.Start(ctx); err != nil {
		return p.abort(ctx, err)
	}
	fmt.Fprintf(e.stderr, "millrace beacon serving on %s://%s (tracker: /beacon.js, events: POST /v1/events, pixel: /b.gif, metrics in: POST /v1/metrics)\n", server.Scheme(), server.Addr())
	if server.RemoteWriteOn() {
		fmt.Fprintf(e.stderr, "prometheus remote write on %s://%s%s\n", server.Scheme(), server.Addr(), promwrite.Path)
	}
	if a := server.MetricsAddr(); a != nil {
		fmt.Fprintf(e.stderr, "prometheus metrics on %s://%s/metrics\n", server.Scheme(), a)
	}
	return p.run(ctx, server.Addr().String(), "http", server.Shutdown)
}
