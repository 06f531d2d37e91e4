package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	tailagent "millrace/agents/tail"
	"millrace/audit"
	"millrace/internal/waitfor"
	"millrace/pipeline/appliance"
	"millrace/pipeline/reconcile"
)

// TestAuditAcrossRestarts runs `millrace up` while clicks, metric samples
// and log lines of one past hour flow in, restarts it cleanly, then
// SIGKILLs and restarts it, and checks what `millrace audit` says of that
// hour. After the clean restart every count adds up exactly (each process
// run of the beacon and intake counts under its own key, so the second run
// adds to the first instead of replacing it). After the SIGKILL the killed
// run's last counts may be gone: the audit then says "unknown" for clicks
// and metrics, or ok if nothing was lost, and never MISMATCH; the tailer's
// counts survive with its checkpoint, so logs stay exact.
func TestAuditAcrossRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "app", "service.log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		auditedQuickly(cfg)
		cfg.Tail[0].Paths = []string{filepath.Join(dir, "app", "*.log")}
		cfg.Tail[0].ScanFrequency = 300 * time.Millisecond
		cfg.Tail[0].Timestamp = tailagent.Timestamp{Pattern: `^(\S+) `, Layout: "rfc3339"}
	})
	web := "http://" + webAddr
	up := startProcess(t, "up", "up", "--config", cfgPath)
	waitHTTP(t, up, web+"/healthz")

	// Two hours back, within the beacon's clock-skew bound: the sinks pass
	// the hour's end at once, so it is complete and judged within the test.
	hour := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour)
	sent := map[string]int{}
	send := func(n int) {
		t.Helper()
		var clicks, samples []string
		lines, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer lines.Close()
		for range n {
			i := sent["clicks"]
			ts := hour.Add(time.Duration(i) * time.Second)
			clicks = append(clicks, fmt.Sprintf(`{"type":"click","url":"https://shop.example/p/%d","anonymous_id":"a-%d","ts":%d,"event_id":%q}`,
				i, i%7, ts.UnixMilli(), fakeUUID(i)))
			samples = append(samples, fmt.Sprintf(`{"name":"myapp_queue_depth","kind":"gauge","value":%d,"source":"svc","ts":%q}`, i, ts.Format(time.RFC3339)))
			fmt.Fprintf(lines, "%s INFO line %d\n", ts.Format(time.RFC3339Nano), i)
			sent["clicks"]++
		}
		for path, body := range map[string][]string{"/v1/events": clicks, "/v1/metrics": samples} {
			if a := request(t, "POST", web+path, "application/json", "["+strings.Join(body, ",")+"]", nil); a.status/100 != 2 {
				t.Fatalf("POST %s: %d %v", path, a.status, a.body)
			}
		}
	}
	// Lines are acknowledged when the tailer reads them: wait for the topic.
	linesShipped := func() {
		t.Helper()
		waitfor.Until(t, 30*time.Second, "the log lines in the topic", func() bool { return topicRecords(t, kafkaAddr, "logs") >= int64(sent["clicks"]) })
	}
	stop := func() {
		t.Helper()
		if !up.stop(syscall.SIGTERM, 60*time.Second) || up.exitCode() != 0 {
			t.Fatalf("millrace up did not stop cleanly (status %d):\n%s", up.exitCode(), tail([]byte(up.log()), 4096))
		}
	}

	send(12)
	linesShipped()
	stop()
	up.start()
	waitHTTP(t, up, web+"/healthz")
	send(8)
	linesShipped()
	report := waitAudited(t, kafkaAddr, hour, sent["clicks"])
	for _, l := range report.Lines {
		if l.Hour == audit.Hour(hour) && (l.Status != reconcile.StatusOK || l.Accepted != int64(sent["clicks"])) {
			t.Errorf("after a clean restart: %+v, want ok with %d accepted", l, sent["clicks"])
		}
	}

	// SIGKILL right after the broker acknowledged the last requests, before
	// the next audit interval could publish their counts.
	send(6)
	up.kill()
	up.start()
	waitHTTP(t, up, web+"/healthz")
	send(4)
	linesShipped()
	// A clean stop publishes the last run's counts; a start without
	// traffic serves the broker the audit reads.
	stop()
	up.start()
	waitHTTP(t, up, web+"/healthz")
	report = waitAudited(t, kafkaAddr, hour, sent["clicks"])
	for _, l := range report.Lines {
		if l.Hour != audit.Hour(hour) {
			continue
		}
		switch {
		case l.Landed != int64(sent["clicks"]) || l.Deduplicated != 0 && l.Topic != "logs":
			t.Errorf("%s landed %d rows (%d deduplicated), want the %d sent once", l.Topic, l.Landed, l.Deduplicated, sent["clicks"])
		case l.Topic == "logs" && (l.Status != reconcile.StatusOK || l.Accepted != l.Landed):
			t.Errorf("logs after a SIGKILL: %+v, want ok: the tailer keeps its counts with its checkpoint", l)
		case l.Status == reconcile.StatusUnknown && l.Accepted <= l.Landed:
			t.Logf("%s: unknown, as the killed run did not publish its last counts: %s", l.Topic, l.Problem)
		case l.Status != reconcile.StatusOK || l.Accepted != l.Landed:
			t.Errorf("%s after a SIGKILL: %+v, want ok with accepted = landed, or unknown", l.Topic, l)
		}
	}
	if report.Unreconciled != 0 || len(report.NotLanded) != 0 {
		t.Errorf("report after a SIGKILL: %d hours not reconciled, not landed %v", report.Unreconciled, report.NotLanded)
	}
	out, code := runAudit(t, "audit", "-b", kafkaAddr, "--lake", filepath.Join(dir, "data", "lake"), "--since", "4h")
	if code != 0 || strings.Contains(out, reconcile.StatusMismatch) {
		t.Errorf("millrace audit exited %d after a SIGKILL:\n%s", code, out)
	}
}

