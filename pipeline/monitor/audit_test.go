package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"millrace/audit"
	"millrace/pipeline/reconcile"
)

// testReport reconciles two topics: logs with one hour whose file went
// missing (2 rows short) and one that adds up, clicks that add up.
func testReport() *reconcile.Report {
	const h1, h2 = "2026-12-02T03", "2026-12-02T04"
	lake := &reconcile.Lake{
		Rows:     map[string]audit.RowCounts{"logs": {h1: {"web:/a": 10}, h2: {"web:/a": 7}}, "clicks": {h1: {"shop.example": 5}}},
		Complete: map[string]map[string]bool{"logs": {h2: true}, "clicks": {h1: true}},
	}
	agent := func(role, topic, source, hour string, accepted int64) audit.Entry {
		return audit.Entry{Record: audit.Record{Role: role, Instance: "a1", Topic: topic, Source: source, Hour: hour,
			Accepted: accepted, Distinct: role == audit.RoleTail}, SinkOffset: -1}
	}
	sink := func(topic, source, hour string, offset, landed, dedup int64) audit.Entry {
		return audit.Entry{Record: audit.Record{Role: audit.RoleSink, Instance: "g/" + topic + "/0", Topic: topic, Source: source,
			Hour: hour, Landed: landed, Deduplicated: dedup}, SinkOffset: offset}
	}
	entries := []audit.Entry{
		agent(audit.RoleTail, "logs", "web:/a", h1, 10),
		agent(audit.RoleTail, "logs", "web:/a", h2, 9),
		sink("logs", "web:/a", h2, 19, 9, 0),
		agent(audit.RoleBeacon, "clicks", "shop.example", h1, 7),
		sink("clicks", "shop.example", h1, 7, 5, 2),
	}
	return reconcile.Reconcile(reconcile.Input{Records: audit.Latest(entries), Lake: lake, Since: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)})
}

type runResult struct {
	lakes []AuditLakeReport
	err   error
}

// startTestAuditor starts an auditor whose runs return what results
// delivers, one per run.
func startTestAuditor(t *testing.T, reg prometheus.Registerer, results <-chan runResult) *Auditor {
	t.Helper()
	run := func(ctx context.Context, _ time.Time) ([]AuditLakeReport, error) {
		select {
		case r := <-results:
			return r.lakes, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	cfg := AuditConfig{Interval: time.Millisecond, Since: DefaultAuditSince}
	a, err := newAuditor(cfg, reg, slog.New(slog.DiscardHandler), run)
	if err != nil {
		t.Fatal(err)
	}
	a.Start(context.Background())
	t.Cleanup(func() {
		if err := a.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return a
}

// deliver hands the auditor one run's result and waits for its view.
func deliver(t *testing.T, a *Auditor, results chan<- runResult, r runResult) {
	t.Helper()
	updated := a.Updated()
	results <- r
	select {
	case <-updated:
	case <-time.After(10 * time.Second):
		t.Fatal("the auditor did not publish the run")
	}
}

func getAudit(t *testing.T, h http.Handler) AuditView {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/console/api/audit", nil))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") ||
		rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
	}
	var v AuditView
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAuditEndpointAndGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	results := make(chan runResult)
	a := startTestAuditor(t, reg, results)
	h := Handler(fixedSource(testSnapshot()), a)

	if v := getAudit(t, h); !v.Configured || v.Seq != 0 || v.Lakes != nil {
		t.Fatalf("before the first run: %+v", v)
	}
	deliver(t, a, results, runResult{lakes: []AuditLakeReport{{Name: "logs-sink", Report: testReport()}}})
	v := getAudit(t, h)
	if v.Seq != 1 || v.Error != "" || v.ComputedAt.IsZero() || len(v.Lakes) != 1 || v.Lakes[0].Name != "logs-sink" {
		t.Fatalf("after a run: %+v", v)
	}
	if v.Unreconciled["logs"] != 1 || v.Unreconciled["clicks"] != 0 || len(v.Unreconciled) != 2 {
		t.Fatalf("unreconciled hours %v, want logs 1 and clicks 0", v.Unreconciled)
	}
	var mismatch *reconcile.Line
	for i, l := range v.Lakes[0].Report.Lines {
		if l.Status == reconcile.StatusMismatch {
			if mismatch != nil {
				t.Fatalf("two mismatched lines: %+v", v.Lakes[0].Report.Lines)
			}
			mismatch = &v.Lakes[0].Report.Lines[i]
		}
	}
	if mismatch == nil || mismatch.Hour != "2026-12-02T04" || mismatch.Source != "web:/a" || mismatch.Accepted != 9 ||
		mismatch.Landed != 7 || !strings.Contains(mismatch.Problem, "files are missing") {
		t.Fatalf("mismatched line %+v", mismatch)
	}
	const want = `
# HELP millrace_audit_unreconciled_hours Complete hours of the audit window whose produced, landed, dead-lettered and deduplicated counts do not add up, per data topic.
# TYPE millrace_audit_unreconciled_hours gauge
millrace_audit_unreconciled_hours{topic="clicks"} 0
millrace_audit_unreconciled_hours{topic="logs"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "millrace_audit_unreconciled_hours"); err != nil {
		t.Fatal(err)
	}
	success := testutil.ToFloat64(a.lastSuccess)
	if success < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("last success %v", success)
	}

	// A failed run keeps the last counts and gauge, and says why.
	deliver(t, a, results, runResult{err: errors.New("lake logs-sink: listing the lake: boom")})
	v = getAudit(t, h)
	if v.Seq != 2 || !strings.Contains(v.Error, "boom") || v.Unreconciled["logs"] != 1 || len(v.Lakes) != 1 {
		t.Fatalf("after a failed run: %+v", v)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "millrace_audit_unreconciled_hours"); err != nil {
		t.Fatal(err)
	}
	if testutil.ToFloat64(a.lastSuccess) != success {
		t.Fatal("a failed run moved the last success")
	}

	// Once the hour reconciles (say the file was restored), the gauge is 0.
	deliver(t, a, results, runResult{lakes: []AuditLakeReport{{Name: "logs-sink", Report: &reconcile.Report{Lines: []reconcile.Line{
		{Topic: "logs", Source: "web:/a", Hour: "2026-12-02T04", Accepted: 9, Landed: 9, Status: reconcile.StatusOK}}}}}})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP millrace_audit_unreconciled_hours Complete hours of the audit window whose produced, landed, dead-lettered and deduplicated counts do not add up, per data topic.
# TYPE millrace_audit_unreconciled_hours gauge
millrace_audit_unreconciled_hours{topic="logs"} 0
`), "millrace_audit_unreconciled_hours"); err != nil {
		t.Fatal(err)
	}
}

