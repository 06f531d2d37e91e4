package lake

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/store"
)

// Sizes of BenchmarkSinkFormats: 300,000 clicks, whose event times span
// five hours (five files a roll), in rolls of each of benchFormatRolls rows:
// 15 rolls of 20,000, where the per-roll commit weighs most, and 5 of
// 60,000. The default roll, a minute of a topic's records, is larger than
// either on any busy topic.
const benchFormatRows = 300_000

var benchFormatRolls = []int{20_000, 60_000}

// BenchmarkSinkFormats lands the same clicks end to end in each format: a
// worker joins its group on an in-process broker, fetches, lands the
// topic in rolls of benchFormatRolls rows into a fresh filesystem warehouse
// (format iceberg: a table of the SQLite catalog in it), and commits each
// roll. It reports
//   - rows/s: the steady state, the rows of every roll after the first
//     divided by the time from the first roll's commit to the last's (the
//     group join and the catalog's opening are not in it);
//   - rows/cpu-s: the same rows per CPU-second of the process (the
//     worker and the broker) over the same span, which the machine's
//     load moves less than it moves rows/s;
//   - commit-p50-ms, commit-p99-ms: the commit latency per roll (the span
//     of millrace_lake_commit_seconds), over every roll of every run;
//   - wait-ms (format iceberg): what the landing waited per roll for the
//     commit running beside it (millrace_lake_commit_wait_seconds), the
//     part of that latency still on the landing path; hive's commit is
//     all on it.
//
// The machine's load moves both figures: run hive and iceberg
// alternately, one invocation each (docs/benchmarks.md, "Sink formats").
func BenchmarkSinkFormats(b *testing.B) {
	ctx := context.Background()
	addr, _ := startBroker(b, b.TempDir())
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		b.Fatal(err)
	}
	recs, _ := benchClicks(benchFormatRows)
	for len(recs) > 0 {
		n := min(10_000, len(recs))
		batch := make([]*kgo.Record, n)
		for i, r := range recs[:n] {
			batch[i] = &kgo.Record{Value: r.Value, Timestamp: r.Timestamp}
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		recs = recs[n:]
	}
	for _, format := range []string{FormatHive, FormatIceberg} {
		for _, roll := range benchFormatRolls {
			b.Run(fmt.Sprintf("%s/roll=%d", format, roll), func(b *testing.B) { benchSinkFormat(b, addr, format, roll) })
		}
	}
}

