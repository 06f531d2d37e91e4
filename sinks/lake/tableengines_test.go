package lake

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// engineQueries are the SQL blocks of docs/lake.md's section on reading
// the tables from other engines, by what each one reads.
type engineQueries struct {
	catalog     string // the current metadata file, from the catalog's database
	icebergScan string // DuckDB with its iceberg extension
	readParquet string // DuckDB without extensions, over the snapshot's files
}

// docEngineQueries reads the queries from docs/lake.md: the ```sql blocks
// of its section "Reading the tables from DuckDB, Trino and Spark".
func docEngineQueries(t *testing.T) engineQueries {
	t.Helper()
	doc, err := os.ReadFile("../../docs/lake.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Reading the tables from DuckDB, Trino and Spark")
	if !ok {
		t.Fatal("docs/lake.md has no section \"Reading the tables from DuckDB, Trino and Spark\"")
	}
	if next := strings.Index(section, "\n### "); next >= 0 {
		section = section[:next]
	}
	var q engineQueries
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(section, -1) {
		switch block := m[1]; {
		case strings.Contains(block, "FROM iceberg_tables"):
			q.catalog = block
		case strings.Contains(block, "iceberg_scan("):
			q.icebergScan = block
		case strings.Contains(block, "read_parquet("):
			q.readParquet = block
		}
	}
	if q.catalog == "" || q.icebergScan == "" || q.readParquet == "" {
		t.Fatalf("docs/lake.md's engines section lacks a query: catalog %q, iceberg_scan %q, read_parquet %q",
			q.catalog, q.icebergScan, q.readParquet)
	}
	return q
}

// TestDocEngineQueries runs docs/lake.md's queries for reading a table on
// one the sink landed (five clicks in rolls of two: three snapshots),
// with the doc's /data/lake replaced by the warehouse: the catalog query
// through the SQLite driver the catalog uses names the table's current
// metadata file; DuckDB's read_parquet over the files the current
// snapshot lists counts every click once; the iceberg_scan query, which
// needs an extension that cannot be installed offline, is parsed by
// DuckDB, not run.
func TestDocEngineQueries(t *testing.T) {
	t.Parallel()
	q := docEngineQueries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newIcebergFixture(ctx, t, 1)
	produceClicks(ctx, t, f.addr, 0, 1, 2, 3, 4)
	landed := make(chan struct{})
	cfg := f.cfg
	cfg.AfterCommit = func(_ string, _ int32, next int64, _ time.Duration) {
		if next == 5 {
			close(landed)
		}
	}
	w, err := New(cfg, f.st, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-landed:
	case <-w.Done():
		t.Fatalf("the worker stopped: %v", w.Err())
	case <-ctx.Done():
		t.Fatal("the clicks were not landed")
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	root := cfg.Iceberg.Warehouse
	local := func(query string) string { return strings.ReplaceAll(query, "/data/lake", root) }
	tbl, _ := readTable(t, cfg)

	catalogDB, err := sql.Open("sqlite", root+"/catalog.db")
	if err != nil {
		t.Fatal(err)
	}
	defer catalogDB.Close()
	var metadata string
	if err := catalogDB.QueryRowContext(ctx, local(q.catalog)).Scan(&metadata); err != nil {
		t.Fatalf("the doc's catalog query: %v", err)
	}
	if metadata != tbl.MetadataLocation() {
		t.Errorf("the doc's catalog query gives %s; the table's current metadata is %s", metadata, tbl.MetadataLocation())
	}

	duck, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer duck.Close()
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, 0, len(tasks))
	for _, task := range tasks {
		files = append(files, "'"+task.File.FilePath()+"'")
	}
	// The doc's list of two example files becomes the snapshot's list.
	readParquet := regexp.MustCompile(`(?s)read_parquet\(\[.*?\]\)`).
		ReplaceAllLiteralString(local(q.readParquet), "read_parquet(["+strings.Join(files, ", ")+"])")
	rows, err := duck.QueryContext(ctx, readParquet)
	if err != nil {
		t.Fatalf("the doc's read_parquet query: %v\n%s", err, readParquet)
	}
	defer rows.Close()
	byType := map[string]int64{}
	for rows.Next() {
		var typ string
		var n int64
		if err := rows.Scan(&typ, &n); err != nil {
			t.Fatal(err)
		}
		byType[typ] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(byType) != "map[click:5]" {
		t.Errorf("the doc's read_parquet query over the snapshot's %d files counts %v; want 5 clicks", len(files), byType)
	}

	// iceberg_scan: every statement of the block parses.
	for _, stmt := range strings.Split(q.icebergScan, ";") {
		if stmt = strings.TrimSpace(stmt); stmt == "" || strings.HasPrefix(stmt, "INSTALL") || strings.HasPrefix(stmt, "LOAD") {
			continue
		}
		var parsed any // DuckDB's JSON: a map with "error"
		// A literal: json_serialize_sql takes no parameter.
		if err := duck.QueryRowContext(ctx, "SELECT json_serialize_sql('"+strings.ReplaceAll(stmt, "'", "''")+"')").Scan(&parsed); err != nil {
			t.Fatal(err)
		}
		if m, ok := parsed.(map[string]any); !ok || m["error"] != false {
			t.Errorf("DuckDB does not parse the doc's statement %q: %s", stmt, parsed)
		}
	}
}
