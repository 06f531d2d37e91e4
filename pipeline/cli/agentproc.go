package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"millrace/agents/ship"
	"millrace/audit"
)

// The agent commands (tail, beacon, otlp, syslog) run the same process
// around their receivers: one producer every receiver ships through, the
// metrics server, the audit counters and the ops-metrics publisher,
// started in one order and stopped in the reverse one, with what was
// started closed again when a later step fails. agentProc owns that
// process, so a command keeps its flags, its config's defaults and
// overrides, and building, starting and announcing its receiver.

// agentOptions are the flags every agent command has.
type agentOptions struct {
	configFile, logLevel string
	shutdownTimeout      time.Duration
	ops                  opsOptions
}

// addAgentFlags declares the flags every agent command has; configUsage
// and shutdownUsage are the command's own texts for --config and
// --shutdown-timeout.
func addAgentFlags(f *pflag.FlagSet, o *agentOptions, configUsage, shutdownUsage string) {
	f.StringVarP(&o.configFile, "config", "c", "", configUsage)
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, shutdownUsage)
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	addOpsFlags(f, &o.ops)
}

// flagOverride is a string flag's value and the config field it
// overrides when given.
type flagOverride struct {
	flag  string
	field *string
}

// override sets the fields whose flags were given (are not "") over the
// file's settings.
func override(overrides []flagOverride) {
	for _, o := range overrides {
		if o.flag != "" {
			*o.field = o.flag
		}
	}
}

// agentFile is the YAML layout of an agent command's --config: the
// sections every agent has beside its own.
type agentFile interface {
	// sections are the file's ship: (the producer) and audit: sections.
	sections() (*ship.Config, *audit.Config)
}

// agentSections are the sections every agent's --config has, inlined in
// the layout that adds the agent's own.
type agentSections struct {
	// Ship is the producer: brokers, acks, compression, buffers.
	Ship ship.Config `yaml:"ship"`
	// Audit publishes the counts of what the broker acknowledged (on by
	// default).
	Audit audit.Config `yaml:"audit"`
}

// sections implements agentFile.
func (s *agentSections) sections() (*ship.Config, *audit.Config) { return &s.Ship, &s.Audit }

// agentProc is the process of one agent command. Its steps run in order:
// newAgentProc, startProducer (which has the command build its receiver),
// startCounter for each of the receiver's counters, (the command starts
// its receiver), run. A step that fails, and abort, close what the steps
// before it made.
type agentProc struct {
	kind   string // the command, the kind in its ops-metrics source
	opts   agentOptions
	logger *slog.Logger
	ship   *ship.Config  // the file's ship: section, with the client flags
	audit  *audit.Config // the file's audit: section

	// Set by startProducer.
	reg         *prometheus.Registry
	shipper     *ship.Shipper
	waitMetrics func() // stops the metrics server and waits for it

	counters []*audit.Counter // started, in order; nil while the audit is off
}

// newAgentProc makes the logger and reads the --config file into file,
// where the client flags' brokers (when given, or when the file names
// none) and security override its ship: section.
func newAgentProc(e *env, kind string, o agentOptions, file agentFile) (*agentProc, error) {
	logger, err := newLogger(*e, o.logLevel)
	if err != nil {
		return nil, err
	}
	if o.configFile != "" {
		if err := loadYAML(o.configFile, file); err != nil {
			return nil, err
		}
	}
	shipConfig, auditConfig := file.sections()
	if e.client.brokersGiven() || len(shipConfig.Brokers) == 0 {
		shipConfig.Brokers = e.client.seeds()
	}
	if err := e.client.applyTo(&shipConfig.Security); err != nil {
		return nil, err
	}
	return &agentProc{kind: kind, opts: o, logger: logger, ship: shipConfig, audit: auditConfig, waitMetrics: func() {}}, nil
}

// startProducer checks the audit: section, builds the producer from
// config (the ship: section with any defaults of the command's own) and
// the receiver on it, serves /metrics and /readyz on metricsAddr ("" serves
// nothing) until ctx ends, starts the producer and creates the audit topic.
func startProducer[R any](ctx context.Context, p *agentProc, config ship.Config, metricsAddr string, newReceiver func(*ship.Shipper) (R, error)) (R, error) {
	var none R
	if err := p.audit.WithDefaults().Validate(); err != nil {
		return none, err
	}
	p.reg = newRegistry()
	shipper, err := ship.New(config, p.reg, p.logger)
	if err != nil {
		return none, err
	}
	p.shipper = shipper
	receiver, err := newReceiver(shipper)
	if err != nil {
		return none, p.abort(ctx, err)
	}
	wait, err := serveMetrics(ctx, metricsAddr, p.reg, p.logger, shipper.Ready)
	if err != nil {
		return none, p.abort(ctx, err)
	}
	p.waitMetrics = wait
	if err := shipper.Start(ctx); err != nil {
		return none, p.abort(ctx, err)
	}
	ensureAuditTopic(ctx, *p.audit, shipper.Config(), p.logger)
	return receiver, nil
}

// instance is the audit: section's instance, else the host and the port
// of listen, the receiver's address.
func (p *agentProc) instance(listen string) string {
	if p.audit.Instance != "" {
		return p.audit.Instance
	}
	return audit.HostInstance(listen)
}

// startCounter starts an audit counter for the receiver (see
// startAuditCounter; nil while the audit is off), shut down in run after
// the receiver and before the producer.
func (p *agentProc) startCounter(ctx context.Context, role, instance string, distinct bool, skew time.Duration) (*audit.Counter, error) {
	c, err := startAuditCounter(*p.audit, role, instance, distinct, skew, p.shipper, p.logger)
	if err != nil {
		return nil, p.abort(ctx, err)
	}
	p.counters = append(p.counters, c)
	return c, nil
}

// abort returns err once what the steps made is closed: the audit
// counters publish their counts so far (their errors joined to err), the
// producer closes without waiting for acknowledgements, the metrics
// server stops.
func (p *agentProc) abort(ctx context.Context, err error) error {
	if len(p.counters) > 0 {
		errs := []error{err}
		for _, c := range p.counters {
			errs = append(errs, shutdownAudit(ctx, c))
		}
		err = errors.Join(errs...)
	}
	p.shipper.Close()
	p.waitMetrics()
	return err
}

// run publishes the process's own metrics as name (see
// opsOptions.sourceFor), waits for ctx to end (SIGINT or SIGTERM), then
// shuts down within --shutdown-timeout in order: the receiver (shutdown;
// part names it in the error), the audit counters (their last counts,
// after the receiver's last acknowledgement), the producer, and last the
// ops publisher and the metrics server.
func (p *agentProc) run(ctx context.Context, name, part string, shutdown func(context.Context) error) error {
	stopOps, err := startOpsMetrics(p.opts.ops, p.reg, p.ship.Brokers, p.ship.Security, p.opts.ops.sourceFor(p.kind, name), p.logger)
	if err != nil {
		p.logger.Warn("not publishing own metrics", "err", err)
		stopOps = func() {}
	}
	defer p.waitMetrics()
	defer stopOps()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), p.opts.shutdownTimeout)
	defer cancel()
	rerr := shutdown(sctx)
	var aerrs []error
	for _, c := range p.counters {
		aerrs = append(aerrs, shutdownAudit(sctx, c))
	}
	aerr := errors.Join(aerrs...)
	serr := p.shipper.Shutdown(sctx)
	if rerr != nil || aerr != nil || serr != nil {
		return fmt.Errorf("shutdown: %s: %v; audit: %v; ship: %v", part, rerr, aerr, serr)
	}
	return nil
}
