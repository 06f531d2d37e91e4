package iceberg

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"millrace/schemas"
	"millrace/store"
)

// metricRow is one row of the metric schema, as the tests write and read it.
type metricRow struct {
	name   string
	value  float64
	labels map[string]string
	ts     time.Time
	unit   string // a later version's field: "" writes null
}

func (r metricRow) String() string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range r.labels {
			if !yield(k) {
				return
			}
		}
	})
	var labels []string
	for _, k := range keys {
		labels = append(labels, k+"="+r.labels[k])
	}
	return fmt.Sprintf("%s %g {%s} %s", r.name, r.value, strings.Join(labels, ","), r.ts.UTC().Format(time.RFC3339Nano))
}

var hour0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// rows makes n metric rows named prefix-0…, in the hour at.
func rows(prefix string, n int, at time.Time) []metricRow {
	out := make([]metricRow, n)
	for i := range out {
		out[i] = metricRow{
			name:   fmt.Sprintf("%s-%d", prefix, i),
			value:  float64(i) + 0.5,
			labels: map[string]string{"code": fmt.Sprint(200 + i)},
			ts:     at.Add(time.Duration(i) * time.Second),
		}
	}
	return out
}

func openSQLite(t *testing.T, dir string) *Catalog {
	t.Helper()
	c, err := Open(t.Context(), Config{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func metricsTable(t *testing.T, c *Catalog) *table.Table {
	t.Helper()
	tbl, err := c.Table(t.Context(), "metrics", schemas.Metric, TableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// writeFile writes rs as a Parquet file named name under the table's data
// directory, as the sink would, and describes it for a commit.
func writeFile(t *testing.T, tbl *table.Table, name string, rs []metricRow) iceberg.DataFile {
	t.Helper()
	return writeBatch(t, tbl, name, func(sc *arrow.Schema, b *array.RecordBuilder) {
		appendMetricRows(sc, b, rs)
	})
}

// appendMetricRows appends rs to b, whose schema is sc; a column the
// metric rows have no value for (a later version's field) is null.
func appendMetricRows(sc *arrow.Schema, b *array.RecordBuilder, rs []metricRow) {
	for _, r := range rs {
		for i, f := range sc.Fields() {
			fb := b.Field(i)
			switch f.Name {
			case "name":
				fb.(*array.StringBuilder).Append(r.name)
			case "kind":
				fb.(*array.StringBuilder).Append("gauge")
			case "value":
				fb.(*array.Float64Builder).Append(r.value)
			case "labels":
				mb := fb.(*array.MapBuilder)
				mb.Append(true)
				for k, v := range r.labels {
					mb.KeyBuilder().(*array.StringBuilder).Append(k)
					mb.ItemBuilder().(*array.StringBuilder).Append(v)
				}
			case "ts":
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts.UnixMicro()))
			case "unit":
				if r.unit == "" {
					fb.AppendNull()
				} else {
					fb.(*array.StringBuilder).Append(r.unit)
				}
			default:
				fb.AppendNull()
			}
		}
	}
}

// writeBatch writes the rows build appends as a Parquet file named name
// under the table's data directory, in the table's current schema without
// field IDs (as the sink writes its files: the table's name mapping reads
// them), and describes it for a commit.
func writeBatch(t *testing.T, tbl *table.Table, name string, build func(*arrow.Schema, *array.RecordBuilder)) iceberg.DataFile {
	t.Helper()
	location := tbl.Location() + "/data/" + name
	path := strings.TrimPrefix(location, "file://")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	return writeDataFile(t, tbl, location, f, build, func() (int64, error) {
		st, err := os.Stat(path)
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	})
}

// writeDataFile writes the rows build appends to out (which it closes) as
// Parquet, in the table's current schema without field IDs, and describes
// the file at location, of the size size reports once written, for a
// commit.
func writeDataFile(t *testing.T, tbl *table.Table, location string, out io.WriteCloser,
	build func(*arrow.Schema, *array.RecordBuilder), size func() (int64, error)) iceberg.DataFile {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	build(sc, b)
	rec := b.NewRecordBatch()
	defer rec.Release()
	w, err := pqarrow.NewFileWriter(sc, out, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // closes out too
		t.Fatal(err)
	}
	footer, err := w.FileMetadata()
	if err != nil {
		t.Fatal(err)
	}
	n, err := size()
	if err != nil {
		t.Fatal(err)
	}
	df, err := DataFile(tbl, location, n, footer)
	if err != nil {
		t.Fatal(err)
	}
	return df
}

// scan reads every row of the table's current snapshot with iceberg-go.
// It reads record batches (ToArrowRecords): ToArrowTable panics on a
// map column with required values, whose batches iceberg-go v0.7.0 types
// with nullable values on the schema and required ones on the arrays.
func scan(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	_, batches, err := tbl.Scan().ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("scan: no column %q in %v", name, rec.Schema())
			}
			return rec.Column(idx[0])
		}
		names, values := col("name").(*array.String), col("value").(*array.Float64)
		labels, ts := col("labels").(*array.Map), col("ts").(*array.Timestamp)
		keys, items := labels.Keys().(*array.String), labels.Items().(*array.String)
		for i := range int(rec.NumRows()) {
			r := metricRow{name: names.Value(i), value: values.Value(i), labels: map[string]string{},
				ts: time.UnixMicro(int64(ts.Value(i)))}
			start, end := labels.ValueOffsets(i)
			for j := start; j < end; j++ {
				r.labels[keys.Value(int(j))] = items.Value(int(j))
			}
			out = append(out, r.String())
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

func wantRows(sets ...[]metricRow) []string {
	var out []string
	for _, rs := range sets {
		for _, r := range rs {
			out = append(out, r.String())
		}
	}
	slices.Sort(out)
	return out
}

func commit(t *testing.T, c *Catalog, tbl *table.Table, cm Commit) *table.Table {
	t.Helper()
	tbl, err := c.CommitRoll(t.Context(), tbl, cm)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func progress(t *testing.T, tbl *table.Table, group string) Progress {
	t.Helper()
	p, err := ReadProgress(tbl, group, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSchemaFieldIDsAreStable(t *testing.T) {
	sc, err := Schema(schemas.Metric)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, f := range sc.Fields() {
		ids[f.Name] = f.ID
	}
	// Depth first: labels' key and value take 5 and 6.
	want := map[string]int{"name": 1, "kind": 2, "value": 3, "labels": 4, "ts": 7, "source": 8, "extra": 9}
	for name, id := range want {
		if ids[name] != id {
			t.Errorf("field %s: id %d, want %d (all: %v)", name, ids[name], id, ids)
		}
	}
	labels, _ := sc.FindFieldByName("labels")
	if m := labels.Type.(*iceberg.MapType); m.KeyID != 5 || m.ValueID != 6 || !m.ValueRequired {
		t.Errorf("labels map: %+v, want key 5, value 6, value required", m)
	}
	if sc.HighestFieldID() != 9 {
		t.Errorf("highest field id %d, want 9", sc.HighestFieldID())
	}

	// A later version appends a field: the old ones keep their IDs and the
	// new one takes the next.
	extended, err := schemas.Metric.Extend(schemas.Field{Name: "unit", Type: schemas.TypeString})
	if err != nil {
		t.Fatal(err)
	}
	next, err := Schema(extended)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sc.Fields() {
		g, ok := next.FindFieldByName(f.Name)
		if !ok || g.ID != f.ID {
			t.Errorf("field %s: id %d in the extended schema, was %d", f.Name, g.ID, f.ID)
		}
	}
	if unit, _ := next.FindFieldByName("unit"); unit.ID != 10 {
		t.Errorf("new field unit: id %d, want 10", unit.ID)
	}
}

// checkMetricsShape checks that tbl has the metrics schema's fields and IDs
// and the hour(ts) spec a sink's table is created with.
func checkMetricsShape(t *testing.T, tbl *table.Table) {
	t.Helper()
	want, err := Schema(schemas.Metric)
	if err != nil {
		t.Fatal(err)
	}
	if !tbl.Schema().Equals(want) {
		t.Fatalf("created table's schema:\n%v\nwant:\n%v", tbl.Schema(), want)
	}
	spec := tbl.Spec()
	if spec.NumFields() != 1 || spec.Field(0).SourceIDs[0] != 7 || spec.Field(0).Transform.String() != "hour" {
		t.Errorf("partition spec %v, want hour(ts) on field 7", spec)
	}
}

func TestTableKeepsFieldIDsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	c := openSQLite(t, dir)
	tbl := metricsTable(t, c)
	checkMetricsShape(t, tbl)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	reopened := metricsTable(t, openSQLite(t, dir))
	want, err := Schema(schemas.Metric)
	if err != nil {
		t.Fatal(err)
	}
	if !reopened.Schema().Equals(want) {
		t.Errorf("reopened table's schema:\n%v\nwant:\n%v", reopened.Schema(), want)
	}
	if reopened.Metadata().TableUUID() != tbl.Metadata().TableUUID() {
		t.Error("reopening made a new table")
	}
}

func TestTableRefusesAnotherSchema(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	// A table of the log schema under the metric topic's name: the metric
	// schema would add the required "name" and leave the log's required
	// columns without values.
	if _, err := c.Table(t.Context(), "metrics", schemas.Log, TableConfig{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Table(t.Context(), "metrics", schemas.Metric, TableConfig{})
	if !errors.Is(err, ErrIncompatibleSchema) {
		t.Fatalf("opening a table of another schema: %v, want ErrIncompatibleSchema", err)
	}
}

func TestCommitRollsAndReadBack(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl := metricsTable(t, c)
	if p := progress(t, tbl, "sink"); len(p.Offsets) != 0 || p.SnapshotID != 0 {
		t.Fatalf("progress of a new table: %+v", p)
	}

	roll1 := rows("a", 3, hour0)
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
		Files:      []iceberg.DataFile{writeFile(t, tbl, "part-0-0.parquet", roll1)},
		Ranges:     map[int32]Range{0: {0, 3}},
		Watermarks: map[int32]string{0: "w1"},
	})
	// The second roll lands two partitions and two hours.
	roll2a, roll2b := rows("b", 2, hour0.Add(30*time.Minute)), rows("c", 4, hour0.Add(time.Hour))
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
		Files: []iceberg.DataFile{
			writeFile(t, tbl, "part-0-3.parquet", roll2a),
			writeFile(t, tbl, "part-1-0.parquet", roll2b),
		},
		Ranges:     map[int32]Range{0: {3, 5}, 1: {0, 4}},
		Watermarks: map[int32]string{1: "w2"},
	})

	p := progress(t, tbl, "sink")
	if got := encodeOffsets(p.Offsets); got != "0:5,1:4" {
		t.Errorf("offsets %s, want 0:5,1:4", got)
	}
	if p.Watermarks[0] != "w1" || p.Watermarks[1] != "w2" || len(p.Watermarks) != 2 {
		t.Errorf("watermarks %v, want 0:w1 (kept) 1:w2", p.Watermarks)
	}
	if p.SnapshotID != tbl.CurrentSnapshot().SnapshotID {
		t.Errorf("progress read from snapshot %d, want the head %d", p.SnapshotID, tbl.CurrentSnapshot().SnapshotID)
	}
	if got := tbl.CurrentSnapshot().Summary.Properties["millrace.offsets.sink.metrics"]; got != "0:5,1:4" {
		t.Errorf("snapshot summary offsets %q", got)
	}
	if got, want := scan(t, tbl), wantRows(roll1, roll2a, roll2b); !slices.Equal(got, want) {
		t.Errorf("scan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Each file holds one hour, and the spec put it in that hour's partition.
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hours := map[any]int{}
	for _, task := range tasks {
		hours[task.File.Partition()[firstPartitionFieldID]]++
	}
	h0 := int32(hour0.Unix() / 3600)
	if len(hours) != 2 || hours[h0] != 2 || hours[h0+1] != 1 {
		t.Errorf("files by hour partition %v, want 2 in %d and 1 in %d", hours, h0, h0+1)
	}

	// A roll with nothing to land (all duplicates) still moves the offsets,
	// and another group's commit does not hide this group's progress.
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics", Ranges: map[int32]Range{1: {4, 9}}})
	tbl = commit(t, c, tbl, Commit{Group: "other", Topic: "metrics", Ranges: map[int32]Range{0: {0, 1}}})
	if got := encodeOffsets(progress(t, tbl, "sink").Offsets); got != "0:5,1:9" {
		t.Errorf("offsets after an empty roll and another group's commit %s, want 0:5,1:9", got)
	}
	if got := encodeOffsets(progress(t, tbl, "other").Offsets); got != "0:1" {
		t.Errorf("other group's offsets %s, want 0:1", got)
	}
	if got, want := len(scan(t, tbl)), 9; got != want {
		t.Errorf("rows after empty commits: %d, want %d", got, want)
	}

	// Progress survives a reopen of the catalog: it is the table's.
	reopened, err := c.Reload(t.Context(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeOffsets(progress(t, reopened, "sink").Offsets); got != "0:5,1:9" {
		t.Errorf("offsets after reload %s", got)
	}
}

func TestConflictRebaseOrZombie(t *testing.T) {
	testConflictRebaseOrZombie(t, openSQLite(t, t.TempDir()))
}

// testConflictRebaseOrZombie has workers commit to one table from stale
// and fresh copies of it: a commit on a stale table is a conflict, which a
// rebase resolves when the other commit moved other partitions and refuses
// as a zombie when it moved the caller's. The table ends at offsets 0:6,1:3.
func testConflictRebaseOrZombie(t *testing.T, c *Catalog) {
	tbl := metricsTable(t, c)
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, tbl, "p0-0.parquet", rows("a", 2, hour0))},
		Ranges: map[int32]Range{0: {0, 2}, 1: {0, 0}},
	})
	stale := tbl

	// Worker A (partition 0) commits; worker B (partition 1) still holds
	// the table from before it.
	a := rows("a2", 2, hour0)
	afterA := commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, tbl, "p0-2.parquet", a)},
		Ranges: map[int32]Range{0: {2, 4}},
	})
	if got := encodeOffsets(progress(t, afterA, "sink").Offsets); got != "0:4,1:0" {
		t.Errorf("offsets after A's commit %s, want 0:4,1:0 (B's partition kept)", got)
	}
	b := rows("b", 3, hour0)
	cmB := Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, stale, "p1-0.parquet", b)},
		Ranges: map[int32]Range{1: {0, 3}},
	}
	_, err := c.CommitRoll(t.Context(), stale, cmB)
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrZombie) {
		t.Fatalf("commit on a stale table: %v, want ErrConflict", err)
	}
	// A's commit moved only partition 0: B rebases and lands.
	fresh, err := c.Rebase(t.Context(), stale, cmB)
	if err != nil {
		t.Fatalf("rebase after another partition's commit: %v", err)
	}
	tbl = commit(t, c, fresh, cmB)
	if got := encodeOffsets(progress(t, tbl, "sink").Offsets); got != "0:4,1:3" {
		t.Errorf("offsets after the rebased commit %s, want 0:4,1:3", got)
	}

	// A zombie of partition 0: it loaded the table at 0:4, then the new
	// owner landed 4..6 of partition 0. Its commit of 4..7 is refused, and
	// the rebase says it lost the partition.
	zombie := tbl
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, tbl, "p0-4-new.parquet", rows("new", 2, hour0))},
		Ranges: map[int32]Range{0: {4, 6}},
	})
	cmZ := Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, zombie, "p0-4-zombie.parquet", rows("zombie", 3, hour0))},
		Ranges: map[int32]Range{0: {4, 7}},
	}
	if _, err := c.CommitRoll(t.Context(), zombie, cmZ); !errors.Is(err, ErrConflict) {
		t.Fatalf("zombie's commit: %v, want ErrConflict", err)
	}
	if _, err := c.Rebase(t.Context(), zombie, cmZ); !errors.Is(err, ErrZombie) {
		t.Fatalf("zombie's rebase: %v, want ErrZombie", err)
	}
	// Nor does a fresh table let it land: its range does not start at the
	// table's offset.
	if _, err := c.CommitRoll(t.Context(), tbl, cmZ); !errors.Is(err, ErrZombie) {
		t.Fatalf("zombie's commit on a fresh table: %v, want ErrZombie", err)
	}

	tbl, err = c.Reload(t.Context(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeOffsets(progress(t, tbl, "sink").Offsets); got != "0:6,1:3" {
		t.Errorf("offsets %s, want 0:6,1:3", got)
	}
	for _, r := range scan(t, tbl) {
		if strings.HasPrefix(r, "zombie") {
			t.Fatalf("a zombie's row landed: %s", r)
		}
	}
	if got, want := len(scan(t, tbl)), 2+2+3+2; got != want {
		t.Errorf("rows %d, want %d", got, want)
	}
}

func TestOffsetsEncoding(t *testing.T) {
	for _, s := range []string{"", "0:0", "0:5,1:4,12:9000000000"} {
		m, err := decodeOffsets(s)
		if err != nil {
			t.Fatalf("decode %q: %v", s, err)
		}
		if got := encodeOffsets(m); got != s {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	}
	for _, bad := range []string{"0", "a:1", "0:-1", "-1:0", "0:1,", "0:1;1:2"} {
		if _, err := decodeOffsets(bad); err == nil {
			t.Errorf("decode %q: no error", bad)
		}
	}
	if _, err := encodeWatermarks(map[int32]string{0: "\xff"}); err == nil {
		t.Error("a watermark that is not UTF-8 was accepted")
	}
}

func TestPartitionSpecs(t *testing.T) {
	sc, err := Schema(schemas.Metric)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p     Partitioning
		field string
		want  string // "" for an error
	}{
		{"", "", "[\n\t1000: ts_hour: hour(7)\n]"},
		{PartitionHour, "", "[\n\t1000: ts_hour: hour(7)\n]"},
		{PartitionDay, "", "[\n\t1000: ts_day: day(7)\n]"},
		{PartitionIdentity, "source", "[\n\t1000: source: identity(8)\n]"},
		{PartitionNone, "", "[]"},
		{PartitionIdentity, "nope", ""},
		{"month", "", ""},
	} {
		spec, err := PartitionSpec(c.p, sc, "ts", c.field)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%q %q: no error", c.p, c.field)
		case c.want != "" && err != nil:
			t.Errorf("%q %q: %v", c.p, c.field, err)
		case c.want != "" && spec.String() != c.want:
			t.Errorf("%q %q: spec %q, want %q", c.p, c.field, spec.String(), c.want)
		}
	}
}

