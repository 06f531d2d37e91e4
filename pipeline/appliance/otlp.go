package appliance

import (
	"context"
	"errors"
	"fmt"
	"net"

	"millrace/agents/otlp"
	"millrace/audit"
)

// OTLPConfig is the OpenTelemetry Protocol receiver of `millrace up`
// (package agents/otlp): OTLP/HTTP on http_addr (default 127.0.0.1:4318)
// and OTLP/gRPC on grpc_addr (default 127.0.0.1:4317), either "off" to
// serve only the other. Its records go through the beacon's producer to
// otlp_logs, otlp_metrics and otlp_spans.
type OTLPConfig struct {
	// Enabled turns the receiver on. Default true.
	Enabled *bool `yaml:"enabled"`
	// Inline: http_addr, grpc_addr, tls, auth, the topics, encoding,
	// partitioning and limits of otlp.Config. tls defaults to http.tls,
	// as the beacon serves with it; auth defaults to none, as the
	// beacon's routes are public.
	otlp.Config `yaml:",inline"`
}

// On reports whether the receiver runs.
func (c OTLPConfig) On() bool { return c.Enabled == nil || *c.Enabled }

// otlpConfig is the receiver's configuration under up: its addresses
// defaulted, its TLS the web server's unless it has its own, and the
// topics and limits of otlp.Config's defaults.
func (c Config) otlpConfig() otlp.Config {
	oc := c.OTLP.Config.WithListenDefaults()
	if oc.TLS == nil {
		oc.TLS = c.HTTP.TLS
	}
	return oc.WithDefaults()
}

// validateOTLP reports what is wrong with the otlp: section.
func (c Config) validateOTLP() error {
	if !c.OTLP.On() {
		return nil
	}
	if err := c.otlpConfig().Validate(); err != nil {
		return fmt.Errorf("%w (otlp: {enabled: false} turns the receiver off)", err)
	}
	return nil
}

// otlpTopics are the receiver's topics, for usedTopics and the ACLs;
// none when it is off.
func (c Config) otlpTopics() []string {
	if !c.OTLP.On() {
		return nil
	}
	oc := c.otlpConfig()
	return []string{oc.LogsTopic, oc.MetricsTopic, oc.TracesTopic}
}

// startOTLP starts the receiver on the beacon's producer, its log records
// counted for the audit by service.name.
func (a *Appliance) startOTLP() error {
	if !a.cfg.OTLP.On() {
		return nil
	}
	oc := a.cfg.otlpConfig()
	r, err := otlp.New(oc, a.shipper, a.registry, a.logger)
	if err != nil {
		return err
	}
	if a.cfg.Audit.On() {
		// Not distinct: a retried request is counted again, as the
		// beacon's events are; the sink's dedup on event_id evens it out.
		c, err := a.startAudit(audit.RoleIntake, a.otlpInstance(oc), false, 0, a.shipper)
		if err != nil {
			return err
		}
		r.SetAudit(c)
	}
	if err := r.Start(context.Background()); err != nil {
		// The receiver is on by default, on the ports a Collector or
		// another OTLP receiver on the host may hold.
		return fmt.Errorf("%w (set otlp.http_addr and otlp.grpc_addr to other addresses, or turn the receiver off with otlp: {enabled: false})", err)
	}
	a.otlp = r
	return nil
}

// otlpInstance is the receiver's audit instance: audit.instance with
// "/otlp", or the host name and the receiver's first address. It differs
// from the beacon's, so the audit tells their runs apart.
func (a *Appliance) otlpInstance(oc otlp.Config) string {
	if a.cfg.Audit.Instance != "" {
		return a.cfg.Audit.Instance + "/otlp"
	}
	listen := oc.HTTPAddr
	if listen == "" {
		listen = oc.GRPCAddr
	}
	return audit.HostInstance(listen)
}

// shutdownOTLP stops the receiver: new requests are refused, those in
// flight are answered once the broker acknowledged them or ctx ends.
func (a *Appliance) shutdownOTLP(ctx context.Context) error {
	if a.otlp == nil {
		return nil
	}
	if err := a.otlp.Shutdown(ctx); err != nil {
		return errors.Join(errors.New("otlp receiver"), err)
	}
	return nil
}

// OTLPAddrs are where the OTLP receiver listens over HTTP and gRPC; each
// nil when that transport is off, both when the receiver is.
func (a *Appliance) OTLPAddrs() (httpAddr, grpcAddr net.Addr) {
	if a.otlp == nil {
		return nil, nil
	}
	return a.otlp.HTTPAddr(), a.otlp.GRPCAddr()
}

// OTLPScheme is "https" when the OTLP receiver serves TLS (otlp.tls, or
// http.tls) and "http" otherwise; its gRPC server serves TLS alike.
func (a *Appliance) OTLPScheme() string {
	if a.cfg.otlpConfig().TLS != nil {
		return "https"
	}
	return "http"
}
