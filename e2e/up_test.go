package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestUpLandsEventsExactlyOnce runs the appliance as a new user does — one
// `millrace up` process with the demo config's shape — sends beacon events
// and appends log lines, and finds every one of them exactly once in Parquet,
// read by DuckDB, within the roll age. SIGTERM then restart loses nothing
// acknowledged and duplicates nothing.
func TestUpLandsEventsExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	kafkaAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	webAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	logFile := filepath.Join(dir, "app", "service.log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`
data: %[1]s/data
broker:
  listen: %[2]s
  settings: {group.initial.rebalance.delay.ms: "0"}
http:
  listen: %[3]s
topics:
  - {name: clicks, partitions: 3}
  - {name: logs, partitions: 3}
ship:
  linger: 1ms
beacon:
  topic: clicks
tail:
  - name: app
    topic: logs
    paths: [%[4]s]
    scan_frequency: 500ms
sinks:
  - {name: clicks, out: lake, topics: [clicks], schema: click, roll_age: 10s, idle_timeout: 3s}
  - {name: logs, out: lake, topics: [logs], schema: log, roll_age: 10s, idle_timeout: 3s}
ops_metrics:
  interval: 2s
`, dir, kafkaAddr, webAddr, logFile)
	cfgPath := filepath.Join(dir, "millrace.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	up := startProcess(t, "up", "up", "--config", cfgPath)
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz")
	if !strings.Contains(up.log(), "millrace dev is up") && !strings.Contains(up.log(), " is up") {
		t.Fatalf("startup banner missing:\n%s", up.log())
	}

	sendClicks := func(from, to int) {
		for i := from; i < to; i += 10 {
			var batch []string
			for j := i; j < i+10 && j < to; j++ {
				batch = append(batch, fmt.Sprintf(`{"type":"click","title":"c-%d","event_id":"%s"}`, j, fakeUUID(j)))
			}
			a := request(t, "POST", web+"/v1/events", "application/json", "["+strings.Join(batch, ",")+"]", nil)
			if a.status != http.StatusOK {
				t.Fatalf("POST clicks %d..: %d %v", i, a.status, a.body)
			}
		}
	}
	appendLines := func(from, to int) {
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			fmt.Fprintf(f, "line %d of the service\n", i)
		}
		f.Close()
	}
	sendClicks(0, 200)
	appendLines(0, 300)

	lake := filepath.Join(dir, "data", "lake")
	waitForRows(t, lake+"/clicks/**/*.parquet", 200, 60*time.Second)
	waitForRows(t, lake+"/logs/**/*.parquet", 300, 60*time.Second)
	checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 200)
	checkDistinct(t, lake+"/logs/**/*.parquet", "line", 300)

	// More events, then SIGTERM right away: what was acknowledged (2xx, or
	// written to the log file before the stop) must land after a restart,
	// once.
	sendClicks(200, 300)
	appendLines(300, 400)
	if !up.stop(syscall.SIGTERM, 60*time.Second) {
		t.Fatalf("millrace up did not stop within 60s of SIGTERM:\n%s", tail([]byte(up.log()), 4096))
	}
	if code := up.exitCode(); code != 0 {
		t.Fatalf("millrace up exited %d after SIGTERM:\n%s", code, tail([]byte(up.log()), 4096))
	}
	up.start()
	waitHTTP(t, up, web+"/healthz")
	waitForRows(t, lake+"/clicks/**/*.parquet", 300, 60*time.Second)
	waitForRows(t, lake+"/logs/**/*.parquet", 400, 60*time.Second)
	checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 300)
	checkDistinct(t, lake+"/logs/**/*.parquet", "line", 400)

	// The ops metrics topic has the appliance's own metrics, published
	// every interval.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumeTopics("_millrace.metrics"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found := false
	for !found && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			found = found || strings.Contains(string(r.Value), `"name":"millrace_ship_records_sent_total"`)
		})
	}
	if !found {
		t.Error("_millrace.metrics has no millrace_ship_records_sent_total sample after 30s")
	}
}

// fakeUUID makes a deterministic, distinct UUID-shaped id for event i.
func fakeUUID(i int) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
}

// waitHTTP waits until url answers 200, failing early if p exits.
func waitHTTP(t *testing.T, p *process, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited:\n%s", p.name, tail([]byte(p.log()), 4096))
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("%s not answering at %s:\n%s", p.name, url, tail([]byte(p.log()), 4096))
}

// waitForRows waits until DuckDB counts at least n rows under glob.
func waitForRows(t *testing.T, glob string, n int, timeout time.Duration) {
	t.Helper()
	db := openDuck(t)
	deadline := time.Now().Add(timeout)
	var count int
	for time.Now().Before(deadline) {
		if matches, _ := filepath.Glob(strings.Replace(glob, "**", "*/*", 1)); len(matches) > 0 {
			if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM read_parquet('%s', hive_partitioning=true)", glob)).Scan(&count); err == nil && count >= n {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: %d rows after %v, want %d", glob, count, timeout, n)
}

// checkDistinct asserts exactly want rows with want distinct values of col.
func checkDistinct(t *testing.T, glob, col string, want int) {
	t.Helper()
	var count, distinct int
	q := fmt.Sprintf("SELECT count(*), count(DISTINCT %s) FROM read_parquet('%s', hive_partitioning=true)", col, glob)
	if err := openDuck(t).QueryRow(q).Scan(&count, &distinct); err != nil {
		t.Fatal(err)
	}
	if count != want || distinct != want {
		t.Errorf("%s: %d rows, %d distinct %s; want exactly %d of each", glob, count, distinct, col, want)
	}
}