// rollTimes are the commits of one or more runs: when each ended and how
// long it took.
type rollTimes struct {
	mu    sync.Mutex // guards the following
	ended []time.Time
	cpu   []time.Duration // the process's CPU time (user + system) when each ended
	took  []time.Duration
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchGroups numbers the runs' groups: the testing package calls a
// benchmark function more than once (b.N 1, then the -benchtime count), and
// a group that landed the topic once would start at its end.
var benchGroups atomic.Int64

func benchSinkFormat(b *testing.B, addr, format string, roll int) {
	var all rollTimes
	var steady, steadyCPU time.Duration
	var steadyRows int64
	var waited time.Duration
	var waits uint64
	for range b.N {
		var run rollTimes
		landed := make(chan struct{})
		root := b.TempDir()
		st, err := store.NewFile(root, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{Brokers: []string{addr}, Group: fmt.Sprintf("bench-%s-%d-%d", format, roll, benchGroups.Add(1)), Topics: []string{"clicks"},
			Schema: "click", Format: format, RollRows: int64(roll), IdleTimeout: time.Second, AuditTopic: "off",
			AfterCommit: func(_ string, _ int32, next int64, took time.Duration) {
				run.mu.Lock()
				run.ended = append(run.ended, time.Now())
				run.cpu = append(run.cpu, cpuTime())
				run.took = append(run.took, took)
				run.mu.Unlock()
				if next == benchFormatRows {
					close(landed)
				}
			}}
		if format == FormatIceberg {
			cfg.Iceberg = TableConfig{Warehouse: root}
		}
		w, err := New(cfg, st, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		select {
		case <-landed:
		case <-w.Done():
			b.Fatalf("the worker stopped: %v", w.Err())
		case <-time.After(5 * time.Minute):
			b.Fatal("the clicks were not landed in 5 minutes")
		}
		if err := w.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		var m dto.Metric
		if err := w.metrics.commitWait.WithLabelValues("clicks").(prometheus.Histogram).Write(&m); err != nil {
			b.Fatal(err)
		}
		waited += time.Duration(m.GetHistogram().GetSampleSum() * float64(time.Second))
		waits += m.GetHistogram().GetSampleCount()
		run.mu.Lock()
		if len(run.ended) < 2 {
			b.Fatalf("%d rolls, want at least 2", len(run.ended))
		}
		steady += run.ended[len(run.ended)-1].Sub(run.ended[0])
		steadyCPU += run.cpu[len(run.cpu)-1] - run.cpu[0]
		steadyRows += int64(benchFormatRows - roll)
		all.ended = append(all.ended, run.ended...)
		all.took = append(all.took, run.took...)
		run.mu.Unlock()
	}
	slices.Sort(all.took)
	b.ReportMetric(float64(steadyRows)/steady.Seconds(), "rows/s")
	b.ReportMetric(float64(steadyRows)/steadyCPU.Seconds(), "rows/cpu-s")
	b.ReportMetric(quantile(all.took, 0.50).Seconds()*1000, "commit-p50-ms")
	b.ReportMetric(quantile(all.took, 0.99).Seconds()*1000, "commit-p99-ms")
	b.ReportMetric(float64(len(all.took))/float64(b.N), "rolls/op")
	if waits > 0 {
		b.ReportMetric(waited.Seconds()*1000/float64(waits), "wait-ms")
	}
}

// quantile is the q-quantile of the sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted)) + 0.5)
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// TestCommitSecondsByFormat: every landed window is one observation of
// millrace_lake_commit_seconds under its topic and the worker's format,
// and one call of AfterCommit with the window's end.
func TestCommitSecondsByFormat(t *testing.T) {
	var ends []int64
	w, _, _ := testWorker(t, t.TempDir(), func(c *Config) {
		c.RollRows = 2
		c.AfterCommit = func(topic string, partition int32, next int64, took time.Duration) {
			if topic != "clicks" || partition != 0 || took < 0 {
				t.Errorf("AfterCommit(%s, %d, %d, %v)", topic, partition, next, took)
			}
			ends = append(ends, next)
		}
	})
	if err := feed(w, []*kgo.Record{click(0, 0), click(1, 0), click(2, 0)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ends, []int64{2, 3}) {
		t.Errorf("AfterCommit saw windows ending at %v, want [2 3]", ends)
	}
	var m dto.Metric
	if err := w.metrics.commitLatency.WithLabelValues("clicks", FormatHive).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 2 {
		t.Errorf("commit_seconds{topic=clicks,format=hive} has %d observations, want 2 (one per window)", n)
	}
}

// BenchmarkIcebergCommitAge lands 4,000 clicks in rolls of 10 rows into a
// fresh table: 400 snapshots, none expired. Every commit rewrites the
// table's metadata file, which lists every snapshot, and iceberg-go's SQL
// catalog reads and parses the current one first, so a commit costs more
// as the table keeps more snapshots. It reports the median commit latency
// of the first 100 rolls and of the last 100, and the size of the last
// metadata file.
func BenchmarkIcebergCommitAge(b *testing.B) {
	const rows, roll = 4_000, 10
	ctx := context.Background()
	addr, _ := startBroker(b, b.TempDir())
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		b.Fatal(err)
	}
	batch := make([]*kgo.Record, rows)
	for i := range batch {
		r := click(int64(i), 0) // one hour: one file per roll
		batch[i] = &kgo.Record{Value: r.Value, Timestamp: r.Timestamp}
	}
	if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	var first, last []time.Duration
	var metadataBytes int64
	for range b.N {
		var took []time.Duration
		landed := make(chan struct{})
		root := b.TempDir()
		st, err := store.NewFile(root, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{Brokers: []string{addr}, Group: fmt.Sprintf("age-%d", benchGroups.Add(1)), Topics: []string{"clicks"}, Schema: "click",
			Format: FormatIceberg, Iceberg: TableConfig{Warehouse: root}, RollRows: int64(roll), IdleTimeout: time.Second, AuditTopic: "off",
			AfterCommit: func(_ string, _ int32, next int64, d time.Duration) {
				took = append(took, d) // one commit at a time, read after landed
				if next == rows {
					close(landed)
				}
			}}
		w, err := New(cfg, st, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case <-landed:
		case <-w.Done():
			b.Fatalf("the worker stopped: %v", w.Err())
		}
		if err := w.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		if len(took) < 200 {
			b.Fatalf("%d rolls, want at least 200", len(took))
		}
		first = append(first, took[:100]...)
		last = append(last, took[len(took)-100:]...)
		metadata, err := currentMetadata(ctx, root)
		if err != nil {
			b.Fatal(err)
		}
		info, err := os.Stat(strings.TrimPrefix(metadata, "file://"))
		if err != nil {
			b.Fatal(err)
		}
		metadataBytes = info.Size()
	}
	slices.Sort(first)
	slices.Sort(last)
	b.ReportMetric(quantile(first, 0.5).Seconds()*1000, "first100-p50-ms")
	b.ReportMetric(quantile(last, 0.5).Seconds()*1000, "last100-p50-ms")
	b.ReportMetric(float64(metadataBytes), "metadata-bytes")
}

// currentMetadata is the clicks table's current metadata file, as the
// SQLite catalog in the warehouse root records it.
func currentMetadata(ctx context.Context, root string) (string, error) {
	db, err := sql.Open("sqlite", root+"/catalog.db")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var location string
	err = db.QueryRowContext(ctx, "SELECT metadata_location FROM iceberg_tables WHERE table_name = 'clicks'").Scan(&location)
	return location, err
}
