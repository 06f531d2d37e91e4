package lake

import (
	"errors"
	"strings"
	"testing"

	"millrace/schemas"
	"millrace/sinks/iceberg"
)

// TestOpenTablesEvolves: a sink opening a table made from an older schema
// adds the field it declares as an optional column, keeping the table's
// data files; one declaring a type the table's column cannot become is
// refused at start, naming the field.
func TestOpenTablesEvolves(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := Config{Group: "g", Topics: []string{"clicks"}, Format: FormatIceberg, Iceberg: TableConfig{Warehouse: root}}
	extend := func(decls ...string) *schemas.Schema {
		var fields []schemas.Field
		for _, d := range decls {
			f, err := schemas.ParseFieldDecl(d)
			if err != nil {
				t.Fatal(err)
			}
			fields = append(fields, f)
		}
		s, err := schemas.Click.Extend(fields...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, s := range []*schemas.Schema{schemas.Click, extend("campaign:string")} {
		cat, tables, err := openTables(t.Context(), cfg, nil, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		tbl := tables["clicks"]
		cat.Close()
		if _, has := tbl.Schema().FindFieldByName("campaign"); has != (s != schemas.Click) {
			t.Errorf("schema v%d: the table has a campaign column: %v", s.Version, has)
		}
	}
	_, _, err := openTables(t.Context(), cfg, nil, extend("campaign:int64"), nil)
	if !errors.Is(err, iceberg.ErrIncompatibleSchema) || !strings.Contains(err.Error(), `field "campaign" is string in the table and long`) {
		t.Errorf("campaign:string -> campaign:int64: %v; want ErrIncompatibleSchema naming the field and both types", err)
	}
}

// TestCheckSpec: a sink whose iceberg.partition is not the existing
// table's spec is refused at start (its files would not fit the table's
// partitions); the same spec passes.
func TestCheckSpec(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfg := Config{Group: "g", Topics: []string{"clicks"}, Format: FormatIceberg,
		Iceberg: TableConfig{Warehouse: root, Partition: "identity:type"}}
	cat, tables, err := openTables(t.Context(), cfg, nil, schemas.Click, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	for partition, want := range map[string]string{
		"identity:type": "",
		"hour":          `is partitioned by [ 1000: type: identity(2) ] and iceberg.partition "hour" asks for [ 1000: ts_hour: hour(`,
		"none":          `asks for nothing`,
	} {
		err := TableConfig{Partition: partition}.checkSpec(tables["clicks"], schemas.Click.TimeField)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v; want %q", partition, err, want)
		}
	}
}
