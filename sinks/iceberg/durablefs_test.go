package iceberg

import (
	"os"
	"path/filepath"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
)

// TestTablesWriteThroughDurableFS: once a catalog is open, the file IO of
// a file:// table location is durableFS, and a table created and committed
// through it has its metadata where the catalog says and loads again.
func TestTablesWriteThroughDurableFS(t *testing.T) {
	t.Parallel()
	c := openSQLite(t, t.TempDir())
	for _, loc := range []string{"file:///tmp/t", "/tmp/t"} {
		fsys, err := iceio.LoadFS(t.Context(), nil, loc)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := fsys.(durableFS); !ok {
			t.Errorf("file IO of %s is %T, want durableFS", loc, fsys)
		}
	}
	tbl := metricsTable(t, c)
	if _, err := c.Catalog().LoadTable(t.Context(), tbl.Identifier()); err != nil {
		t.Fatalf("the table does not load again: %v", err)
	}
	loc, err := durableFS{}.path(tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(loc); err != nil {
		t.Errorf("metadata file %s: %v", loc, err)
	}
}

// TestDurableFSCreatesWhatItWrites: Create makes the missing directories
// and WriteFile's content is read back whole, for a file URL and a path.
func TestDurableFSCreatesWhatItWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, name := range []string{"file://" + filepath.Join(dir, "a", "b", "m.json"), filepath.Join(dir, "c", "n.json")} {
		want := []byte{'v', byte('0' + i)}
		if err := (durableFS{}).WriteFile(name, want); err != nil {
			t.Fatal(err)
		}
		got, err := (durableFS{}).ReadFile(name)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: read %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := (durableFS{}).path("file://elsewhere/x"); err == nil {
		t.Error("a file URL with a host was taken as a local path")
	}
}
