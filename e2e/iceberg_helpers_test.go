package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/sinks/iceberg"
)

// The checks the Iceberg sink's e2e tests make of the table a sink landed
// into: the same rows by iceberg-go's scan and by DuckDB over the files the
// current snapshot lists, and the snapshot's offsets equal to the group's.

// openIcebergCatalog opens the catalog cfg describes; it is closed when the
// test ends.
func openIcebergCatalog(ctx context.Context, t *testing.T, cfg iceberg.Config) *iceberg.Catalog {
	t.Helper()
	cat, err := iceberg.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

// openIcebergDirCatalog opens the SQLite catalog a sink keeps in a
// directory warehouse root, in the sink's default namespace.
func openIcebergDirCatalog(ctx context.Context, t *testing.T, root string) *iceberg.Catalog {
	t.Helper()
	return openIcebergCatalog(ctx, t, iceberg.Config{Directory: root, Namespace: "millrace"})
}

// loadIcebergTable loads the table named name (a topic's, or its
// dead-letter table's) from cat.
func loadIcebergTable(t *testing.T, cat *iceberg.Catalog, name string) *table.Table {
	t.Helper()
	tbl, err := cat.Catalog().LoadTable(t.Context(), cat.Identifier(name))
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// checkIcebergScan fails the test unless iceberg-go's scan of tbl reads
// total rows with total distinct event ids.
func checkIcebergScan(t *testing.T, tbl *table.Table, total int) {
	t.Helper()
	if rows, distinct := icebergScanCounts(t, tbl); rows != total || distinct != total {
		t.Errorf("iceberg-go scan: %d rows, %d distinct event ids; want %d, %d", rows, distinct, total, total)
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

// checkSnapshotOffsets fails the test unless the offsets of group on topic
// that tbl's snapshot summary carries are the group's committed offsets,
// for each of the topic's partitions.
func checkSnapshotOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, tbl *table.Table, group, topic string, partitions int32) {
	t.Helper()
	progress, err := iceberg.ReadProgress(tbl, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for part := range partitions {
		committed, _ := offs.Lookup(topic, part)
		if at, ok := progress.Offsets[part]; !ok || at != committed.At {
			t.Errorf("partition %d: the snapshot's offset is %d (%v), the group's %d", part, at, ok, committed.At)
		}
	}
}

// checkDuckDBOverSnapshot fails the test unless DuckDB's read_parquet over
// the data files tbl's current snapshot lists (not a directory, which may
// hold files no snapshot lists) counts total rows with total distinct
// event ids. local gives the path DuckDB reads the i-th listed file at. It
// returns the listed files' paths.
func checkDuckDBOverSnapshot(ctx context.Context, t *testing.T, tbl *table.Table, total int64, local func(i int, path string) string) []string {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := make([]string, 0, len(tasks))
	files := make([]string, 0, len(tasks))
	for i, task := range tasks {
		listed = append(listed, task.File.FilePath())
		files = append(files, "'"+local(i, task.File.FilePath())+"'")
	}
	var count, ids int64
	q := fmt.Sprintf("SELECT count(*), count(DISTINCT event_id) FROM read_parquet([%s])", strings.Join(files, ", "))
	if err := openDuck(t).QueryRow(q).Scan(&count, &ids); err != nil {
		t.Fatal(err)
	}
	if count != total || ids != total {
		t.Errorf("DuckDB over the snapshot's %d files: %d rows, %d distinct event ids; want %d", len(files), count, ids, total)
	}
	return listed
}

// localFilePath is a file:// data file path as DuckDB reads it.
func localFilePath(_ int, path string) string { return strings.TrimPrefix(path, "file://") }
