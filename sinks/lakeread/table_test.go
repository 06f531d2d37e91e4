package lakeread

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"millrace/schemas"
	"millrace/sinks/iceberg"
	"millrace/sinks/lakeread/tabletest"
	"millrace/store"
)

// landTable commits three clicks in two rolls (hours 10 and 11) to the
// clicks table of a warehouse in dir, and leaves in hour 10's directory a
// file no snapshot lists (a fenced worker's), whose row must never be read.
func landTable(t *testing.T, dir string) {
	t.Helper()
	w := tabletest.New(t, dir)
	tbl := w.Table(t, "clicks", schemas.Click)
	hour11 := hour10.Add(time.Hour)
	tbl = w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "g", From: 0, To: 2, Files: []tabletest.File{{
		Name: "dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000001.parquet", At: hour10,
		Events: []string{click("page_view", "a", hour10), click("click", "b", hour10.Add(time.Minute))}}}})
	w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "g", From: 2, To: 3, Files: []tabletest.File{{
		Name: "dt=2024-05-01/hr=11/part-0-00000000000000000002-00000000000000000002.parquet", At: hour11,
		Events: []string{click("click", "c", hour11)}}}})
	w.Write(t, tbl, schemas.Click, tabletest.File{
		Name: "dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000005.parquet", At: hour10,
		Events: []string{click("click", "zombie", hour10)}})
}

func openTable(t *testing.T, dir, topic string) (*Table, error) {
	t.Helper()
	cat, err := OpenCatalog(context.Background(), tableConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	return cat.Table(context.Background(), topic)
}

// TestTableReadsTheCurrentSnapshot: the table's snapshots carry the
// group's offsets, its files and partitions are the current snapshot's,
// and head, a time range and count read those files only, not the
// uncommitted one beside them.
func TestTableReadsTheCurrentSnapshot(t *testing.T) {
	dir := t.TempDir()
	landTable(t, dir)
	if !HasDefaultCatalog(dir) {
		t.Fatal("no default catalog in the warehouse")
	}
	tbl, err := openTable(t, dir, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Spec != "[ 1000: ts_hour: hour(9) ]" {
		t.Errorf("spec %q", tbl.Spec)
	}
	if tbl.Identifier != "millrace.clicks" || tbl.Rows != 3 || len(tbl.Files) != 2 {
		t.Fatalf("table %s: %d rows in %d files, want millrace.clicks: 3 rows in 2 files", tbl.Identifier, tbl.Rows, len(tbl.Files))
	}
	if len(tbl.Snapshots) != 2 || !tbl.Snapshots[1].Current || tbl.Snapshots[1].Operation != "append" ||
		tbl.Snapshots[1].Summary["millrace.offsets.g.clicks"] != "0:3" || tbl.Snapshots[0].Summary["millrace.offsets.g.clicks"] != "0:2" {
		t.Errorf("snapshots: %+v", tbl.Snapshots)
	}
	wantParts := []Partition{{Name: "ts_hour=2024-05-01-10", Files: 1, Rows: 2}, {Name: "ts_hour=2024-05-01-11", Files: 1, Rows: 1}}
	for i := range tbl.Partitions {
		tbl.Partitions[i].Bytes = 0
	}
	if !reflect.DeepEqual(tbl.Partitions, wantParts) {
		t.Errorf("partitions %+v, want %+v", tbl.Partitions, wantParts)
	}
	if f := tbl.Files[0]; f.Rows != 2 || f.Bytes == 0 || f.Partition != "ts_hour=2024-05-01-10" ||
		f.Name != "millrace.db/clicks/data/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000001.parquet" {
		t.Errorf("first file %+v", f)
	}

	st, err := store.NewFile(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, got := rows(t, st, Query{Topic: "clicks", Table: tbl, Columns: []string{"type", "title"}})
	if titles(got) != "a b c" {
		t.Errorf("cat: %v, want a b c (not the uncommitted file's row)", got)
	}
	cols, _ := rows(t, st, Query{Topic: "clicks", Table: tbl, Limit: 1})
	if !reflect.DeepEqual(cols, tbl.Columns) || len(cols) < 5 {
		t.Errorf("columns %v, want the table's %v", cols, tbl.Columns)
	}
	_, got = rows(t, st, Query{Topic: "clicks", Table: tbl, Columns: []string{"title"}, From: hour10.Add(time.Hour)})
	if titles(got) != "c" {
		t.Errorf("from 11:00: %v, want c", got)
	}
	groups, err := Count(context.Background(), st, Query{Topic: "clicks", Table: tbl}, "type")
	if err != nil {
		t.Fatal(err)
	}
	if want := []Group{{"click", 2}, {"page_view", 1}}; !reflect.DeepEqual(groups, want) {
		t.Errorf("count by type %v, want %v", groups, want)
	}
	if _, err := Open(context.Background(), st, Query{Topic: "clicks", Table: tbl, Columns: []string{"nope"}}); err == nil {
		t.Error("a column the table lacks was accepted")
	}

	// The same catalog read as if the warehouse were elsewhere: the
	// table's files are outside it, and are not read from there.
	elsewhere, err := OpenCatalog(context.Background(), iceberg.Config{Directory: t.TempDir(), Path: filepath.Join(dir, DefaultCatalogName)})
	if err != nil {
		t.Fatal(err)
	}
	defer elsewhere.Close()
	moved, err := elsewhere.Table(context.Background(), "clicks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), st, Query{Topic: "clicks", Table: moved}); err == nil || !strings.Contains(err.Error(), "outside its warehouse") {
		t.Errorf("files outside the warehouse: %v", err)
	}
}

// TestTableErrors: a topic without a table, a table without a snapshot,
// and a warehouse without a catalog are told apart.
func TestTableErrors(t *testing.T) {
	dir := t.TempDir()
	w := tabletest.New(t, dir)
	w.Table(t, "empty", schemas.Click)
	w.Table(t, "ops.metrics", schemas.Metric) // a topic name with a dot
	cat, err := OpenCatalog(context.Background(), tableConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if topics, err := cat.Topics(context.Background()); err != nil || !reflect.DeepEqual(topics, []string{"empty", "ops.metrics"}) {
		t.Errorf("topics %v, %v; want [empty ops.metrics]", topics, err)
	}
	if tbl, err := cat.Table(context.Background(), "ops.metrics"); err != nil || tbl.Identifier != "millrace.ops.metrics" {
		t.Errorf("the ops.metrics table: %+v, %v", tbl, err)
	}
	if _, err := openTable(t, dir, "logs"); !errors.Is(err, ErrNoTable) {
		t.Errorf("no table: %v, want ErrNoTable", err)
	}
	tbl, err := openTable(t, dir, "empty")
	if err != nil {
		t.Fatal(err)
	}
	if tbl.CurrentSnapshotID != 0 || len(tbl.Files) != 0 {
		t.Errorf("an empty table: %+v", tbl)
	}
	st, err := store.NewFile(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), st, Query{Topic: "empty", Table: tbl}); !errors.Is(err, ErrNoFiles) {
		t.Errorf("an empty table: %v, want ErrNoFiles", err)
	}
	empty := t.TempDir()
	if HasDefaultCatalog(empty) {
		t.Error("a catalog found in an empty directory")
	}
	if _, err := OpenCatalog(context.Background(), tableConfig(empty)); err == nil {
		t.Error("a catalog opened where there is none")
	}
	if HasDefaultCatalog(empty) {
		t.Error("opening a missing catalog created it")
	}
}

func tableConfig(dir string) iceberg.Config { return iceberg.Config{Directory: dir} }
