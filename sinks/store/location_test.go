package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLocationURL takes a directory, absolute or relative, as well as a URL.
func TestLocationURL(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/data/lake":           "file:///data/lake",
		"/data/lake/":          "file:///data/lake",
		".millrace/lake":       "file://" + filepath.ToSlash(filepath.Join(wd, ".millrace/lake")),
		"file:///data/lake":    "file:///data/lake",
		"s3://bucket/prefix":   "s3://bucket/prefix",
		"https://example.com/": "https://example.com/", // Open says what is wrong with it
	} {
		if got, err := LocationURL(in); err != nil || got != want {
			t.Errorf("LocationURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := LocationURL(""); err == nil {
		t.Error("LocationURL accepted an empty location")
	}
}
