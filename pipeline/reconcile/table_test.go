package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"millrace/audit"
	"millrace/schemas"
	"millrace/sinks/iceberg"
	"millrace/sinks/lakeread"
	"millrace/sinks/lakeread/tabletest"
	"millrace/store"
)

// TestReconcileTable reconciles a table with a known set of rows: a file
// with the sink's footer counts, one without (a compaction's output) and
// one whose counts do not add up to its rows, both counted row by row;
// beside them a file no snapshot lists, whose footer claims 100 rows and
// must not be counted. Hours are complete by the table's watermark, or up
// to now once every partition is landed to its end offset.
func TestReconcileTable(t *testing.T) {
	h10 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	h11 := h10.Add(time.Hour)
	hour10, hour11 := audit.Hour(h10), audit.Hour(h11)
	click := func(host string, at time.Time) string {
		return fmt.Sprintf(`{"type":"click","url":"https://%s/p","ts":%q}`, host, at.Format(time.RFC3339))
	}
	counts := func(c audit.RowCounts) map[string]string {
		return map[string]string{audit.MetaRows: audit.EncodeRowCounts(c)}
	}
	dir := t.TempDir()
	w := tabletest.New(t, dir)
	tbl := w.Table(t, "clicks", schemas.Click)
	w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "lake-clicks", From: 0, To: 4, Watermark: h11.Add(30 * time.Minute),
		Files: []tabletest.File{
			{Name: "dt=2026-12-02/hr=10/part-0-00000000000000000000-00000000000000000001.parquet", At: h10,
				Events:   []string{click("shop.example", h10), click("shop.example", h10.Add(time.Minute))},
				Metadata: counts(audit.RowCounts{hour10: {"shop.example": 2}})},
			{Name: "dt=2026-12-02/hr=10/compacted-0123.parquet", At: h10,
				Events: []string{click("other.example", h10.Add(2*time.Minute))}},
			{Name: "dt=2026-12-02/hr=11/part-0-00000000000000000003-00000000000000000003.parquet", At: h11,
				Events:   []string{click("shop.example", h11.Add(5*time.Minute))},
				Metadata: counts(audit.RowCounts{hour11: {"shop.example": 5}})},
		}})
	w.Write(t, tbl, schemas.Click, tabletest.File{
		Name: "dt=2026-12-02/hr=10/part-0-00000000000000000000-00000000000000000099.parquet", At: h10,
		Events: []string{click("shop.example", h10)}, Metadata: counts(audit.RowCounts{hour10: {"shop.example": 100}})})

	ctx := context.Background()
	cat, st := openTableLake(ctx, t, dir)
	entries := audit.Latest([]audit.Entry{
		agent(audit.RoleBeacon, "clicks", "shop.example", hour10, 2),
		agent(audit.RoleBeacon, "clicks", "other.example", hour10, 1),
		agent(audit.RoleBeacon, "clicks", "shop.example", hour11, 1),
	})
	ends := func(e map[int32]int64) func(context.Context, []string) (map[string]map[int32]int64, error) {
		return func(context.Context, []string) (map[string]map[int32]int64, error) {
			return map[string]map[int32]int64{"clicks": e}, nil
		}
	}
	for _, c := range []struct {
		name string
		ends func(context.Context, []string) (map[string]map[int32]int64, error)
		now  time.Time
		want map[string]string
	}{
		// The watermark is 11:30: hour 10 is complete, 11 not yet.
		{"by watermark", nil, h11.Add(2 * time.Hour), map[string]string{
			"shop.example " + hour10: StatusOK, "other.example " + hour10: StatusOK, "shop.example " + hour11: StatusOpen}},
		// Every partition landed to its end (1 is empty): complete up to now.
		{"landed to the end", ends(map[int32]int64{0: 4, 1: 0}), h11.Add(2 * time.Hour), map[string]string{
			"shop.example " + hour10: StatusOK, "other.example " + hour10: StatusOK, "shop.example " + hour11: StatusOK}},
		// Partition 1 has records and nothing landed: nothing is complete.
		{"a partition not landed", ends(map[int32]int64{0: 4, 1: 5}), h11.Add(2 * time.Hour), map[string]string{
			"shop.example " + hour10: StatusOpen, "other.example " + hour10: StatusOpen, "shop.example " + hour11: StatusOpen}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lake, err := ReadLakeTables(ctx, st, Tables{Catalog: cat, EndOffsets: c.ends}, []string{"clicks"}, h10, c.now, c.now)
			if err != nil {
				t.Fatal(err)
			}
			if lake.Files != 3 {
				t.Errorf("read %d files, want the snapshot's 3", lake.Files)
			}
			r := Reconcile(Input{Records: entries, Lake: lake, Since: h10, Now: c.now})
			if len(r.Lines) != len(c.want) {
				t.Fatalf("lines %+v, want %d", r.Lines, len(c.want))
			}
			for _, l := range r.Lines {
				k := l.Source + " " + l.Hour
				if l.Status != c.want[k] || l.Landed != l.Accepted {
					t.Errorf("%s: %s, landed %d of %d accepted (%s); want %s and all landed", k, l.Status, l.Landed, l.Accepted, l.Problem, c.want[k])
				}
			}
		})
	}

	// A topic without a table is read from its Hive directories.
	lake, err := ReadLakeTables(ctx, st, Tables{Catalog: cat}, []string{"logs"}, h10, h11, h11)
	if err != nil || lake.Files != 0 || len(lake.Rows) != 0 {
		t.Errorf("a topic without a table: %+v, %v", lake, err)
	}
}

