// Package tabletest lands rows in Iceberg tables as a `format: iceberg`
// sink does (the sink's Parquet writer, the deterministic file names under
// the table's data/, one commit per roll with the group's offsets), for the
// tests of what reads tables: lakeread, the audit, the CLI and the console.
// It can also leave a file in a table's data/ that no snapshot lists, as a
// killed or fenced worker does.
package tabletest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go/table"

	"millrace/schemas"
	"millrace/sinks/iceberg"
	"millrace/sinks/parquet"
)

// File is one data file: its name below the table's data/ (the sink's
// layout without the topic, "dt=2024-05-01/hr=10/part-0-….parquet"), its
// events (JSON, as the topic holds them), their record time, and footer
// metadata (audit.MetaRows, say).
type File struct {
	Name     string
	Events   []string
	At       time.Time
	Metadata map[string]string
}

// Warehouse is a warehouse directory with the default SQLite catalog.
type Warehouse struct {
	// Dir is the warehouse directory (a sink's --out).
	Dir     string
	Catalog *iceberg.Catalog
}

// New opens the default SQLite catalog in dir, creating it; t's cleanup
// closes it.
func New(t testing.TB, dir string) *Warehouse {
	t.Helper()
	cat, err := iceberg.Open(context.Background(), iceberg.Config{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return &Warehouse{Dir: dir, Catalog: cat}
}

// Table loads (creating it) topic's table for schema s, partitioned by hour.
func (w *Warehouse) Table(t testing.TB, topic string, s *schemas.Schema) *table.Table {
	t.Helper()
	tbl, err := w.Catalog.Table(context.Background(), topic, s, iceberg.TableConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// Write writes f into topic's table's data/ without committing it, and
// returns its location.
func (w *Warehouse) Write(t testing.TB, tbl *table.Table, s *schemas.Schema, f File) string {
	t.Helper()
	path := filepath.Join(tbl.Location()[len("file://"):], "data", filepath.FromSlash(f.Name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := parquet.NewWriter(out, s, parquet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range f.Metadata {
		pw.SetMetadata(k, v)
	}
	for _, e := range f.Events {
		if err := pw.Append([]byte(e), f.At); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return "file://" + path
}

// Roll is one commit of a sink worker: its group, the partition and
// offsets it lands, the largest record time landed (the watermark the
// sink records with the offsets), and its files.
type Roll struct {
	Group     string
	Partition int32
	From, To  int64
	Watermark time.Time
	Files     []File
}

// Commit writes the roll's files into tbl's data/ and commits them in one
// snapshot with the group's offsets and watermark, as the sink does, and
// returns the table after it.
func (w *Warehouse) Commit(t testing.TB, tbl *table.Table, s *schemas.Schema, roll Roll) *table.Table {
	t.Helper()
	ctx := context.Background()
	topic := tbl.Identifier()[len(tbl.Identifier())-1]
	cm := iceberg.Commit{Group: roll.Group, Topic: topic,
		Ranges: map[int32]iceberg.Range{roll.Partition: {From: roll.From, To: roll.To}}}
	if !roll.Watermark.IsZero() {
		// sinks/lake's watermark: the largest record time, Unix milliseconds.
		cm.Watermarks = map[int32]string{roll.Partition: fmt.Sprintf(`{"wm":%d}`, roll.Watermark.UnixMilli())}
	}
	for _, f := range roll.Files {
		location := w.Write(t, tbl, s, f)
		pf, err := file.OpenParquetFile(location[len("file://"):], false)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(location[len("file://"):])
		if err != nil {
			t.Fatal(err)
		}
		df, err := iceberg.DataFile(tbl, location, st.Size(), pf.MetaData())
		pf.Close()
		if err != nil {
			t.Fatal(err)
		}
		cm.Files = append(cm.Files, df)
	}
	committed, err := w.Catalog.CommitRoll(ctx, tbl, cm)
	if err != nil {
		t.Fatal(err)
	}
	return committed
}
