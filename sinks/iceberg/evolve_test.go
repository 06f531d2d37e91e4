package iceberg

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"millrace/schemas"
)

// extendMetric is the metric schema with optional fields appended.
func extendMetric(t *testing.T, fields ...schemas.Field) *schemas.Schema {
	t.Helper()
	s, err := schemas.Metric.Extend(fields...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scanColumn reads every row of the table's current snapshot and returns
// the value of column col by the row's key column, "null" for a null.
func scanColumn(t *testing.T, tbl *table.Table, key, col string) map[string]string {
	t.Helper()
	_, batches, err := tbl.Scan(table.WithSelectedFields(key, col)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		keys, values := rec.Column(rec.Schema().FieldIndices(key)[0]), rec.Column(rec.Schema().FieldIndices(col)[0])
		for i := range int(rec.NumRows()) {
			v := "null"
			if !values.IsNull(i) {
				v = fmt.Sprintf("%s:%s", values.DataType(), values.ValueStr(i))
			}
			out[keys.ValueStr(i)] = v
		}
		rec.Release()
	}
	return out
}

// checkNameMapping fails unless the table's name mapping maps every
// top-level column to its field ID: the sink's files carry no field IDs,
// so a column missing from the mapping would read as null.
func checkNameMapping(t *testing.T, tbl *table.Table) {
	t.Helper()
	mapping := tbl.NameMapping()
	if mapping == nil {
		t.Fatal("the table has no name mapping")
	}
	byName := map[string]int{}
	for _, f := range mapping {
		for _, n := range f.Names {
			if f.FieldID != nil {
				byName[n] = *f.FieldID
			}
		}
	}
	for _, f := range tbl.Schema().Fields() {
		if byName[f.Name] != f.ID {
			t.Errorf("name mapping gives column %q id %d, the schema %d (mapping %v)", f.Name, byName[f.Name], f.ID, byName)
		}
	}
}

func TestEvolveAddsAColumnMidStream(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	tbl := metricsTable(t, c)
	checkNameMapping(t, tbl)
	old := rows("old", 3, hour0)
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, tbl, "p0-0.parquet", old)},
		Ranges: map[int32]Range{0: {0, 3}},
	})
	before, stale := tbl.Schema(), tbl

	// The sink's schema gains an optional field: opening the table again
	// with it adds the column, with the next field ID, and rewrites no file.
	tbl, err := c.Table(t.Context(), "metrics", extendMetric(t, schemas.Field{Name: "unit", Type: schemas.TypeString}), TableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	unit, ok := tbl.Schema().FindFieldByName("unit")
	if !ok || unit.ID != before.HighestFieldID()+1 || unit.Required || !unit.Type.Equals(iceberg.PrimitiveTypes.String) {
		t.Fatalf("added column %+v (found %v), want optional string with id %d", unit, ok, before.HighestFieldID()+1)
	}
	for _, f := range before.Fields() {
		if g, _ := tbl.Schema().FindFieldByName(f.Name); g.ID != f.ID {
			t.Errorf("column %s: id %d after evolution, was %d", f.Name, g.ID, f.ID)
		}
	}
	if len(tbl.Metadata().Snapshots()) != 1 {
		t.Errorf("evolution made a snapshot: %d snapshots", len(tbl.Metadata().Snapshots()))
	}
	checkNameMapping(t, tbl)

	// A worker of another partition still holds the table from before the
	// change: a schema change makes no snapshot, so its roll lands, and
	// leaves the new column and the name mapping as they are.
	other := rows("other", 1, hour0)
	if _, err := c.CommitRoll(t.Context(), stale, Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, stale, "p1-0.parquet", other)},
		Ranges: map[int32]Range{1: {0, 1}},
	}); err != nil {
		t.Fatalf("a roll from before the schema change: %v", err)
	}
	if tbl, err = c.Reload(t.Context(), tbl); err != nil {
		t.Fatal(err)
	}
	if _, ok := tbl.Schema().FindFieldByName("unit"); !ok {
		t.Fatal("a roll from before the schema change dropped the new column")
	}
	checkNameMapping(t, tbl)

	// Rows written with the new schema carry the field.
	fresh := rows("new", 2, hour0.Add(time.Minute))
	for i := range fresh {
		fresh[i].unit = fmt.Sprintf("ms%d", i)
	}
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "metrics",
		Files:  []iceberg.DataFile{writeFile(t, tbl, "p0-3.parquet", fresh)},
		Ranges: map[int32]Range{0: {3, 5}},
	})

	want := map[string]string{"old-0": "null", "old-1": "null", "old-2": "null", "other-0": "null",
		"new-0": "utf8:ms0", "new-1": "utf8:ms1"}
	if got := scanColumn(t, tbl, "name", "unit"); !maps.Equal(got, want) {
		t.Errorf("unit by name: %v, want %v", got, want)
	}
	if got, want := scan(t, tbl), wantRows(old, other, fresh); !slices.Equal(got, want) {
		t.Errorf("scan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A worker still on the old schema version neither fails nor drops
	// the column.
	older, err := c.Table(t.Context(), "metrics", schemas.Metric, TableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if older.MetadataLocation() != tbl.MetadataLocation() {
		t.Error("opening with the previous schema version changed the table")
	}
}

// widenSchema is a table schema with an int and a float column, which the
// sink's own schemas do not have but a registry's may.
func widenSchema(count, ratio iceberg.Type) *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "key", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 2, Name: "count", Type: count},
		iceberg.NestedField{ID: 3, Name: "ratio", Type: ratio},
	)
}

