package cli

import (
	"context"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"millrace/agents/otlp"
	"millrace/agents/ship"
	"millrace/audit"
	"millrace/pipeline/appliance"
)

func init() {
	addCommand("", otlpCommand)
}

func otlpCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "otlp [--http-listen ADDR] [--grpc-listen ADDR] [--metrics-listen ADDR] [--config otlp.yaml]",
		Short: "receive OpenTelemetry logs, metrics and traces (OTLP over HTTP and gRPC) into topics",
		Long: "Receive OTLP exports from OpenTelemetry SDKs and Collectors and produce them to otlp_logs, " +
			"otlp_metrics and otlp_spans as the Collector's Kafka exporter writes them; a request is answered " +
			"once the broker acknowledged its records. An address of \"off\" turns that transport off.",
		Args: exactArgs(0),
	}
	f := cmd.Flags()
	var o otlpOptions
	f.StringVar(&o.httpListen, "http-listen", "", "OTLP/HTTP address (default from the config, else "+otlp.DefaultHTTPAddr+")")
	f.StringVar(&o.grpcListen, "grpc-listen", "", "OTLP/gRPC address (default from the config, else "+otlp.DefaultGRPCAddr+")")
	f.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus /metrics, and /readyz (503 while records cannot ship), on this address")
	addAgentFlags(f, &o.agent, "YAML file with ship:, otlp: and audit: sections (flags override)", "how long shutdown may wait for requests in flight and acknowledgements")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runOTLP(cmd.Context(), e, o) }
	return cmd
}

// otlpOptions are the flags of otlp.
type otlpOptions struct {
	httpListen, grpcListen, metricsListen string
	agent                                 agentOptions
}

// otlpFile is the YAML layout of `millrace otlp --config`.
type otlpFile struct {
	// The ship: and audit: sections.
	agentSections `yaml:",inline"`
	// OTLP is the receiver: addresses, TLS, auth, topics, encoding,
	// partitioning and limits.
	OTLP otlp.Config `yaml:"otlp"`
}

// runOTLP serves OTLP until SIGINT/SIGTERM, then stops accepting, lets
// requests in flight finish (each answers only after the broker
// acknowledged its records) and flushes the producer.
func runOTLP(ctx context.Context, e *env, o otlpOptions) error {
	var cfg otlpFile
	p, err := newAgentProc(e, "otlp", o.agent, &cfg)
	if err != nil {
		return err
	}
	override([]flagOverride{{o.httpListen, &cfg.OTLP.HTTPAddr}, {o.grpcListen, &cfg.OTLP.GRPCAddr}})
	cfg.OTLP = cfg.OTLP.WithListenDefaults()
	receiver, err := startProducer(ctx, p, cfg.Ship, o.metricsListen, func(s *ship.Shipper) (*otlp.Receiver, error) {
		return otlp.New(cfg.OTLP, s, p.reg, p.logger)
	})
	if err != nil {
		return err
	}
	listen := cfg.OTLP.HTTPAddr
	if listen == "" {
		listen = cfg.OTLP.GRPCAddr
	}
	// Not distinct: a retried export is counted again, as the beacon's
	// events are; the sink's dedup on event_id evens it out.
	counter, err := p.startCounter(ctx, audit.RoleIntake, p.instance(listen), false, 0)
	if err != nil {
		return err
	}
	if counter != nil {
		receiver.SetAudit(counter)
	}
	if err := receiver.Start(ctx); err != nil {
		return p.abort(ctx, err)
	}
	scheme := "http"
	if cfg.OTLP.TLS != nil {
		scheme = "https"
	}
	fmt.Fprintf(e.stderr, "millrace otlp serving %s\n", otlpEndpoints(scheme, receiver.HTTPAddr(), receiver.GRPCAddr()))
	return p.run(ctx, listen, "otlp", receiver.Shutdown)
}

// otlpEndpoints says where a receiver listens: its HTTP base URL (the
// endpoint an SDK is given) with the three paths, and its gRPC address (with TLS when the scheme is https).
func otlpEndpoints(scheme string, httpAddr, grpcAddr net.Addr) string {
	var s string
	if httpAddr != nil {
		s = scheme + "://" + httpAddr.String() + " (POST /v1/logs, /v1/metrics, /v1/traces)"
	}
	if grpcAddr != nil {
		if s != "" {
			s += ", "
		}
		s += "gRPC " + grpcAddr.String()
		if scheme == "https" {
			s += " (TLS)"
		}
	}
	return s
}

// printOTLP is up's banner line of the OTLP receiver, when it runs.
func printOTLP(e env, a *appliance.Appliance) {
	httpAddr, grpcAddr := a.OTLPAddrs()
	if httpAddr == nil && grpcAddr == nil {
		return
	}
	fmt.Fprintf(e.stdout, "  OTLP (OpenTelemetry)     %s\n", otlpEndpoints(a.OTLPScheme(), httpAddr, grpcAddr))
}