// Without a lake the page says what the audit needs.
func TestAuditEndpointWithoutLake(t *testing.T) {
	v := getAudit(t, Handler(fixedSource(testSnapshot()), nil))
	if v.Configured || v.Message != NoAuditMessage || !strings.Contains(v.Message, "--lake") {
		t.Fatalf("%+v", v)
	}
}

func TestAuditConfigValidate(t *testing.T) {
	lake := []AuditLake{{Name: "l", Store: nil}}
	for _, tc := range []struct {
		cfg  AuditConfig
		want string
	}{
		{AuditConfig{Lakes: lake}, "no brokers"},
		{AuditConfig{Brokers: []string{"b:9092"}}, "no lake"},
		{AuditConfig{Brokers: []string{"b:9092"}, Lakes: lake}, "has no store"},
		{AuditConfig{Brokers: []string{"b:9092"}, Lakes: lake, Interval: time.Second}, "below 10s"},
		{AuditConfig{Brokers: []string{"b:9092"}, Lakes: lake, Since: time.Minute}, "below an hour"},
	} {
		err := tc.cfg.withDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestAuditViewBounded: a lake with more lines than the page takes keeps
// every line that needs a look and says how many ok lines it left out,
// while the gauge still counts from the whole report.
func TestAuditViewBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	results := make(chan runResult)
	a := startTestAuditor(t, reg, results)
	h := Handler(fixedSource(testSnapshot()), a)
	r := &reconcile.Report{}
	for i := range maxViewLines + 500 {
		r.Lines = append(r.Lines, reconcile.Line{Topic: "clicks", Source: fmt.Sprintf("s%05d", i), Hour: "2026-12-02T03", Status: reconcile.StatusOK})
	}
	r.Lines[maxViewLines+400].Status = reconcile.StatusMismatch
	r.Lines[maxViewLines+450].Status = reconcile.StatusUnknown
	deliver(t, a, results, runResult{lakes: []AuditLakeReport{{Name: "l", Report: r}}})
	v := getAudit(t, h)
	got := v.Lakes[0]
	statuses := map[string]int{}
	for _, l := range got.Report.Lines {
		statuses[l.Status]++
	}
	if len(got.Report.Lines) != maxViewLines || got.OmittedLines != 500 || statuses[reconcile.StatusMismatch] != 1 || statuses[reconcile.StatusUnknown] != 1 {
		t.Fatalf("view: %d lines (%v), %d omitted; want %d with the mismatch and the unknown line, 500 omitted",
			len(got.Report.Lines), statuses, got.OmittedLines, maxViewLines)
	}
	if v.Unreconciled["clicks"] != 1 || len(r.Lines) != maxViewLines+500 {
		t.Fatalf("unreconciled %v, report lines %d: the bound must not touch the run's report", v.Unreconciled, len(r.Lines))
	}
}
