package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"millrace/sinks/iceberg"
	"millrace/sinks/lakeread"
)

// parquetSource is what DuckDB's read_parquet reads for glob, a Hive glob
// "<lake>/<topic>/**/*.parquet": when lake is a warehouse whose default
// catalog has the topic's table (`millrace up` lands tables by default),
// the list of files the table's current snapshot lists, never the table's
// directory, which may hold files nobody committed; else the glob. It
// returns "" while the table or the topic has no file.
func parquetSource(t *testing.T, glob string) string {
	t.Helper()
	lake, topic, ok := splitLakeGlob(glob)
	if !ok || !lakeread.HasDefaultCatalog(lake) {
		if matches, _ := filepath.Glob(strings.Replace(glob, "**", "*/*", 1)); len(matches) == 0 {
			return ""
		}
		return quoteSQL(glob)
	}
	files, err := tableFiles(lake, topic)
	if err != nil {
		t.Fatalf("the table of %s in %s: %v", topic, lake, err)
	}
	if len(files) == 0 {
		return ""
	}
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = quoteSQL(f)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// tableFiles lists the paths of the data files of the current snapshot of
// topic's table in the warehouse lake (its default catalog); none while
// the table does not exist yet.
func tableFiles(lake, topic string) ([]string, error) {
	cat, err := lakeread.OpenCatalog(context.Background(), iceberg.Config{Directory: lake})
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	tbl, err := cat.Table(context.Background(), topic)
	if errors.Is(err, lakeread.ErrNoTable) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range tbl.Files {
		out = append(out, strings.TrimPrefix(f.Location, "file://"))
	}
	return out, nil
}

// splitLakeGlob splits "<lake>/<topic>/**/*.parquet".
func splitLakeGlob(glob string) (lake, topic string, ok bool) {
	rest, ok := strings.CutSuffix(glob, "/**/*.parquet")
	if !ok {
		return "", "", false
	}
	return filepath.Dir(rest), filepath.Base(rest), true
}

func quoteSQL(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
