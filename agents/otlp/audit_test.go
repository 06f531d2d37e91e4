package otlp

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

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

// TestAuditCountsSpansAndPoints: acknowledged spans are counted by
// service.name and the hour of their start, data points by the hour of
// their time (now when they have none), each under its signal's topic.
func TestAuditCountsSpansAndPoints(t *testing.T) {
	t.Parallel()
	counter, err := audit.NewCounter(audit.Config{}, audit.RoleIntake, "otlp-test", false, nopAudit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newTestReceiver(t, Config{})
	r.SetAudit(counter)
	started := time.Now().Add(-2 * time.Hour)
	td := testTraces(3) // 3 spans under each of svc-0 and svc-1
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetStartTimestamp(pcommon.NewTimestampFromTime(started))
	body, _ := new(ptrace.ProtoMarshaler).MarshalTraces(td)
	if w := post(r, "/v1/traces", contentProto, "", body); w.Code != 200 {
		t.Fatalf("traces: status %d: %s", w.Code, w.Body)
	}
	md := testMetrics(2) // one point each under svc-0 and svc-1, without a time
	pointed := time.Now().Add(-5 * time.Hour)
	md.ResourceMetrics().At(1).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).SetTimestamp(pcommon.NewTimestampFromTime(pointed))
	body, _ = new(pmetric.ProtoMarshaler).MarshalMetrics(md)
	if w := post(r, "/v1/metrics", contentProto, "", body); w.Code != 200 {
		t.Fatalf("metrics: status %d: %s", w.Code, w.Body)
	}
	now := audit.Hour(time.Now())
	got := map[string]int64{}
	for _, rec := range counter.Snapshot() {
		got[rec.Topic+" "+rec.Source+" "+rec.Hour] += rec.Accepted
	}
	want := map[string]int64{
		DefaultTracesTopic + " svc-0 " + audit.Hour(started):  1,
		DefaultTracesTopic + " svc-0 " + now:                  2,
		DefaultTracesTopic + " svc-1 " + now:                  3,
		DefaultMetricsTopic + " svc-0 " + now:                 1,
		DefaultMetricsTopic + " svc-1 " + audit.Hour(pointed): 1,
	}
	if len(got) != len(want) {
		t.Fatalf("audit counts %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("audit counts %v, want %v", got, want)
			break
		}
	}
}
