package promwrite

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
)

// nopAudit is an audit producer that drops the records.
type nopAudit struct{}

func (nopAudit) Produce(_ context.Context, r *kgo.Record, ack func(*kgo.Record, error)) { ack(r, nil) }
func (nopAudit) Flush(context.Context) error                                            { return nil }

// TestAuditCountsAcknowledgedSamples: the audit counts the samples the
// broker acknowledged, by source and the samples' hour, and nothing of a
// request the broker failed.
func TestAuditCountsAcknowledgedSamples(t *testing.T) {
	t.Parallel()
	counter, err := audit.NewCounter(audit.Config{}, audit.RoleIntake, "promwrite-test", false, nopAudit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, p := newTestHandler(t, Config{})
	h.SetAudit(counter)
	ts := time.Now().Add(-time.Minute).UTC()
	body := encodeRequest([]series{{labels: named("up"), samples: []Sample{{1, ts.UnixMilli()}, {nan(), ts.UnixMilli()}}}}, nil)
	if w := post(h, body); w.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	p.set(kgo.ErrRecordTimeout, nil)
	if w := post(h, body); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("broker down: status %d", w.Code)
	}
	recs := counter.Snapshot()
	if len(recs) != 1 || recs[0].Topic != DefaultTopic || recs[0].Source != audit.MetricSource("prom-1") ||
		recs[0].Hour != audit.Hour(ts) || recs[0].Accepted != 2 {
		t.Fatalf("audit %+v", recs)
	}
}
