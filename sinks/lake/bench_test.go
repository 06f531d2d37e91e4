package lake

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/lazyfree"
)

// benchClicks returns n click records (as the beacon writes them) whose event
// times are spread over five hours, and the same events as newline-delimited
// JSON. The record timestamps are the produce times, 50µs apart (a producer
// at 20,000 events/s), as the beacon's records have: record time only moves
// forward, so the window is cut by roll-rows alone and lands one file per
// hour. (Record times equal to the interleaved event times made roll-age cut
// a window at every jump of a minute: 304 files of about 650 rows.)
func benchClicks(n int) ([]*kgo.Record, []byte) {
	recs := make([]*kgo.Record, n)
	var ndjson bytes.Buffer
	// Sized once: growing it by doubling cleared every larger buffer again
	// (3.2 s of the setup in a profile, 1.1 s now: this machine's first
	// touch of a page is slow).
	ndjson.Grow(n * 512)
	for i := range recs {
		ts := base.Add(time.Duration(i%5)*time.Hour + time.Duration(i%3600)*time.Second + time.Duration(i%1000)*time.Millisecond)
		v := fmt.Sprintf(`{"event_id":"0190a1b2-c3d4-7e5f-8a9b-%012d","type":"%s","url":"https://shop.example/p/%d","referrer":"https://search.example/","title":"Product %d","anonymous_id":"anon-%d","session_id":"s-%d","ts":"%s","received_at":"%s","ip":"203.0.113.0","user_agent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36","properties":{"n":%d,"plan":"pro"}}`,
			i, [...]string{"page_view", "click", "add_to_cart"}[i%3], i%500, i%500, i%20000, i%50000,
			ts.Format(time.RFC3339Nano), ts.Add(150*time.Millisecond).Format(time.RFC3339Nano), i)
		recs[i] = &kgo.Record{Topic: "clicks", Offset: int64(i), Value: []byte(v),
			Timestamp: base.Add(5*time.Hour + time.Duration(i)*50*time.Microsecond)}
		ndjson.WriteString(v)
		ndjson.WriteByte('\n')
	}
	return recs, ndjson.Bytes()
}

// usage is the process's resource use so far.
type usage struct {
	user, sys time.Duration
	faults    int64 // minor page faults
}

func getUsage(b *testing.B) usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return usage{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), ru.Minflt}
}

// cpu is the CPU time, user and system, between u and the later v.
func (u usage) cpu(v usage) time.Duration { return v.user - u.user + v.sys - u.sys }

// BenchmarkClicksToParquet lands click events (decode, bucket by hour, Arrow,
// Parquet, publish to the file store) on one goroutine, and in the same run
// has DuckDB, limited to one thread, convert the same events from
// newline-delimited JSON to Parquet. It reports rows per CPU-second (rows/s per
// core) for both, after one warm-up run each, and their ratio (lake / DuckDB),
// for zstd and snappy, with dedup off and on (every click has a distinct
// UUID, so dedup remembers all 200,000 and drops none), and the minor page
// faults per run and the kernel's share of the CPU of each.
func BenchmarkClicksToParquet(b *testing.B) {
	const n = 200_000
	recs, ndjson := benchClicks(n)
	dir := b.TempDir()
	jsonPath := filepath.Join(dir, "clicks.ndjson")
	if err := os.WriteFile(jsonPath, ndjson, 0o644); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SET threads = 1"); err != nil {
		b.Fatal(err)
	}
	for _, codec := range []string{"zstd", "snappy"} {
		for _, dedup := range []string{"off", "on"} {
			b.Run(codec+"/dedup="+dedup, func(b *testing.B) { benchBoth(b, db, recs, jsonPath, codec, dedup) })
		}
	}
}

func benchBoth(b *testing.B, db *sql.DB, recs []*kgo.Record, jsonPath, codec, dedup string) {
	n := len(recs)
	dir := b.TempDir()
	// CPU time (user + system, all threads of the process), not wall time:
	// rows per CPU-second is rows/s per core, and it does not move with
	// the load other processes put on the machine.
	//
	// Each side is measured in its steady state: one unmeasured run right
	// before its measured runs, which go back to back. A sink runs
	// continuously; after a pause (the setup, or DuckDB's turn) the Go
	// runtime has handed its idle heap back to the kernel, and the first
	// run after it pays the page faults of growing the heap again.
	workers := make([]*Worker, b.N+1)
	for i := range workers {
		root := filepath.Join(dir, fmt.Sprint("lake-", i))
		workers[i], _, _ = testWorker(b, root, func(c *Config) { c.RollRows = int64(n); c.Compression = codec; c.Dedup = dedup })
	}
	land := func(w *Worker) {
		if err := feed(w, recs, 0); err != nil {
			b.Fatal(err)
		}
		if err := flushAll(w); err != nil {
			b.Fatal(err)
		}
	}
	land(workers[b.N])
	start := getUsage(b)
	for _, w := range workers[:b.N] {
		land(w)
	}
	end := getUsage(b)
	lakeTime := start.cpu(end)
	// The kernel's share of the sink's CPU is mostly page faults: the Go
	// runtime gives freed heap pages back and the next batches fault them
	// in again (see docs/benchmarks.md, Sinks).
	b.ReportMetric(float64(end.sys-start.sys)/float64(lakeTime), "lake_sys_share")
	b.ReportMetric(float64(end.faults-start.faults)/float64(b.N), "lake_faults/op")
	convert := func(i int) {
		out := filepath.Join(dir, fmt.Sprint("duck-", i, ".parquet"))
		if _, err := db.Exec(fmt.Sprintf(`COPY (SELECT * FROM read_json_auto('%s')) TO '%s' (FORMAT parquet, COMPRESSION %s)`, jsonPath, out, codec)); err != nil {
			b.Fatal(err)
		}
	}
	// DuckDB starts with no collection pending from the sink's garbage.
	runtime.GC()
	convert(b.N)
	start = getUsage(b)
	for i := 0; i < b.N; i++ {
		convert(i)
	}
	end = getUsage(b)
	duckTime := start.cpu(end)
	b.ReportMetric(float64(end.sys-start.sys)/float64(duckTime), "duckdb_sys_share")
	b.ReportMetric(float64(end.faults-start.faults)/float64(b.N), "duckdb_faults/op")
	lakeRate := float64(n*b.N) / lakeTime.Seconds()
	duckRate := float64(n*b.N) / duckTime.Seconds()
	b.ReportMetric(lakeRate, "lake_rows/cpu-s")
	b.ReportMetric(duckRate, "duckdb_rows/cpu-s")
	b.ReportMetric(lakeRate/duckRate, "ratio")
}

// TestMain runs the package's tests and benchmarks as `millrace sink` runs:
// with freed memory going back to the kernel lazily (internal/lazyfree).
func TestMain(m *testing.M) {
	if err := lazyfree.Reexec(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(m.Run())
}
