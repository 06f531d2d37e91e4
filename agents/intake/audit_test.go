package intake

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
)

// failingFirst acknowledges every record but the first.
type failingFirst struct{ n int }

func (f *failingFirst) Produce(_ context.Context, rec *kgo.Record, ack ship.AckFunc) {
	f.n++
	var err error
	if f.n == 1 {
		err = errors.New("not leader")
	}
	ack(rec, err)
}

type nopAudit struct{}

func (nopAudit) Produce(context.Context, *kgo.Record, ship.AckFunc) {}
func (nopAudit) Flush(context.Context) error                        { return nil }

func TestPublisherAuditCountsAcknowledgedSamples(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "depth"}, []string{"q"})
	for _, q := range []string{"a", "b", "c"} {
		g.WithLabelValues(q).Set(1)
	}
	reg.MustRegister(g)
	c, err := audit.NewCounter(audit.Config{}, audit.RoleIntake, "up-1", false, nopAudit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	p := &Publisher{Gatherer: reg, Producer: &failingFirst{}, Topic: "_millrace.metrics", Source: "h:up", Interval: time.Hour, Audit: c}
	if err := p.PublishOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	got := c.Snapshot()
	if len(got) != 1 || got[0].Accepted != 2 || got[0].Source != "h:up" || got[0].Topic != "_millrace.metrics" || got[0].Hour != audit.Hour(now) {
		t.Fatalf("audit %+v, want the 2 acknowledged samples of h:up in hour %s", got, audit.Hour(now))
	}
}