var s3cfg = store.S3Config{Endpoint: "http://127.0.0.1:17070", Bucket: "lake", Prefix: "/tables/", AccessKey: "k", SecretKey: "s"}

func TestS3Warehouse(t *testing.T) {
	cfg := Config{S3: &s3cfg, Path: "/var/lib/millrace/catalog.db"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.warehouse(); got != "s3://lake/tables" {
		t.Errorf("warehouse %q, want s3://lake/tables", got)
	}
	props := ioProperties(&s3cfg)
	want := iceberg.Properties{"s3.region": "us-east-1", "s3.endpoint": "http://127.0.0.1:17070",
		"s3.force-virtual-addressing": "false", "s3.access-key-id": "k", "s3.secret-access-key": "s"}
	if !maps.Equal(props, want) {
		t.Errorf("io properties %v, want %v", props, want)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"sqlite in a directory", Config{Directory: "/lake"}, true},
		{"sqlite without a warehouse", Config{Path: "/c.db"}, false},
		{"sqlite with a URL", Config{Directory: "/lake", URL: "postgres://x"}, false},
		{"postgres without a URL", Config{Catalog: CatalogPostgres, Directory: "/lake"}, false},
		{"postgres", Config{Catalog: CatalogPostgres, URL: "postgres://x", Directory: "/lake"}, true},
		{"rest without a warehouse", Config{Catalog: CatalogREST, URL: "http://127.0.0.1:8181"}, true},
		{"two warehouses", Config{Directory: "/lake", S3: &s3cfg}, false},
		{"sqlite, S3 warehouse, no path", Config{S3: &s3cfg}, false},
		{"S3 without a bucket", Config{Path: "/c.db", S3: &store.S3Config{}}, false},
		{"token for sqlite", Config{Directory: "/lake", Token: "t"}, false},
		{"unknown catalog", Config{Catalog: "glue", URL: "x"}, false},
	} {
		if err := c.cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
