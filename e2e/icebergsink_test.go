package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/sinks/iceberg"
)

// TestIcebergSinkKilledMidStream: `millrace sink --format iceberg` lands
// clicks of two partitions into a table of an SQLite catalog in rolls of
// 100 rows, is SIGKILLed midway (its last files published, maybe not
// committed) and restarted. iceberg-go's scan finds every event exactly
// once, the snapshot's offsets equal the group's committed offsets, and
// DuckDB's read_parquet over the files the current snapshot lists (not the
// directory, which may hold the killed worker's uncommitted files) gives
// the same count.
func TestIcebergSinkKilledMidStream(t *testing.T) {
	t.Parallel()
	const (
		total = 2000
		topic = "clicks"
		group = "lake"
	)
	b := startBroker(t)
	b.createTopic(t, topic, 2, nil)
	produceClicks(t, b, topic, 0, total, 2, nil)
	root := t.TempDir()
	sink := startSink(t, b, "sink", group, topic, "file://"+root, "--format", "iceberg", "--roll-rows", "100")

	waitMidway(t, b, group, topic, total/4, 2*time.Minute)
	sink.kill()
	sink.restartAfter(100 * time.Millisecond)
	waitLanded(t, b, group, topic, 2*time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("SIGTERM did not end the sink with status 0 (status %d)", sink.exitCode())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat, err := iceberg.Open(ctx, iceberg.Config{Directory: root, Namespace: "millrace"})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.Catalog().LoadTable(ctx, cat.Identifier(topic))
	if err != nil {
		t.Fatal(err)
	}

	rows, distinct := icebergScanCounts(t, tbl)
	if rows != total || distinct != total {
		t.Errorf("iceberg-go scan: %d rows, %d distinct event ids; want %d, %d", rows, distinct, total, total)
	}

	progress, err := iceberg.ReadProgress(tbl, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := kadm.NewClient(kafkaClient(t, b)).FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for part := range int32(2) {
		committed, _ := offs.Lookup(topic, part)
		if at, ok := progress.Offsets[part]; !ok || at != committed.At {
			t.Errorf("partition %d: the snapshot's offset is %d (%v), the group's %d", part, at, ok, committed.At)
		}
	}

	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, 0, len(tasks))
	for _, task := range tasks {
		files = append(files, "'"+strings.TrimPrefix(task.File.FilePath(), "file://")+"'")
	}
	var count, ids int64
	q := fmt.Sprintf("SELECT count(*), count(DISTINCT event_id) FROM read_parquet([%s])", strings.Join(files, ", "))
	if err := openDuck(t).QueryRow(q).Scan(&count, &ids); err != nil {
		t.Fatal(err)
	}
	if count != total || ids != total {
		t.Errorf("DuckDB over the snapshot's %d files: %d rows, %d distinct event ids; want %d", len(files), count, ids, total)
	}
}

// icebergScanCounts reads tbl's current snapshot with iceberg-go's scan and
// returns its rows and distinct event ids.
func icebergScanCounts(t *testing.T, tbl *table.Table) (rows, distinct int) {
	t.Helper()
	_, batches, err := tbl.Scan(table.WithSelectedFields("event_id")).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Column(rec.Schema().FieldIndices("event_id")[0]).(*array.String)
		for i := range col.Len() {
			seen[col.Value(i)] = true
			rows++
		}
		rec.Release()
	}
	return rows, len(seen)
}
