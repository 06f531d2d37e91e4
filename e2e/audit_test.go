package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/internal/waitfor"
	"millrace/pipeline/reconcile"
)

// TestAuditDeletedFileAndDeadLetters lands clicks of two past hours, a few
// of them invalid, and checks that `millrace audit` reconciles both hours
// with the exact counts (the dead-lettered ones shown as such), then that a
// Parquet file deleted by hand makes it exit 1 naming the source and hour.
// The agent's counts are published by the test itself as a beacon would
// publish them (role beacon, cumulative, not distinct), so the test does not
// depend on the beacon's clock clamp to place events in past hours.
func TestAuditDeletedFileAndDeadLetters(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "clicks", 2, nil)
	b.createTopic(t, "clicks.dlq", 1, nil)
	b.createTopic(t, audit.Topic, 1, nil)
	perHour := produceClicks(t, b, "clicks", 0, 40, 2, nil) // "2024-05-01 08" and "09", all from shop.example
	const invalid = 3
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range invalid { // no "type": the sink's schema refuses them
		v := fmt.Sprintf(`{"event_id":"bad-%d","url":"https://shop.example/x","ts":"2024-05-01T08:30:0%dZ"}`, i, i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	accepted := map[string]int64{"2024-05-01T08": int64(perHour["2024-05-01 08"] + invalid), "2024-05-01T09": int64(perHour["2024-05-01 09"])}
	for hour, n := range accepted {
		publishAgentCount(ctx, t, cl, audit.Record{Role: audit.RoleBeacon, Instance: "e2e-beacon", Topic: "clicks", Source: "shop.example", Hour: hour, Accepted: n})
	}

	root := t.TempDir()
	sink := startSink(t, b, "sink", "lake-audit", "clicks", "file://"+root, "--config", quickMarkersConfig(t))
	for _, hr := range []string{"08", "09"} {
		marker := filepath.Join(root, "clicks", "dt=2024-05-01", "hr="+hr, "_SUCCESS")
		waitfor.Until(t, time.Minute, marker, func() bool { _, err := os.Stat(marker); return err == nil })
	}
	waitLanded(t, b, "lake-audit", "clicks", time.Minute, sink)

	args := []string{"audit", "-b", b.addr, "--lake", "file://" + root, "--since", "100000h"}
	out, code := runAudit(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("audit exited %d on a complete lake:\n%s", code, out)
	}
	var report reconcile.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := map[string][3]int64{ // accepted, landed, dead-lettered
		"2024-05-01T08": {accepted["2024-05-01T08"], accepted["2024-05-01T08"] - invalid, invalid},
		"2024-05-01T09": {accepted["2024-05-01T09"], accepted["2024-05-01T09"], 0},
	}
	if len(report.Lines) != len(want) {
		t.Fatalf("report lines %+v, want one per hour", report.Lines)
	}
	for _, l := range report.Lines {
		w := want[l.Hour]
		if l.Topic != "clicks" || l.Source != "shop.example" || l.Status != reconcile.StatusOK ||
			l.Accepted != w[0] || l.Landed != w[1] || l.DeadLettered != w[2] || l.SinkLanded != w[1] {
			t.Errorf("line %+v, want accepted, landed, dead-lettered %v and ok", l, w)
		}
	}

	// Delete one file of 09 by hand: that hour no longer reconciles.
	files, err := filepath.Glob(filepath.Join(root, "clicks", "dt=2024-05-01", "hr=09", "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in hr=09: %v", err)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	out, code = runAudit(t, args...)
	if code != 1 {
		t.Fatalf("audit exited %d after a file was deleted, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "not reconciled: topic clicks, source shop.example, hour 2024-05-01T09") ||
		strings.Contains(out, "hour 2024-05-01T08") {
		t.Fatalf("audit does not name exactly the hour that lost a file:\n%s", out)
	}
}

// runAudit runs `millrace audit` and returns its output and exit status.
func runAudit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	stdout, stderr, err := runErr(2*time.Minute, "", millraceBin, args...)
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("millrace audit: %v\n%s", err, stderr)
		}
		code = ee.ExitCode()
	}
	return stdout + stderr, code
}

// publishAgentCount publishes rec on the audit topic as an agent would.
func publishAgentCount(ctx context.Context, t *testing.T, cl *kgo.Client, rec audit.Record) {
	t.Helper()
	rec.UpdatedAt = time.Now().UTC()
	v, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: audit.Topic, Key: []byte(rec.Key()), Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// quickMarkersConfig writes a sink config whose _SUCCESS markers come a
// second after every partition is past an hour, so past hours are judged
// within a test, and returns its path.
func quickMarkersConfig(t *testing.T) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "sink.yaml")
	if err := os.WriteFile(cfg, []byte("lake:\n  success_grace: 1s\n  success_interval: 200ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}
