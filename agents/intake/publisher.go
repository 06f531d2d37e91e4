package intake

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
	"millrace/schemas"
)

// Producer sends records; *ship.Shipper is one.
type Producer interface {
	Produce(ctx context.Context, rec *kgo.Record, ack ship.AckFunc)
}

// Publisher publishes a process's own metrics as metric-sample events to an
// ops topic at a fixed interval, so any consumer, a sink or `millrace top`
// can follow them.
type Publisher struct {
	Gatherer prometheus.Gatherer
	Producer Producer
	Topic    string
	// Source names the publishing process in every event ("host:component").
	Source   string
	Interval time.Duration
	Logger   *slog.Logger
	// Audit, when set, counts the samples the broker acknowledged, by
	// source and hour (the publisher's Source, the samples' ts).
	Audit *audit.Counter
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

// PublishOnce gathers and produces one set of samples stamped now; it does
// not wait for the acknowledgements (the producer's metrics count failures).
func (p *Publisher) PublishOnce(ctx context.Context, now time.Time) error {
	fams, err := p.Gatherer.Gather()
	if err != nil {
		return err
	}
	row := schemas.Metric.NewRow()
	for _, s := range FromFamilies(fams, now.UTC()) {
		value, err := s.Encode(nil, row, p.Source)
		if err != nil {
			return err
		}
		p.Producer.Produce(ctx, &kgo.Record{Topic: p.Topic, Key: []byte(s.Name), Value: value, Timestamp: s.TS}, p.ack)
	}
	return nil
}

// ack counts an acknowledged sample in the audit. Each
// sample is counted in the hour of its ts, which PublishOnce puts in its
// record's timestamp.
func (p *Publisher) ack(r *kgo.Record, err error) {
	if err == nil && p.Audit != nil {
		p.Audit.Add(p.Topic, audit.MetricSource(p.Source), r.Timestamp, 1)
	}
}
