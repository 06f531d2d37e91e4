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

// Every acknowledged record is counted under its host and app, a
// malformed one (neither) under NoSource, in the hour it was received.
func TestAuditCountsAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	counts, err := audit.NewCounter(audit.Config{}, audit.RoleSyslog, "syslog-test", false, nopAudit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := newFakeProducer()
	s := startServer(t, Config{TCP: "x"}, p, func(s *Server) { s.SetAudit(counts) })
	c := dial(t, "tcp", s.TCPAddr())
	if _, err := io.WriteString(c, "<13>1 2026-12-04T10:00:00Z web1 nginx - - - one\n<13>1 2026-12-04T10:00:01Z web1 nginx - - - two\nnot syslog\n"); err != nil {
		t.Fatal(err)
	}
	first, _, _ := p.next(t), p.next(t), p.next(t)
	waitFor(t, "three acknowledgements", func() bool { return counter(s.metrics.produced) == 3 })
	got := map[string]int64{}
	for _, r := range counts.Snapshot() {
		if r.Topic != DefaultTopic || r.Hour != audit.Hour(first.ReceivedAt) {
			t.Errorf("audit record %+v, want topic %s and the hour of %s", r, DefaultTopic, first.ReceivedAt)
		}
		got[r.Source] += r.Accepted
	}
	if len(got) != 2 || got["web1/nginx"] != 2 || got[audit.NoSource] != 1 {
		t.Errorf("accepted by source %v, want web1/nginx 2 and %s 1", got, audit.NoSource)
	}
}
