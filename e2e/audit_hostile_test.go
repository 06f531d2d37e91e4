package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/audit"
	"millrace/internal/waitfor"
	"millrace/pipeline/appliance"
	"millrace/pipeline/reconcile"
)

// TestUpPoisonClickHost sends `millrace up` a click whose page host is
// about 900 KB, the largest a beacon request carries, then ordinary
// clicks. The host becomes the click's audit source, cut to
// audit.MaxSourceBytes, so the sink's audit record stays small: the clicks
// behind the poison one land within one roll, nothing anywhere says
// MESSAGE_TOO_LARGE, and the appliance stays under 512 MiB.
func TestUpPoisonClickHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		auditedQuickly(cfg)
		cfg.Tail = nil
	})
	web := "http://" + webAddr
	up := startProcess(t, "up", "up", "--config", cfgPath)
	waitHTTP(t, up, web+"/healthz")

	host := strings.Repeat("a", 900<<10) + ".example"
	poison := fmt.Sprintf(`{"type":"click","title":"c-0","event_id":%q,"url":"https://%s/"}`, fakeUUID(0), host)
	if a := request(t, "POST", web+"/v1/events", "application/json", poison, nil); a.status/100 != 2 {
		t.Fatalf("POST the poison click: %d %v", a.status, a.body)
	}
	postClicks(t, web, 1, 21)
	lake := filepath.Join(dir, "data", "lake")
	// One roll: the sink's idle timeout (1s) after the last click, plus
	// what a loaded machine adds; a stalled worker would back off for
	// up to a minute instead.
	waitForRows(t, lake+"/clicks/**/*.parquet", 21, 30*time.Second)
	checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 21)

	// The sink's audit record names the cut source.
	waitfor.Until(t, 30*time.Second, "the poison click's bounded source in the audit", func() bool {
		out, _ := runAudit(t, "audit", "-b", kafkaAddr, "--since", "2h", "--json")
		return strings.Contains(out, audit.ClickSource("https://"+host+"/"))
	})
	if strings.Contains(up.log(), "MESSAGE_TOO_LARGE") || strings.Contains(up.log(), "removed a file published past the committed offset") {
		t.Fatalf("the appliance's log shows a refused record or a stalled worker:\n%s", tail([]byte(up.log()), 4096))
	}
	if hwm := peakRSSKiB(t, up.pid()); hwm > 512<<10 {
		t.Errorf("millrace up peaked at %d MiB, want under 512", hwm>>10)
	}
}

// TestUpAuditBlinding: one client makes up 1,000 page hosts while a
// legitimate client sends clicks of one site, under `millrace up`. The
// made-up client may open only 100 sources at once; the rest of its events
// are counted in the hour's (other) count. The legitimate source's line
// stays exact, the hour reconciles as a whole, the report stays small and
// the appliance under 512 MiB.
func TestUpAuditBlinding(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		auditedQuickly(cfg)
		cfg.Tail = nil
	})
	web := "http://" + webAddr
	up := startProcess(t, "up", "up", "--config", cfgPath)
	waitHTTP(t, up, web+"/healthz")
	hour := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour)
	seq := 0
	post := func(cl *http.Client, hosts func(i int) string, n int) {
		t.Helper()
		var events []string
		for range n {
			events = append(events, fmt.Sprintf(`{"type":"click","url":"https://%s/p","event_id":%q,"ts":%d}`,
				hosts(seq), fakeUUID(seq), hour.Add(time.Duration(seq)*time.Second).UnixMilli()))
			seq++
		}
		resp, err := cl.Post(web+"/v1/events", "application/json", strings.NewReader("["+strings.Join(events, ",")+"]"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST clicks: %d", resp.StatusCode)
		}
	}
	legit, attacker := clientFrom("127.0.0.2"), clientFrom("127.0.0.1")
	shop := func(int) string { return "shop.example" }
	post(legit, shop, 10)
	for range 10 {
		post(attacker, func(i int) string { return fmt.Sprintf("h%d.example", i) }, 100)
	}
	post(legit, shop, 10)
	const total = 1020

	var r reconcile.Report
	var out string
	var landed int64
	defer reportLastSeen(t, func() string { return fmt.Sprintf("%d of %d clicks landed:\n%s", landed, total, out) })()
	waitfor.Until(t, 90*time.Second, fmt.Sprintf("%d clicks landed and judged", total), func() bool {
		out, _ = runAudit(t, "audit", "-b", kafkaAddr, "--since", "4h", "--json", "--topic", "clicks")
		r = decodeReport(t, out)
		landed = 0
		complete := true
		for _, l := range r.Lines {
			landed += l.Landed
			complete = complete && l.Status != reconcile.StatusOpen
		}
		return landed == total && complete
	})
	var other, shopLine *reconcile.Line
	for i, l := range r.Lines {
		switch l.Source {
		case audit.OtherSource:
			other = &r.Lines[i]
		case "shop.example":
			shopLine = &r.Lines[i]
		}
	}
	if shopLine == nil || shopLine.Status != reconcile.StatusOK || shopLine.Accepted != 20 || shopLine.Landed != 20 {
		t.Errorf("the legitimate source: %+v, want ok with 20 accepted and landed", shopLine)
	}
	if other == nil || other.Status != reconcile.StatusOK || other.Accepted < 800 {
		t.Errorf("the (other) line: %+v, want ok with most of the made-up hosts' clicks", other)
	}
	if r.Unreconciled != 0 || len(r.Lines) > 150 {
		t.Errorf("%d hours not reconciled, %d lines; want 0, and at most the 100 sources one client may open at once and a few", r.Unreconciled, len(r.Lines))
	}
	if hwm := peakRSSKiB(t, up.pid()); hwm > 512<<10 {
		t.Errorf("millrace up peaked at %d MiB, want under 512", hwm>>10)
	}
}
