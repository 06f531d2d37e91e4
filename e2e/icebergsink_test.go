package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	tbl := loadIcebergTable(t, openIcebergDirCatalog(ctx, t, root), topic)
	checkIcebergScan(t, tbl, total)
	checkSnapshotOffsets(ctx, t, kadm.NewClient(kafkaClient(t, b)), tbl, group, topic, 2)
	checkDuckDBOverSnapshot(ctx, t, tbl, total, localFilePath)
}