// TestReconcileTableAfterCompaction: the audit counts the same rows per
// source and hour after the table's compaction merged an hour's files
// (whose footer counts were the sink's, per file) into one.
func TestReconcileTableAfterCompaction(t *testing.T) {
	h10 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	hour10 := audit.Hour(h10)
	click := func(host string, i int) string {
		return fmt.Sprintf(`{"type":"click","url":"https://%s/p","ts":%q}`, host, h10.Add(time.Duration(i)*time.Minute).Format(time.RFC3339))
	}
	dir := t.TempDir()
	w := tabletest.New(t, dir)
	tbl := w.Table(t, "clicks", schemas.Click)
	for i, hosts := range [][]string{{"a.example", "a.example"}, {"b.example"}, {"a.example", "b.example", "b.example"}} {
		var events []string
		c := audit.RowCounts{}
		for j, h := range hosts {
			events = append(events, click(h, i*10+j))
			c.Add(hour10, h, 1)
		}
		tbl = w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "g", From: int64(i * 10), To: int64(i*10 + 10), Watermark: h10.Add(3 * time.Hour),
			Files: []tabletest.File{{Name: fmt.Sprintf("dt=2026-12-02/hr=10/part-0-%020d-%020d.parquet", i*10, i*10+9), At: h10,
				Events: events, Metadata: map[string]string{audit.MetaRows: audit.EncodeRowCounts(c)}}}})
	}
	ctx := context.Background()
	res, err := w.Catalog.Compact(ctx, tbl, iceberg.CompactOptions{Now: func() time.Time { return h10.Add(3 * time.Hour) }})
	if err != nil || res.FilesRemoved != 3 || res.FilesAdded != 1 {
		t.Fatalf("compaction: %+v, %v; want 3 files merged into 1", res, err)
	}
	cat, st := openTableLake(ctx, t, dir)
	lake, err := ReadLakeTables(ctx, st, Tables{Catalog: cat}, []string{"clicks"}, h10, h10.Add(3*time.Hour), h10.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := audit.RowCounts{hour10: {"a.example": 3, "b.example": 3}}
	if lake.Files != 1 || fmt.Sprint(lake.Rows["clicks"]) != fmt.Sprint(want) || !lake.Complete["clicks"][hour10] {
		t.Errorf("after compaction: %d files, rows %v, complete %v; want 1 file, %v, hour 10 complete", lake.Files, lake.Rows["clicks"], lake.Complete["clicks"], want)
	}
}

// openTableLake opens the catalog of the warehouse dir, closed when the
// test ends, and the file store of its directory.
func openTableLake(ctx context.Context, t *testing.T, dir string) (*lakeread.Catalog, store.Store) {
	t.Helper()
	cat, err := lakeread.OpenCatalog(ctx, iceberg.Config{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	st, err := store.NewFile(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cat, st
}
