package cli

import (
	"context"
	"log/slog"
	"time"

	"millrace/agents/ship"
	"millrace/audit"
)

// ensureAuditTopic creates the audit topic when the audit is on and the
// topic is missing, connecting as the agent's producer does. A failure is
// only logged: the broker may be down at start (the agent retries its
// records) or create topics on first use.
func ensureAuditTopic(ctx context.Context, cfg audit.Config, producer ship.Config, logger *slog.Logger) {
	if !cfg.On() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts, err := producer.Security.Opts()
	if err == nil {
		err = audit.EnsureTopic(ctx, producer.Brokers, cfg.WithDefaults().Topic, opts...)
	}
	if err != nil {
		logger.Warn("audit topic not created", "err", err)
	}
}

// startAuditCounter makes and starts an agent's audit counter, or returns
// nil when the audit is off. skew, when not 0, is how far its events' times
// may be from their acknowledgement (audit.Counter.SetEventSkew). The
// caller shuts it down after the agent and before the producer, so its last
// counts are published.
func startAuditCounter(cfg audit.Config, role, instance string, distinct bool, skew time.Duration, producer audit.Producer, logger *slog.Logger) (*audit.Counter, error) {
	if !cfg.On() {
		return nil, nil
	}
	c, err := audit.NewCounter(cfg, role, instance, distinct, producer, logger)
	if err != nil {
		return nil, err
	}
	if skew > 0 {
		c.SetEventSkew(skew)
	}
	c.Start(context.Background())
	return c, nil
}

// shutdownAudit publishes a counter's last counts (nil does nothing).
func shutdownAudit(ctx context.Context, c *audit.Counter) error {
	if c == nil {
		return nil
	}
	return c.Shutdown(ctx)
}
