package lake

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/internal/s3test"
	"millrace/sinks/iceberg"
	"millrace/store"
)

// TestIcebergS3Warehouse: a worker lands clicks in two rolls into a table
// whose warehouse is a bucket prefix on a real S3 server (versitygw), with
// the catalog in a local SQLite file. The table's location, metadata and
// data files are in the bucket, where the worker's store wrote them;
// iceberg-go's scan, through its own S3 file IO with the store's settings,
// reads every record once, and the snapshot's offsets are the group's. A
// warehouse that is not the store's bucket and prefix is refused.
func TestIcebergS3Warehouse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newIcebergFixture(ctx, t, 1)
	s3cfg := startS3Bucket(t, "warehouse")
	s3cfg.Prefix = "lake/tables"
	var err error
	if f.st, err = store.NewS3(ctx, s3cfg); err != nil {
		t.Fatal(err)
	}
	f.cfg.Iceberg = TableConfig{Warehouse: "s3://warehouse/lake/tables", URI: filepath.Join(t.TempDir(), "catalog.db")}
	st, cfg := f.st, f.cfg

	produceClicks(ctx, t, f.addr, 0, 1, 2)
	w := f.startWorker(ctx, t)
	defer w.Shutdown(context.Background())
	f.landUntil(ctx, t, w, 3)

	// A reader of its own: the catalog and the store's settings, nothing
	// of the worker's.
	cc, err := cfg.Iceberg.catalogConfig(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := iceberg.Open(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.Catalog().LoadTable(ctx, cat.Identifier("clicks"))
	if err != nil {
		t.Fatal(err)
	}
	const location = "s3://warehouse/lake/tables/millrace.db/clicks"
	if tbl.Location() != location || !strings.HasPrefix(tbl.MetadataLocation(), location+"/metadata/") {
		t.Errorf("the table is at %s, its metadata at %s; want both under %s", tbl.Location(), tbl.MetadataLocation(), location)
	}
	if got := scanEventIDs(t, tbl); strings.Join(got, " ") != "e0 e1 e2" {
		t.Errorf("the table holds %v, want e0 e1 e2", got)
	}
	progress, err := iceberg.ReadProgress(tbl, "g", "clicks")
	if err != nil {
		t.Fatal(err)
	}
	if progress.Offsets[0] != 3 {
		t.Errorf("the snapshot's offsets are %v, want 0:3", progress.Offsets)
	}
	// The snapshot's files are the store's objects, by their deterministic names.
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := st.List(ctx, "millrace.db/clicks/data/")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, o := range objects {
		names["s3://warehouse/lake/tables/"+o.Name] = true
	}
	if len(tasks) != 2 {
		t.Errorf("the snapshot lists %d files, want one per roll (2)", len(tasks))
	}
	for _, task := range tasks {
		if !names[task.File.FilePath()] {
			t.Errorf("the snapshot's file %s is not an object of the store (%v)", task.File.FilePath(), names)
		}
	}

	// The tables' files go where the worker writes: another prefix, a
	// store that is not S3, or another directory than a file store's root
	// is refused before anything is opened.
	other := cfg.Iceberg
	other.Warehouse = "s3://warehouse/elsewhere"
	if _, err := other.catalogConfig(st, nil); err == nil || !strings.Contains(err.Error(), "is not the sink's store s3://warehouse/lake/tables") {
		t.Errorf("a warehouse elsewhere in the bucket: %v", err)
	}
	files, err := store.NewFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Iceberg.catalogConfig(files, nil); err == nil || !strings.Contains(err.Error(), "the sink's store is not") {
		t.Errorf("an S3 warehouse with a file store: %v", err)
	}
	other.Warehouse = "file://" + t.TempDir()
	if _, err := other.catalogConfig(files, nil); err == nil || !strings.Contains(err.Error(), "is not the sink's store "+files.Root()) {
		t.Errorf("a directory warehouse that is not the file store's root: %v", err)
	}
	other.Warehouse = "file://" + files.Root()
	if _, err := other.catalogConfig(files, nil); err != nil {
		t.Errorf("the file store's root as the warehouse: %v", err)
	}
}

// startS3Bucket starts an S3 server with bucket and returns the store
// settings that reach it.
func startS3Bucket(t *testing.T, bucket string) store.S3Config {
	return store.S3Config{Endpoint: s3test.StartBucket(t, bucket), Bucket: bucket, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey}
}
