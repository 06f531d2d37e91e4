package iceberg

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"millrace/internal/s3test"
	"millrace/store"
)

// TestS3WarehouseRollsAndMaintenance: on a warehouse in a bucket of a real
// S3 server (versitygw), with the store's settings for the file IO, rolls
// committed with CommitRoll are read back by iceberg-go's scan; the closed
// hour's files are compacted into one object with the same rows and
// offsets, and the orphan sweep deletes an object no snapshot references.
func TestS3WarehouseRollsAndMaintenance(t *testing.T) {
	t.Parallel()
	s3cfg := startS3Bucket(t, "lake")
	s3cfg.Prefix = "tables"
	c, err := Open(t.Context(), Config{Path: filepath.Join(t.TempDir(), "catalog.db"), S3: &s3cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tbl := metricsTable(t, c)
	if want := "s3://lake/tables/millrace.db/metrics"; tbl.Location() != want {
		t.Fatalf("the table is at %s, want %s", tbl.Location(), want)
	}
	var all []metricRow
	for i := range 3 {
		rs := rows(fmt.Sprintf("r%d", i), 4, hour0)
		all = append(all, rs...)
		tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
			Files:  []iceberg.DataFile{writeS3File(t, tbl, fmt.Sprintf("r-%d.parquet", i), rs)},
			Ranges: map[int32]Range{0: {int64(4 * i), int64(4*i + 4)}}})
	}
	if got := scan(t, tbl); !slices.Equal(got, wantRows(all)) {
		t.Fatalf("scan: %d rows, want %d", len(got), len(all))
	}

	res, err := c.Compact(t.Context(), tbl, CompactOptions{Now: afterHour0})
	if err != nil {
		t.Fatal(err)
	}
	files := filesByHour(t, res.Table)[hourOf(hour0)]
	if res.FilesRemoved != 3 || res.FilesAdded != 1 || len(files) != 1 || !strings.HasPrefix(files[0], tbl.Location()+"/data/") {
		t.Errorf("compaction %+v leaves %v, want the 3 files in one object under the table's data/", res, files)
	}
	if got := scan(t, res.Table); !slices.Equal(got, wantRows(all)) {
		t.Errorf("scan after compaction: %d rows, want %d", len(got), len(all))
	}
	if got := progress(t, res.Table, "sink").Offsets[0]; got != 12 {
		t.Errorf("offset after compaction %d, want 12", got)
	}

	orphan := writeS3File(t, res.Table, "zombie.parquet", rows("z", 2, hour0)).FilePath()
	swept, err := c.RemoveOrphans(t.Context(), res.Table, OrphanOptions{SafetyAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	// The compacted rolls are referenced by the snapshots before the
	// compaction, so only the zombie's file is an orphan.
	if len(swept.Files) != 1 || swept.Files[0] != orphan {
		t.Errorf("the sweep deleted %v, want only %s", swept.Files, orphan)
	}
	if got := scan(t, res.Table); !slices.Equal(got, wantRows(all)) {
		t.Errorf("scan after the sweep: %d rows, want %d", len(got), len(all))
	}
}

// writeS3File writes rs as a Parquet object named name under the table's
// data location through the table's own file IO, and describes it for a
// commit.
func writeS3File(t *testing.T, tbl *table.Table, name string, rs []metricRow) iceberg.DataFile {
	t.Helper()
	fs, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	location := tbl.Location() + "/data/" + name
	out, err := fs.(iceio.WriteFileIO).Create(location)
	if err != nil {
		t.Fatal(err)
	}
	build := func(sc *arrow.Schema, b *array.RecordBuilder) { appendMetricRows(sc, b, rs) }
	return writeDataFile(t, tbl, location, out, build, func() (int64, error) {
		info, err := fs.(iceio.StatIO).Stat(location)
		if err != nil {
			return 0, err
		}
		return info.Size(), nil
	})
}

// startS3Bucket starts an S3 server with bucket and returns the store
// settings that reach it.
func startS3Bucket(t *testing.T, bucket string) store.S3Config {
	return store.S3Config{Endpoint: s3test.StartBucket(t, bucket), Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey}
}