func TestEvolveWidensIntAndFloat(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	noSpec := func() (iceberg.PartitionSpec, error) { return *iceberg.UnpartitionedSpec, nil }
	tbl, err := c.loadOrCreate(t.Context(), "wide", widenSchema(iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Float32), noSpec)
	if err != nil {
		t.Fatal(err)
	}
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "wide", Ranges: map[int32]Range{0: {0, 1}},
		Files: []iceberg.DataFile{writeBatch(t, tbl, "narrow.parquet", func(_ *arrow.Schema, b *array.RecordBuilder) {
			b.Field(0).(*array.StringBuilder).Append("narrow")
			b.Field(1).(*array.Int32Builder).Append(7)
			b.Field(2).(*array.Float32Builder).Append(0.5)
		})},
	})

	tbl, err = c.Evolve(t.Context(), tbl, widenSchema(iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.Float64))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]iceberg.Type{"count": iceberg.PrimitiveTypes.Int64, "ratio": iceberg.PrimitiveTypes.Float64} {
		f, _ := tbl.Schema().FindFieldByName(name)
		if !f.Type.Equals(want) {
			t.Errorf("column %s is %s after widening, want %s", name, f.Type, want)
		}
	}
	if tbl.Metadata().LastColumnID() != 3 {
		t.Errorf("last column id %d after widening, want 3 (no new IDs)", tbl.Metadata().LastColumnID())
	}
	tbl = commit(t, c, tbl, Commit{Group: "sink", Topic: "wide", Ranges: map[int32]Range{0: {1, 2}},
		Files: []iceberg.DataFile{writeBatch(t, tbl, "wide.parquet", func(_ *arrow.Schema, b *array.RecordBuilder) {
			b.Field(0).(*array.StringBuilder).Append("wide")
			b.Field(1).(*array.Int64Builder).Append(1 << 40)
			b.Field(2).(*array.Float64Builder).Append(1e300)
		})},
	})

	// The file written before the widening reads in the wider types.
	if got, want := scanColumn(t, tbl, "key", "count"), map[string]string{"narrow": "int64:7", "wide": "int64:1099511627776"}; !maps.Equal(got, want) {
		t.Errorf("count: %v, want %v", got, want)
	}
	if got, want := scanColumn(t, tbl, "key", "ratio"), map[string]string{"narrow": "float64:0.5", "wide": "float64:1e+300"}; !maps.Equal(got, want) {
		t.Errorf("ratio: %v, want %v", got, want)
	}

	// Narrowing back is refused, names the field and both types, and
	// commits nothing.
	_, err = c.Evolve(t.Context(), tbl, widenSchema(iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Float64))
	if !errors.Is(err, ErrIncompatibleSchema) || !strings.Contains(err.Error(), `"count" is long in the table and int in the sink schema`) {
		t.Fatalf("narrowing long to int: %v, want ErrIncompatibleSchema naming count, long and int", err)
	}
	if fresh, err := c.Reload(t.Context(), tbl); err != nil || fresh.MetadataLocation() != tbl.MetadataLocation() {
		t.Errorf("a refused evolution moved the table (%v)", err)
	}
}

