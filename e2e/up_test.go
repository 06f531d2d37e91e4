package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"millrace/internal/waitfor"
	"millrace/pipeline/appliance"
)

// TestUpLandsEventsExactlyOnce runs the appliance as a new user does — one
// `millrace up` process with the demo config — sends beacon events
// and appends log lines, and finds every one of them exactly once in Parquet,
// read by DuckDB, within the roll age. SIGTERM then restart loses nothing
// acknowledged and duplicates nothing.
func TestUpLandsEventsExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "app", "service.log") // beside the demo's own log
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		cfg.Demo.WriteLog = filepath.Join(dir, "app", "demo.log")
		cfg.Tail[0].Paths = []string{filepath.Join(dir, "app", "*.log")}
		cfg.Tail[0].ScanFrequency = 500 * time.Millisecond
		cfg.OpsMetrics.Interval = 2 * time.Second
	})
	up := startProcess(t, "up", "up", "--config", cfgPath)
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz")
	if !strings.Contains(up.log(), "millrace dev is up") && !strings.Contains(up.log(), " is up") {
		t.Fatalf("startup banner missing:\n%s", up.log())
	}
	// The banner's client command names the binary by the path it was
	// started by (it is not on PATH here), and runs as printed.
	m := regexp.MustCompile(`(?m)^\s+watch it\s+(\S+) (top -b \S+)$`).FindStringSubmatch(up.log())
	if m == nil || m[1] != millraceBin {
		t.Fatalf("no watch it line naming %s in the banner:\n%s", millraceBin, up.log())
	}
	if out := run(t, time.Minute, "", "bash", "-c", m[1]+" "+m[2]+" --once"); !strings.Contains(out, "millrace top") {
		t.Fatalf("the printed top line showed:\n%s", out)
	}

	sendClicks := func(from, to int) { postClicks(t, web, from, to) }
	appendLines := func(from, to int) {
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			// Lines start with a timestamp: the demo's multiline pattern
			// joins any other line to the one before it.
			fmt.Fprintf(f, "%s INFO line %d of the service\n", time.Now().UTC().Format(time.RFC3339Nano), i)
		}
		f.Close()
	}
	sendClicks(0, 200)
	appendLines(0, 300)

	lake := filepath.Join(dir, "data", "lake")
	waitForRows(t, lake+"/clicks/**/*.parquet", 200, 60*time.Second)
	waitForLines(t, lake, logFile, 300, 60*time.Second)
	checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 200)
	checkLines(t, lake, logFile, 300)

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
	waitForLines(t, lake, logFile, 400, 60*time.Second)
	checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 300)
	checkLines(t, lake, logFile, 400)

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

// TestUpReplacesAStoppedSink makes the appliance's click sink fail to land
// (a regular file stands where its table's data directory must go), which stops its
// worker, and checks that the appliance keeps running and starts a new worker
// until the store works again; then every event, also those sent meanwhile,
// lands exactly once.
func TestUpReplacesAStoppedSink(t *testing.T) {
	dir := t.TempDir()
	var metricsURL string
	cfgPath, _, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		metricsURL = "http://" + cfg.HTTP.MetricsListen + "/metrics"
		cfg.Demo.WriteLog, cfg.Tail = "", nil
		cfg.Sinks = cfg.Sinks[:1]
		if cfg.Sinks[0].Name != "clicks" {
			t.Fatalf("the demo's first sink is %q, not clicks", cfg.Sinks[0].Name)
		}
	})
	lake := filepath.Join(dir, "data", "lake")
	// up lands the clicks table's files under millrace.db/clicks/data.
	if err := os.MkdirAll(filepath.Join(lake, "millrace.db", "clicks"), 0o755); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(lake, "millrace.db", "clicks", "data")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := startProcess(t, "up", "up", "--config", cfgPath)
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz")
	postClicks(t, web, 0, 100)

	up.waitLog("sink worker stopped; starting a new one", 1, time.Minute)
	// The rest of the appliance goes on meanwhile.
	postClicks(t, web, 100, 150)
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	waitForRows(t, lake+"/clicks/**/*.parquet", 150, 90*time.Second)
	checkDistinct(t, lake+"/clicks/**/*.parquet", "title", 150)

	// /metrics is not on the ingest port.
	if resp, err := http.Get(web + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the ingest port: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// The new worker registered its own series in place of the stopped
	// one's, and counts the rows once their table commit is done (the
	// files are there just before).
	restarts := regexp.MustCompile(`(?m)^millrace_lake_worker_restarts_total\{sink="clicks"\} ([1-9][0-9]*)$`)
	rows := `millrace_lake_rows_total{sink="clicks",topic="clicks"} 150`
	var metrics []byte
	defer reportLastSeen(t, func() string { return "the last /metrics:\n" + string(tail(metrics, 4096)) })()
	waitfor.Until(t, 10*time.Second, "/metrics to count a restart of the clicks worker and its 150 rows", func() bool {
		resp, err := http.Get(metricsURL)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if metrics, err = io.ReadAll(resp.Body); err != nil {
			return false
		}
		return restarts.Match(metrics) && strings.Contains(string(metrics), rows)
	})
	if !up.stop(syscall.SIGTERM, 60*time.Second) || up.exitCode() != 0 {
		t.Fatalf("millrace up did not stop cleanly on SIGTERM:\n%s", tail([]byte(up.log()), 4096))
	}
}