// auditedQuickly sets an appliance config to publish audit counts every
// 500 ms and to land and mark hours within seconds, without the demo's own
// log writer or ops metrics, so that a test's past hour is judged within
// the test.
func auditedQuickly(cfg *appliance.Config) {
	cfg.Demo.WriteLog = ""
	cfg.OpsMetrics.Interval = 0
	cfg.Audit.Interval = 500 * time.Millisecond
	for i := range cfg.Sinks {
		cfg.Sinks[i].IdleTimeout = time.Second
		cfg.Sinks[i].SuccessGrace, cfg.Sinks[i].SuccessInterval = time.Second, 200*time.Millisecond
	}
}

// waitAudited runs `millrace audit --json` (every lake the sinks announced)
// until the clicks, metrics and logs of hour are complete and hold n rows
// each, and returns that report.
func waitAudited(t *testing.T, kafkaAddr string, hour time.Time, n int) reconcile.Report {
	t.Helper()
	var r reconcile.Report
	var out string
	var code int
	defer reportLastSeen(t, func() string { return fmt.Sprintf("the last audit (exit %d):\n%s", code, out) })()
	waitfor.Until(t, 90*time.Second, fmt.Sprintf("hour %s landed and complete for clicks, ops.metrics and logs", audit.Hour(hour)), func() bool {
		out, code = runAudit(t, "audit", "-b", kafkaAddr, "--since", "4h", "--json")
		if code != 0 && code != 1 {
			return false
		}
		r = decodeReport(t, out)
		done := map[string]bool{}
		for _, l := range r.Lines {
			if l.Hour == audit.Hour(hour) && l.Status != reconcile.StatusOpen && l.Landed >= int64(n) && l.SinkLanded >= int64(n) {
				done[l.Topic] = true
			}
		}
		return done["clicks"] && done["ops.metrics"] && done["logs"]
	})
	return r
}

// decodeReport decodes the one report of `millrace audit --json` (its
// stdout, followed by the one-line verdict on stderr when it exits 1).
func decodeReport(t *testing.T, out string) reconcile.Report {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var r reconcile.Report
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("audit output: %v:\n%s", err, out)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.Contains(string(rest), `"lake":`) {
		t.Fatalf("audit printed more than one lake's report:\n%s", out)
	}
	return r
}

// topicRecords is the sum of a topic's end offsets.
func topicRecords(t *testing.T, addr, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0 // not up yet: the caller waits
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// TestAuditTopicWithoutSink: a topic the agents feed that no sink lands is
// reported as not landed, with exit status 1, while the topic a sink lands
// is judged against the lake the sink announced (found without --lake);
// a wrong call exits 2.
func TestAuditTopicWithoutSink(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "clicks", 1, nil)
	b.createTopic(t, "clicks.dlq", 1, nil)
	b.createTopic(t, audit.Topic, 1, nil)
	hour := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour)
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const clicks = 5
	for i := range clicks {
		v := fmt.Sprintf(`{"type":"click","event_id":%q,"url":"https://shop.example/","ts":%d}`, fakeUUID(i), hour.Add(time.Duration(i)*time.Minute).UnixMilli())
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for topic, n := range map[string]int64{"clicks": clicks, "orders": 3} {
		publishAgentCount(ctx, t, cl, audit.Record{Role: audit.RoleBeacon, Instance: "e2e", Topic: topic, Source: "shop.example", Hour: audit.Hour(hour), Accepted: n})
	}
	root := t.TempDir()
	// The lake given as a plain directory, as `lake inspect` takes it.
	sink := startSink(t, b, "sink", "lake-clicks", "clicks", root, "--config", quickMarkersConfig(t))
	marker := filepath.Join(root, "clicks", hour.Format("dt=2006-01-02/hr=15"), "_SUCCESS")
	waitfor.Until(t, time.Minute, marker, func() bool { _, err := os.Stat(marker); return err == nil })
	waitLanded(t, b, "lake-clicks", "clicks", time.Minute, sink)

	out, code := runAudit(t, "audit", "-b", b.addr, "--since", "4h")
	if code != 1 || !strings.Contains(out, "not landed: topic orders: agents accepted 3 events") ||
		!strings.Contains(out, "lake file://"+root) || strings.Contains(out, reconcile.StatusMismatch) {
		t.Fatalf("audit exited %d, want 1 naming orders as not landed and clicks judged in the sink's lake:\n%s", code, out)
	}
	out, code = runAudit(t, "audit", "-b", b.addr, "--since", "4h", "--lake", root, "--topic", "clicks", "--json")
	if r := decodeReport(t, out); code != 0 || len(r.Lines) != 1 || r.Lines[0].Status != reconcile.StatusOK || r.Lines[0].Landed != clicks {
		t.Fatalf("audit of clicks in %s exited %d:\n%s", root, code, out)
	}
	if out, code := runAudit(t, "audit", "-b", b.addr, "--since", "-1h"); code != 2 {
		t.Fatalf("audit with a negative --since exited %d, want 2:\n%s", code, out)
	}
}
