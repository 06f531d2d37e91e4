package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
	"millrace/sinks/iceberg"
)

// TestIcebergCompaction: a sink lands 1,500 clicks of one hour long past
// (2024-05-01 08:00) in 1-minute rolls of record time, 25 small files,
// with its own scheduled maintenance off. `millrace lake compact
// --dry-run` says what it would do and changes nothing; `millrace lake
// compact` then merges the hour into at least 10x fewer files. The rows
// and their content are the same (a digest of every row, read with
// iceberg-go's scan, before and after), and a reader scanning the table's
// current snapshot in a loop throughout the compaction always counts
// 1,500 rows.
func TestIcebergCompaction(t *testing.T) {
	t.Parallel()
	const (
		total = 1500 // one click a second of record time: 25 one-minute rolls
		topic = "clicks"
		group = "lake"
	)
	b := startBroker(t)
	b.createTopic(t, topic, 1, nil)
	produceClicksAtEventTime(t, b, topic, total)
	root := t.TempDir()
	config := filepath.Join(t.TempDir(), "sink.yaml")
	if err := os.WriteFile(config, []byte("lake:\n  iceberg:\n    maintenance:\n      disabled: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := startSink(t, b, "sink", group, topic, "file://"+root, "--format", "iceberg", "--roll-age", "1m", "--config", config)
	waitLanded(t, b, group, topic, 2*time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Fatalf("SIGTERM did not end the sink with status 0 (status %d)", sink.exitCode())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cat := openIcebergDirCatalog(ctx, t, root)
	load := func() *table.Table { return loadIcebergTable(t, cat, topic) }
	before := load()
	filesBefore := dataFiles(t, before)
	if filesBefore < 20 {
		t.Fatalf("the sink landed %d files; the test needs at least 20 small ones", filesBefore)
	}
	digestBefore, rowsBefore := rowDigest(t, before)
	if rowsBefore != total {
		t.Fatalf("%d rows before compaction, want %d", rowsBefore, total)
	}

	out := run(t, 2*time.Minute, "", millraceBin, "lake", "compact", topic, "--out", "file://"+root, "--dry-run")
	if want := fmt.Sprintf("millrace.clicks: would merge %d files into 1, in 1 closed partitions", filesBefore); !strings.Contains(out, want) {
		t.Errorf("compact --dry-run said %q, want %q", out, want)
	}
	if id := load().CurrentSnapshot().SnapshotID; id != before.CurrentSnapshot().SnapshotID {
		t.Errorf("compact --dry-run committed snapshot %d", id)
	}

	// The reader: the table's current snapshot, counted again and again
	// until it has read the compaction's snapshot.
	reader := &snapshotReader{cat: cat, id: cat.Identifier(topic), want: total}
	reader.firstRead = make(chan struct{})
	readerDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(readerDone)
		reader.run(ctx, stop)
	}()
	<-reader.firstRead

	out = run(t, 2*time.Minute, "", millraceBin, "lake", "compact", topic, "--out", "file://"+root)
	after := load()
	reader.waitFor(t, after.CurrentSnapshot().SnapshotID)
	close(stop)
	<-readerDone
	if want := fmt.Sprintf("millrace.clicks: merged %d files into 1, in 1 closed partitions", filesBefore); !strings.Contains(out, want) {
		t.Errorf("compact said %q, want %q", out, want)
	}
	if filesAfter := dataFiles(t, after); filesAfter*10 > filesBefore {
		t.Errorf("%d files after compaction, %d before: want at least 10x fewer", filesAfter, filesBefore)
	}
	if digest, rows := rowDigest(t, after); rows != total || digest != digestBefore {
		t.Errorf("after compaction %d rows, digest %s; before %d rows, digest %s", rows, digest, rowsBefore, digestBefore)
	}
	reads, wrong := reader.result()
	if len(wrong) > 0 {
		t.Errorf("a reader during the compaction counted %v (of %d reads), want %d every time", wrong, reads, total)
	}
	t.Logf("%d files into %d; the reader read %d times", filesBefore, dataFiles(t, after), reads)

	// Every table of the namespace, when no topic is named.
	out = run(t, time.Minute, "", millraceBin, "lake", "expire", "--out", root, "--dry-run")
	if !strings.Contains(out, "millrace.clicks: would expire 0 snapshots") {
		t.Errorf("expire --dry-run over every table said %q, want a line for millrace.clicks", out)
	}
}

// produceClicksAtEventTime produces clicks [0, n) of one hour (clickEvent's),
// each with its event time as the record's timestamp (CreateTime, as a
// producer that stamps its events sets it), so the sink's roll age, which
// is measured in record time, cuts them by event time.
func produceClicksAtEventTime(t *testing.T, k kafka, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := kafkaClient(t, k, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	var failed atomic.Value
	for i := range n {
		v, _ := clickEvent(i, 1, "")
		var ev struct {
			TS time.Time `json:"ts"`
		}
		if err := json.Unmarshal(v, &ev); err != nil {
			t.Fatal(err)
		}
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("ev-%09d", i)), Value: v, Timestamp: ev.TS}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// dataFiles is the number of data files tbl's current snapshot lists.
func dataFiles(t *testing.T, tbl *table.Table) int {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// rowDigest reads every column of every row of tbl's current snapshot with
// iceberg-go's scan and returns a digest of the sorted rows, and their count.
func rowDigest(t *testing.T, tbl *table.Table) (string, int) {
	t.Helper()
	_, batches, err := tbl.Scan().ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, col := range rec.Columns() {
				fmt.Fprintf(&b, "%s=%s\x00", rec.ColumnName(c), col.ValueStr(i))
			}
			rows = append(rows, b.String())
		}
		rec.Release()
	}
	slices.Sort(rows)
	h := sha256.New()
	for _, r := range rows {
		h.Write([]byte(r))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil)), len(rows)
}

// snapshotReader counts the rows of a table's current snapshot in a loop,
// as a query engine polling the table would, remembering every count that
// differs from want and the snapshots it read.
type snapshotReader struct {
	cat       *iceberg.Catalog
	id        table.Identifier
	want      int
	firstRead chan struct{} // closed after the first read

	mu    sync.Mutex // guards the following
	reads int
	wrong []string
	seen  map[int64]bool
}

func (r *snapshotReader) run(ctx context.Context, stop <-chan struct{}) {
	for first := true; ; first = false {
		select {
		case <-stop:
			return
		default:
		}
		snapshot, count, err := r.read(ctx)
		r.mu.Lock()
		r.reads++
		if r.seen == nil {
			r.seen = map[int64]bool{}
		}
		if err != nil {
			r.wrong = append(r.wrong, err.Error())
		} else {
			r.seen[snapshot] = true
			if count != r.want {
				r.wrong = append(r.wrong, fmt.Sprintf("%d rows in snapshot %d", count, snapshot))
			}
		}
		r.mu.Unlock()
		if first {
			close(r.firstRead)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (r *snapshotReader) read(ctx context.Context) (int64, int, error) {
	tbl, err := r.cat.Catalog().LoadTable(ctx, r.id)
	if err != nil {
		return 0, 0, err
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields("event_id")).ToArrowRecords(ctx)
	if err != nil {
		return 0, 0, err
	}
	count := 0
	for rec, err := range batches {
		if err != nil {
			return 0, 0, err
		}
		count += rec.Column(0).(*array.String).Len()
		rec.Release()
	}
	return tbl.CurrentSnapshot().SnapshotID, count, nil
}

// waitFor waits until the reader has read snapshot.
func (r *snapshotReader) waitFor(t *testing.T, snapshot int64) {
	t.Helper()
	waitfor.Until(t, time.Minute, fmt.Sprintf("the reader to read snapshot %d", snapshot), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.seen[snapshot]
	})
}

func (r *snapshotReader) result() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads, slices.Clone(r.wrong)
}
