package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"millrace/audit"
	"millrace/pipeline/appliance"
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
		cfg.Demo.WriteLog, cfg.Tail = "", nil
		cfg.OpsMetrics.Interval = 0
		for i := range cfg.Sinks {
			cfg.Sinks[i].IdleTimeout = time.Second
		}
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
	waitUntil(t, 30*time.Second, "the poison click's bounded source in the audit", func() bool {
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

// peakRSSKiB reads a process's peak resident set size (VmHWM) from /proc.
func peakRSSKiB(t *testing.T, pid int) int {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kib, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
