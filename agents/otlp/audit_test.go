package otlp

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"millrace/audit"
)

// nopAudit is an audit producer that drops the records.
type nopAudit struct{}

func (nopAudit) Produce(_ context.Context, r *kgo.Record, ack func(*kgo.Record, error)) { ack(r, nil) }
func (nopAudit) Flush(context.Context) error                                            { return nil }

// TestAuditCountsAcknowledgedLogs: acknowledged log records are counted by
// the resource's service.name and the hour of their timestamp, the
// observed time when they have none; a refused request counts nothing.
func TestAuditCountsAcknowledgedLogs(t *testing.T) {
	t.Parallel()
	counter, err := audit.NewCounter(audit.Config{}, audit.RoleIntake, "otlp-test", false, nopAudit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, p := newTestReceiver(t, Config{})
	r.SetAudit(counter)
	ld := testLogs(1, 2)
	observed := time.Now().Add(-3 * time.Hour)
	lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(1)
	lr.SetTimestamp(0)
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(observed))
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	if w := post(r, "/v1/logs", contentProto, "", body); w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	p.set(func(*kgo.Record) error { return kgo.ErrRecordTimeout }, nil, 0)
	if w := post(r, "/v1/logs", contentProto, "", body); w.Code != 503 {
		t.Fatalf("broker down: status %d", w.Code)
	}
	got := map[string]int64{}
	for _, rec := range counter.Snapshot() {
		if rec.Topic != DefaultLogsTopic || rec.Source != "svc-0" {
			t.Fatalf("audit record %+v", rec)
		}
		got[rec.Hour] = rec.Accepted
	}
	stamped := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Timestamp().AsTime()
	if len(got) != 2 || got[audit.Hour(stamped)] != 1 || got[audit.Hour(observed)] != 1 {
		t.Fatalf("audit counts %v", got)
	}
}
