package lake

import (
	"reflect"
	"testing"

	iceberggo "github.com/apache/iceberg-go"

	"millrace/schemas"
	"millrace/sinks/iceberg"
	"millrace/sinks/parquet"
	"millrace/store"
)

// TestWriterFooterIsTheFilesFooter: the data file entry a commit builds
// from the writer's footer (without reading the file back) is the one the
// footer read back from the file gives: counts, sizes, bounds, split
// offsets and partition alike. A file gone since it was published fails
// the commit's data file either way.
func TestWriterFooterIsTheFilesFooter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := iceberg.Open(ctx, iceberg.Config{Directory: root, Namespace: "millrace"})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.Table(ctx, "clicks", schemas.Click, iceberg.TableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ts := tableStore{Store: st, namespace: "millrace"}
	name := "clicks/dt=2024-05-01/hr=10/part-0-0-99.parquet"
	obj, err := ts.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := parquet.NewWriter(obj, schemas.Click, parquet.Options{RowGroupRows: 40})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(100) {
		r := click(i, 0)
		if err := w.Append(r.Value, r.Timestamp); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := obj.PublishAs(ctx, name); err != nil {
		t.Fatal(err)
	}
	footer, err := w.Footer()
	if err != nil {
		t.Fatal(err)
	}
	c := &tableCommitter{store: ts}
	fromWriter, err := c.dataFile(ctx, tbl, "clicks", name, nil, footer)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := c.dataFile(ctx, tbl, "clicks", name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for what, get := range map[string]func(iceberggo.DataFile) any{
		"count":        func(d iceberggo.DataFile) any { return d.Count() },
		"size":         func(d iceberggo.DataFile) any { return d.FileSizeBytes() },
		"path":         func(d iceberggo.DataFile) any { return d.FilePath() },
		"column sizes": func(d iceberggo.DataFile) any { return d.ColumnSizes() },
		"value counts": func(d iceberggo.DataFile) any { return d.ValueCounts() },
		"null counts":  func(d iceberggo.DataFile) any { return d.NullValueCounts() },
		"lower bounds": func(d iceberggo.DataFile) any { return d.LowerBoundValues() },
		"upper bounds": func(d iceberggo.DataFile) any { return d.UpperBoundValues() },
		"splits":       func(d iceberggo.DataFile) any { return d.SplitOffsets() },
		"partition":    func(d iceberggo.DataFile) any { return d.Partition() },
	} {
		if a, b := get(fromWriter), get(fromFile); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: from the writer %v, from the file %v", what, a, b)
		}
	}
	if fromWriter.Count() != 100 || len(fromWriter.SplitOffsets()) != 3 || len(fromWriter.LowerBoundValues()) == 0 {
		t.Errorf("the entry has %d rows in %d row groups and %d lower bounds, want 100 in 3 and some",
			fromWriter.Count(), len(fromWriter.SplitOffsets()), len(fromWriter.LowerBoundValues()))
	}
	if err := ts.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.dataFile(ctx, tbl, "clicks", name, nil, footer); err == nil {
		t.Error("a file removed since its publication got a data file entry")
	}
}