// writeDemoConfig writes the demo config a new user runs with `make run`,
// with its addresses and data directory moved into dir, shorter roll ages so
// tests finish in seconds, and then mod's changes; it returns the file and
// the broker's and the web server's addresses.
func writeDemoConfig(t *testing.T, dir string, mod func(*appliance.Config)) (path, kafkaAddr, webAddr string) {
	t.Helper()
	var cfg appliance.Config
	raw, err := os.ReadFile("../deployments/demo/millrace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("demo config: %v", err)
	}
	if len(cfg.Tail) != 1 || len(cfg.Sinks) != 7 || cfg.Beacon == nil {
		t.Fatalf("the demo config changed shape: %d tail inputs, %d sinks, beacon %v", len(cfg.Tail), len(cfg.Sinks), cfg.Beacon != nil)
	}
	// The sinks of the clicks, logs and metrics these tests send; those of
	// the syslog and OTLP receivers, which they do not feed, would only
	// add idle workers (their own tests land those topics).
	cfg.Sinks = slices.DeleteFunc(cfg.Sinks, func(s appliance.SinkConfig) bool {
		return !slices.Contains([]string{"clicks", "logs", "ops.metrics"}, s.Topics[0])
	})
	kafkaAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	webAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.Data = filepath.Join(dir, "data")
	cfg.Broker.Listen = kafkaAddr
	cfg.HTTP.Listen = webAddr
	// Their own ports, not the fixed defaults: tests run in parallel.
	cfg.HTTP.MetricsListen = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.SchemaRegistry.Listen = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.Syslog.UDP, cfg.Syslog.TCP = "127.0.0.1:0", "127.0.0.1:0"
	cfg.OTLP.HTTPAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.OTLP.GRPCAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	for i := range cfg.Sinks {
		cfg.Sinks[i].RollAge, cfg.Sinks[i].IdleTimeout = 10*time.Second, 3*time.Second
	}
	mod(&cfg)
	config, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "millrace.yaml")
	if err := os.WriteFile(path, config, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, kafkaAddr, webAddr
}

// postClicks sends click events from..to-1 to the beacon at web, ten to a
// request, each with title c-<i> and a distinct event id.
func postClicks(t *testing.T, web string, from, to int) {
	t.Helper()
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

// fakeUUID makes a deterministic, distinct UUID-shaped id for event i.
func fakeUUID(i int) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
}

// waitHTTP waits until url answers 200, failing early if p exits.
func waitHTTP(t *testing.T, p *process, url string) {
	t.Helper()
	waitfor.Until(t, 30*time.Second, fmt.Sprintf("%s to answer at %s", p.name, url), func() bool {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		p.exitedEarly("answering at " + url)
		return false
	})
}

// waitForRows waits until DuckDB counts at least n rows under glob (of the
// topic's table, when the lake holds one: parquetSource).
func waitForRows(t *testing.T, glob string, n int, timeout time.Duration) {
	t.Helper()
	db := openDuck(t)
	var count int
	defer reportLastSeen(t, func() string { return fmt.Sprintf("%s: %d rows", glob, count) })()
	waitfor.Until(t, timeout, fmt.Sprintf("%d rows under %s", n, glob), func() bool {
		src := parquetSource(t, glob)
		if src == "" {
			return false
		}
		err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM read_parquet(%s, hive_partitioning=true)", src)).Scan(&count)
		return err == nil && count >= n
	})
}

// linesOf counts the rows of one source file in the logs lake (the demo's
// own log lands there too), and how many distinct lines they hold.
func linesOf(t *testing.T, lake, source string) (count, distinct int) {
	t.Helper()
	src := parquetSource(t, lake+"/logs/**/*.parquet")
	if src == "" {
		return 0, 0
	}
	q := fmt.Sprintf("SELECT count(*), count(DISTINCT line) FROM read_parquet(%s, hive_partitioning=true) WHERE source = '%s'", src, source)
	if err := openDuck(t).QueryRow(q).Scan(&count, &distinct); err != nil {
		t.Fatal(err)
	}
	return count, distinct
}

// waitForLines waits until the logs lake holds at least n rows of source.
func waitForLines(t *testing.T, lake, source string, n int, timeout time.Duration) {
	t.Helper()
	var count int
	defer reportLastSeen(t, func() string { return fmt.Sprintf("%d lines of %s in the logs lake", count, source) })()
	waitfor.Until(t, timeout, fmt.Sprintf("%d lines of %s in the logs lake", n, source), func() bool {
		count, _ = linesOf(t, lake, source)
		return count >= n
	})
}

// checkLines asserts exactly n rows of source, all distinct.
func checkLines(t *testing.T, lake, source string, n int) {
	t.Helper()
	if count, distinct := linesOf(t, lake, source); count != n || distinct != n {
		t.Errorf("logs lake: %d rows, %d distinct lines of %s; want exactly %d", count, distinct, source, n)
	}
}

// checkDistinct asserts exactly want rows with want distinct values of col.
func checkDistinct(t *testing.T, glob, col string, want int) {
	t.Helper()
	var count, distinct int
	src := parquetSource(t, glob)
	if src == "" {
		t.Errorf("%s: no files; want %d rows", glob, want)
		return
	}
	q := fmt.Sprintf("SELECT count(*), count(DISTINCT %s) FROM read_parquet(%s, hive_partitioning=true)", col, src)
	if err := openDuck(t).QueryRow(q).Scan(&count, &distinct); err != nil {
		t.Fatal(err)
	}
	if count != want || distinct != want {
		t.Errorf("%s: %d rows, %d distinct %s; want exactly %d of each", glob, count, distinct, col, want)
	}
}
