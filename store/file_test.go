package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"millrace/store"
	"millrace/store/storetest"
)

func TestFileConformance(t *testing.T) {
	storetest.Run(t, storetest.Config{
		New: func(t *testing.T) store.Store {
			s, err := store.NewFile(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		LargeObject: 3 << 20,
	})
}

// TestFileTemporaryNames checks the on-disk layout the lake and operators rely
// on: temporary files sit next to their final name and start with ".tmp-".
func TestFileTemporaryNames(t *testing.T) {
	root := t.TempDir()
	s, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o, err := s.Create(ctx, "clicks/dt=2024-05-01/hr=10/part-2-40.parquet")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "clicks", "dt=2024-05-01", "hr=10")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), ".tmp-part-2-40.parquet-") {
		t.Fatalf("temporary file: %v %v", err, entries)
	}
	if err := o.Publish(ctx); err != nil {
		t.Fatal(err)
	}
	entries, _ = os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "part-2-40.parquet" {
		t.Fatalf("after publish: %v", entries)
	}
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.Open(ctx, "file://"+dir+"/lake", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fs, ok := s.(*store.File); !ok || fs.Root() != filepath.Join(dir, "lake") {
		t.Errorf("Open(file) = %T %v", s, s)
	}
	for _, bad := range []string{"file://host/x", "file://", "ftp://x/y", "s3:///prefix", "://"} {
		if _, err := store.Open(ctx, bad, store.Options{}); err == nil {
			t.Errorf("Open(%q) accepted", bad)
		}
	}
	if _, err := store.Open(ctx, "s3://bucket/p", store.Options{S3Endpoint: "127.0.0.1:9"}); err == nil {
		t.Error("endpoint without a scheme accepted")
	}
	if _, err := store.Open(ctx, "s3://bucket/p", store.Options{S3Endpoint: "http://127.0.0.1:9", PartSize: 1 << 20}); err == nil {
		t.Error("part size below 5 MiB accepted")
	}
}

func TestCanonicalURL(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/data/lake/":            "file:///data/lake",
		"file:///data//lake/./":  "file:///data/lake",
		"lake":                   "file://" + filepath.ToSlash(filepath.Join(wd, "lake")),
		"s3://bucket/":           "s3://bucket",
		"s3://bucket//prefix/x/": "s3://bucket/prefix/x",
	} {
		if got, err := store.CanonicalURL(in); err != nil || got != want {
			t.Errorf("CanonicalURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := store.CanonicalURL("http://x/y"); err == nil {
		t.Error("an http URL was taken for a lake")
	}
}