func TestPlanEvolution(t *testing.T) {
	field := func(id int, name string, typ iceberg.Type, required bool) iceberg.NestedField {
		return iceberg.NestedField{ID: id, Name: name, Type: typ, Required: required}
	}
	labels := func(keyID int) iceberg.Type {
		return &iceberg.MapType{KeyID: keyID, KeyType: iceberg.PrimitiveTypes.String,
			ValueID: keyID + 1, ValueType: iceberg.PrimitiveTypes.String, ValueRequired: true}
	}
	have := iceberg.NewSchema(0,
		field(1, "key", iceberg.PrimitiveTypes.String, true),
		field(2, "n", iceberg.PrimitiveTypes.Int32, false),
		field(3, "price", iceberg.DecimalTypeOf(9, 2), false),
		field(4, "labels", labels(5), false),
		field(7, "gone", iceberg.PrimitiveTypes.Bool, false),
	)
	for _, c := range []struct {
		name  string
		want  []iceberg.NestedField
		plan  string // adds/widen/relax, when accepted
		error string // a part of the error, when refused
	}{
		{name: "same, renumbered map, dropped optional column",
			want: []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(2, "labels", labels(9), false)},
			plan: "[] [] []"},
		{name: "added optional",
			want: []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(2, "unit", iceberg.PrimitiveTypes.String, false)},
			plan: "[unit] [] []"},
		{name: "decimal precision",
			want: []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(3, "price", iceberg.DecimalTypeOf(18, 2), false)},
			plan: "[] [price] []"},
		{name: "required becomes optional",
			want: []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, false)},
			plan: "[] [] [key]"},
		{name: "decimal scale",
			want:  []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(3, "price", iceberg.DecimalTypeOf(18, 3), false)},
			error: `"price" is decimal(9, 2) in the table and decimal(18, 3) in the sink schema`},
		{name: "type change",
			want:  []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.Int64, true)},
			error: `"key" is string in the table and long in the sink schema`},
		{name: "int to double",
			want:  []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(2, "n", iceberg.PrimitiveTypes.Float64, false)},
			error: `"n" is int in the table and double in the sink schema`},
		{name: "removed field back with another type",
			want:  []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(2, "gone", iceberg.PrimitiveTypes.String, false)},
			error: `"gone" is boolean in the table and string in the sink schema`},
		{name: "map value type",
			want: []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(2, "labels", &iceberg.MapType{KeyID: 3,
				KeyType: iceberg.PrimitiveTypes.String, ValueID: 4, ValueType: iceberg.PrimitiveTypes.Int64, ValueRequired: true}, false)},
			error: `"labels" is map<string, string> in the table and map<string, long>`},
		{name: "added required",
			want:  []iceberg.NestedField{field(1, "key", iceberg.PrimitiveTypes.String, true), field(2, "must", iceberg.PrimitiveTypes.String, true)},
			error: `field "must" (string) is new and required`},
		{name: "required column dropped",
			want:  []iceberg.NestedField{field(1, "unit", iceberg.PrimitiveTypes.String, false)},
			error: `column "key" (string) is required and the sink schema has no field "key"`},
	} {
		e, err := planEvolution(have, iceberg.NewSchema(0, c.want...))
		if c.error != "" {
			if !errors.Is(err, ErrIncompatibleSchema) || !strings.Contains(err.Error(), c.error) {
				t.Errorf("%s: %v, want ErrIncompatibleSchema with %q", c.name, err, c.error)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := fmt.Sprint(fieldNames(e.adds), fieldNames(e.widen), e.relax); got != c.plan {
			t.Errorf("%s: plan %s, want %s", c.name, got, c.plan)
		}
	}
}

// TestEvolveRace has two catalog handles on one SQLite file (two workers)
// evolve the same table. Whoever commits second finds the table moved,
// reloads it and finds the column there: one column, one new schema.
func TestEvolveRace(t *testing.T) {
	dir := t.TempDir()
	a, b := openSQLite(t, dir), openSQLite(t, dir)
	tblA := metricsTable(t, a)
	tblB := metricsTable(t, b)
	extended := extendMetric(t, schemas.Field{Name: "unit", Type: schemas.TypeString})
	want, err := Schema(extended)
	if err != nil {
		t.Fatal(err)
	}

	// In turn: B evolves from the table it loaded before A's change.
	afterA, err := a.Evolve(t.Context(), tblA, want)
	if err != nil {
		t.Fatal(err)
	}
	afterB, err := b.Evolve(t.Context(), tblB, want)
	if err != nil {
		t.Fatalf("the second worker's evolution: %v", err)
	}
	if afterB.MetadataLocation() != afterA.MetadataLocation() {
		t.Error("the second worker committed again instead of finding the column")
	}
	checkOneEvolution(t, afterB, "unit")

	// At once, each adding its own field to a fresh table, both from the
	// same table (so whoever commits second has to reload): both columns
	// land, neither twice.
	c1 := extendMetric(t, schemas.Field{Name: "unit", Type: schemas.TypeString})
	c2 := extendMetric(t, schemas.Field{Name: "plan", Type: schemas.TypeInt64})
	for round := range 3 {
		topic := fmt.Sprint("race", round)
		type worker struct {
			c   *Catalog
			tbl *table.Table
			sc  *iceberg.Schema
		}
		var workers []worker
		for _, w := range []struct {
			c *Catalog
			s *schemas.Schema
		}{{a, c1}, {b, c2}} {
			tbl, err := w.c.Table(t.Context(), topic, schemas.Metric, TableConfig{})
			if err != nil {
				t.Fatal(err)
			}
			sc, err := Schema(w.s)
			if err != nil {
				t.Fatal(err)
			}
			workers = append(workers, worker{w.c, tbl, sc})
		}
		var wg sync.WaitGroup
		errs := make([]error, len(workers))
		for i, w := range workers {
			wg.Go(func() {
				_, errs[i] = w.c.Evolve(t.Context(), w.tbl, w.sc)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		tbl, err := a.Table(t.Context(), topic, schemas.Metric, TableConfig{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range tbl.Schema().Fields() {
			names = append(names, f.Name)
		}
		slices.Sort(names)
		if got, want := strings.Join(names, ","), "extra,kind,labels,name,plan,source,ts,unit,value"; got != want {
			t.Errorf("round %d: columns %s, want %s", round, got, want)
		}
		if tbl.Metadata().LastColumnID() != 11 {
			t.Errorf("round %d: last column id %d, want 11 (two added)", round, tbl.Metadata().LastColumnID())
		}
		checkNameMapping(t, tbl)
	}
}

// checkOneEvolution fails unless tbl has exactly one schema after its
// first, holding column once.
func checkOneEvolution(t *testing.T, tbl *table.Table, column string) {
	t.Helper()
	if n := len(tbl.Metadata().Schemas()); n != 2 {
		t.Errorf("%d schemas, want 2 (the first and one evolution)", n)
	}
	count := 0
	for _, f := range tbl.Schema().Fields() {
		if f.Name == column {
			count++
		}
	}
	if count != 1 || tbl.Metadata().LastColumnID() != 10 {
		t.Errorf("column %s %d times, last column id %d; want once, 10", column, count, tbl.Metadata().LastColumnID())
	}
	checkNameMapping(t, tbl)
}

func TestDeadLetterTable(t *testing.T) {
	dir := t.TempDir()
	c := openSQLite(t, dir)
	dlq, err := c.DeadLetterTable(t.Context(), "metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := dlq.Identifier(); !slices.Equal(got, table.Identifier{c.Namespace(), "metrics~dlq"}) {
		t.Errorf("identifier %v", got)
	}
	if !dlq.Schema().Equals(DeadLetterSchema()) {
		t.Errorf("schema:\n%v\nwant:\n%v", dlq.Schema(), DeadLetterSchema())
	}
	checkNameMapping(t, dlq)
	at := hour0.Add(90 * time.Minute)
	rows := []DeadLetterRow{
		{Topic: "metrics", Partition: 2, Offset: 40, LastOffset: -1, Raw: []byte(`{"name":`), Reason: "reason 0", Time: at},
		{Topic: "metrics", Partition: 2, Offset: 41, LastOffset: 43, Reason: "undecodable batch"},
	}
	var buf bytes.Buffer
	footer, size, err := WriteDeadLetters(&buf, dlq, rows)
	if err != nil {
		t.Fatal(err)
	}
	location := dlq.Location() + "/data/part-2-40-41.parquet"
	path := strings.TrimPrefix(location, "file://")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	df, err := DataFile(dlq, location, size, footer)
	if err != nil {
		t.Fatal(err)
	}
	dlq = commit(t, c, dlq, Commit{Group: "sink", Topic: "metrics", Ranges: map[int32]Range{2: {40, 44}},
		Files: []iceberg.DataFile{df}})

	// Another handle finds it, with its rows and the day partition.
	reopened, err := openSQLite(t, dir).DeadLetterTable(t.Context(), "metrics")
	if err != nil {
		t.Fatal(err)
	}
	if reopened.Metadata().TableUUID() != dlq.Metadata().TableUUID() {
		t.Error("loading the dead-letter table again made a new one")
	}
	if !reopened.Spec().IsUnpartitioned() {
		t.Errorf("spec %v, want unpartitioned", reopened.Spec())
	}
	if got, want := scanColumn(t, reopened, DeadLetterOffset, DeadLetterReason), map[string]string{"40": "utf8:reason 0", "41": "utf8:undecodable batch"}; !maps.Equal(got, want) {
		t.Errorf("reasons by offset: %v, want %v", got, want)
	}
	if got, want := scanColumn(t, reopened, DeadLetterOffset, DeadLetterRaw), map[string]string{
		"40": "binary:" + base64.StdEncoding.EncodeToString([]byte(`{"name":`)),
		"41": "null"}; !maps.Equal(got, want) {
		t.Errorf("raw by offset: %v, want %v", got, want)
	}
	for col, want := range map[string]map[string]string{
		DeadLetterTopic:      {"40": "utf8:metrics", "41": "utf8:metrics"},
		DeadLetterLastOffset: {"40": "null", "41": "int64:43"},
		DeadLetterTime:       {"40": "timestamp[us, tz=UTC]:" + at.Format(time.RFC3339), "41": "null"},
	} {
		if got := scanColumn(t, reopened, DeadLetterOffset, col); !maps.Equal(got, want) {
			t.Errorf("%s by offset: %v, want %v", col, got, want)
		}
	}
	p, err := ReadProgress(reopened, "sink", "metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := encodeOffsets(p.Offsets); got != "2:44" {
		t.Errorf("dead-letter table's offsets %q, want 2:44", got)
	}
}

// TestEvolveSetsAMissingNameMapping opens a table created without a name
// mapping (as tables were before evolution): opening it sets one, in the
// same commit as the column it adds.
func TestEvolveSetsAMissingNameMapping(t *testing.T) {
	c := openSQLite(t, t.TempDir())
	sc, err := Schema(schemas.Metric)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := c.Catalog().CreateTable(t.Context(), c.Identifier("metrics"), sc, catalog.WithProperties(tableProperties))
	if err != nil {
		t.Fatal(err)
	}
	if bare.NameMapping() != nil {
		t.Fatal("the table has a name mapping before evolution")
	}
	tbl, err := c.Table(t.Context(), "metrics", extendMetric(t, schemas.Field{Name: "unit", Type: schemas.TypeString}), TableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	checkOneEvolution(t, tbl, "unit")
}
