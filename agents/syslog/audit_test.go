package syslog

import (
	"context"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
)

// nopAudit publishes nothing: the test reads the counter's totals.
type nopAudit struct{}

func (nopAudit) Flush(context.Context) error                        { return nil }
func (nopAudit) Produce(context.Context, *kgo.Record, ship.AckFunc) {}

// Every acknowledged record, malformed ones too, is counted under
// NoSource and the hour it was received.
func TestAuditCountsAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	counts, err := audit.NewCounter(audit.Config{}, "syslog", "syslog-test", false, nopAudit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newFakeProducer()
	s := startServer(t, Config{TCP: "x"}, p, func(s *Server) { s.SetAudit(counts) })
	c := dial(t, "tcp", s.TCPAddr())
	if _, err := io.WriteString(c, "<13>a: one\nnot syslog\n"); err != nil {
		t.Fatal(err)
	}
	first, _ := p.next(t), p.next(t)
	waitFor(t, "both acknowledgements", func() bool { return counter(s.metrics.produced) == 2 })
	snap := counts.Snapshot()
	if len(snap) != 1 || snap[0].Topic != DefaultTopic || snap[0].Source != audit.NoSource ||
		snap[0].Hour != audit.Hour(first.ReceivedAt) || snap[0].Accepted != 2 {
		t.Errorf("audit snapshot %+v, want 2 accepted in the hour of %s", snap, first.ReceivedAt)
	}
}
