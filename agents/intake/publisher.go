package intake

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// Producer sends records; *ship.Shipper is one.
type Producer interface {
	Produce(ctx context.Context, rec *kgo.Record, ack ship.AckFunc)
}

// Publisher publishes a process's own metrics to an ops topic at a fixed
// interval, one Batch record per component (see batch.go), so `millrace
// top`, the console or any consumer can follow them.
//
// The ops topic is the appliance's self-monitoring, not user data: it is
// not counted by the audit, and no sink lands it unless a sink names it.
type Publisher struct {
	Gatherer prometheus.Gatherer
	Producer Producer
	Topic    string
	// Source names the publishing process in every record
	// ("host:component" or "host:component:instance").
	Source   string
	Interval time.Duration
	Logger   *slog.Logger
}

// Run publishes once per Interval until ctx ends. A failed publication is
// logged; the next interval tries again with fresh values.
func (p *Publisher) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if err := p.PublishOnce(ctx, now); err != nil {
				p.Logger.Warn("publishing ops metrics failed", "topic", p.Topic, "err", err)
			}
		}
	}
}

// PublishOnce gathers and produces one batch per component stamped now; it
// does not wait for the acknowledgements (the producer's metrics count
// failures).
func (p *Publisher) PublishOnce(ctx context.Context, now time.Time) error {
	fams, err := p.Gatherer.Gather()
	if err != nil {
		return err
	}
	now = now.UTC()
	for _, b := range Batches(FromFamilies(fams, now), p.Source, now) {
		value, err := b.Encode()
		if err != nil {
			return err
		}
		p.Producer.Produce(ctx, &kgo.Record{Topic: p.Topic, Key: []byte(b.Component), Value: value, Timestamp: now}, nil)
	}
	return nil
}
