package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"millrace/audit"
	"millrace/internal/waitfor"
	"millrace/pipeline/monitor"
	"millrace/pipeline/reconcile"
)

// TestAuditConsoleAndGauge lands clicks of two past hours and serves
// `millrace console --lake`: its audit endpoint and
// millrace_audit_unreconciled_hours show both hours reconciled; after a
// Parquet file is deleted by hand, the next periodic audit flags that hour
// alone, in the JSON, the gauge and the page (Chromium).
func TestAuditConsoleAndGauge(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "clicks", 2, nil)
	b.createTopic(t, "clicks.dlq", 1, nil)
	b.createTopic(t, audit.Topic, 1, nil)
	perHour := produceClicks(t, b, "clicks", 0, 20, 2, nil) // "2024-05-01 08" and "09", all from shop.example
	cl := b.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The agent's counts, as a beacon publishes them.
	for _, hour := range []string{"2024-05-01T08", "2024-05-01T09"} {
		publishAgentCount(ctx, t, cl, audit.Record{Role: audit.RoleBeacon, Instance: "e2e-beacon", Topic: "clicks", Source: "shop.example",
			Hour: hour, Accepted: int64(perHour[strings.Replace(hour, "T", " ", 1)])})
	}
	root := t.TempDir()
	sink := startSink(t, b, "sink", "lake-audit-console", "clicks", "file://"+root, "--config", quickMarkersConfig(t))
	marker := filepath.Join(root, "clicks", "dt=2024-05-01", "hr=09", "_SUCCESS")
	waitfor.Until(t, time.Minute, marker, func() bool { _, err := os.Stat(marker); return err == nil })
	waitLanded(t, b, "lake-audit-console", "clicks", time.Minute, sink)

	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	console := startProcess(t, "console", "console", "-b", b.addr, "--listen", listen,
		"--lake", "file://"+root, "--audit-since", "100000h", "--audit-interval", "10s")
	base := "http://" + listen
	waitHTTP(t, console, base+"/console")

	// The first audit runs at start.
	var v monitor.AuditView
	waitfor.Until(t, time.Minute, "the first audit", func() bool { v = getAuditView(t, base); return v.Seq > 0 })
	if v.Error != "" || !v.Configured || len(v.Lakes) != 1 || v.Unreconciled["clicks"] != 0 {
		t.Fatalf("first audit: %+v", v)
	}
	lines := v.Lakes[0].Report.Lines
	if len(lines) != 2 {
		t.Fatalf("lines %+v, want one per hour", lines)
	}
	for _, l := range lines {
		if want := int64(perHour[strings.Replace(l.Hour, "T", " ", 1)]); l.Status != reconcile.StatusOK || l.Accepted != want || l.Landed != want {
			t.Fatalf("line %+v, want ok with %d accepted and landed", l, want)
		}
	}
	if g := gauge(t, base, `millrace_audit_unreconciled_hours{topic="clicks"}`); g != "0" {
		t.Fatalf("gauge %q, want 0", g)
	}

	files, err := filepath.Glob(filepath.Join(root, "clicks", "dt=2024-05-01", "hr=09", "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files in hr=09: %v", err)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	seq := v.Seq
	waitfor.Until(t, time.Minute, "the next audit", func() bool { v = getAuditView(t, base); return v.Seq > seq })
	if v.Unreconciled["clicks"] != 1 {
		t.Fatalf("after a file was deleted: %+v", v)
	}
	for _, l := range v.Lakes[0].Report.Lines {
		if (l.Status == reconcile.StatusMismatch) != (l.Hour == "2024-05-01T09") {
			t.Fatalf("line %+v: only 2024-05-01T09 lost a file", l)
		}
	}
	if g := gauge(t, base, `millrace_audit_unreconciled_hours{topic="clicks"}`); g != "1" {
		t.Fatalf("gauge %q, want 1", g)
	}

	// The page flags the hour and says why.
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(base+"/console")); err != nil {
		t.Fatalf("loading the console: %v", err)
	}
	step, cancelStep := context.WithTimeout(browser, 30*time.Second)
	defer cancelStep()
	if err := chromedp.Do(step, chromedp.WaitVisible(chromedp.CSS(`#audit tr.problem`))); err != nil {
		t.Fatalf("no flagged hour on the page: %v", err)
	}
	text, err := chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector("#audit tbody").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !hasCells(text, "file://"+root, "clicks", "shop.example", "2024-05-01T09") || !strings.Contains(text, "not reconciled") ||
		!strings.Contains(text, "files are missing") {
		t.Fatalf("audit table:\n%s", text)
	}
}

func getAuditView(t *testing.T, base string) monitor.AuditView {
	t.Helper()
	resp, err := http.Get(base + "/console/api/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v monitor.AuditView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// gauge is the value of one series on the console's /metrics, "" if absent.
func gauge(t *testing.T, base, series string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}
