package monitor

import (
	"context"
	"strings"
	"time"

	"millrace/sinks/iceberg"
	"millrace/sinks/lakeread"
)

// LakeView is what the console's lake page shows: the Iceberg tables of
// each lake (`format: iceberg` sinks), each with its snapshots, and the
// files and partitions of its current snapshot, with their row counts.
type LakeView struct {
	// Message says why there is nothing to show, when there is not.
	Message string          `json:"message,omitempty"`
	Lakes   []LakeTableList `json:"lakes"`
	At      time.Time       `json:"at"`
}

// LakeTableList is one lake's tables.
type LakeTableList struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Tables are the tables of the lake's catalog, by topic.
	Tables []TableView `json:"tables"`
	// Error is why the lake's catalog or a table could not be read.
	Error string `json:"error,omitempty"`
}

// TableView is a table as the page gets it: the newest snapshots and files
// only (maxViewSnapshots, maxViewFiles), with how many were left out; the
// partitions and totals are always whole.
type TableView struct {
	lakeread.Table
	OmittedSnapshots int `json:"omitted_snapshots,omitempty"`
	OmittedFiles     int `json:"omitted_files,omitempty"`
}

// The most snapshots and files of one table the page gets: a table
// committed every minute has 1,440 snapshots a day until expiry.
const (
	maxViewSnapshots = 50
	maxViewFiles     = 200
)

// NoTablesMessage is what the page says when no lake has Iceberg tables.
const NoTablesMessage = "no Iceberg tables: the lake page shows the tables of sinks with format: iceberg " +
	"(a lake directory with the default catalog, catalog.db)"

// LakeSource gives the lake page its tables; *Auditor is one.
type LakeSource interface {
	LakeTables(ctx context.Context) LakeView
}

// LakeTables reads the tables of the auditor's lakes (LakeSource).
func (a *Auditor) LakeTables(ctx context.Context) LakeView {
	return readLakeTables(ctx, a.cfg.Lakes, time.Now())
}

// readLakeTables reads every table of each lake's catalog (catalogOf),
// once per catalog and namespace (the sinks of `millrace up` share one:
// its name lists theirs); a lake without one (Hive directories, S3) is
// left out.
func readLakeTables(ctx context.Context, lakes []AuditLake, now time.Time) LakeView {
	v := LakeView{Lakes: []LakeTableList{}, At: now}
	type key struct{ url, catalog, path, ref, namespace string }
	var keys []key
	names := map[key][]string{}
	configs := map[key]iceberg.Config{}
	for _, l := range lakes {
		cfg, ok := catalogOf(l)
		if !ok {
			continue
		}
		k := key{l.URL, cfg.Catalog, cfg.Path, cfg.URL, cfg.Namespace}
		if names[k] == nil {
			keys = append(keys, k)
			configs[k] = cfg
		}
		names[k] = append(names[k], l.Name)
	}
	for _, k := range keys {
		v.Lakes = append(v.Lakes, readTables(ctx, strings.Join(names[k], ", "), k.url, configs[k]))
	}
	if len(v.Lakes) == 0 {
		v.Message = NoTablesMessage
	}
	return v
}

// readTables reads the tables of one lake's catalog.
func readTables(ctx context.Context, name, url string, cfg iceberg.Config) LakeTableList {
	out := LakeTableList{Name: name, URL: url, Tables: []TableView{}}
	cat, err := lakeread.OpenCatalog(ctx, cfg)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer cat.Close()
	topics, err := cat.Topics(ctx)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	for _, topic := range topics {
		t, err := cat.Table(ctx, topic)
		if err != nil {
			out.Error = err.Error()
			continue
		}
		out.Tables = append(out.Tables, forTableView(t))
	}
	return out
}

// forTableView keeps the newest snapshots and files of t.
func forTableView(t *lakeread.Table) TableView {
	v := TableView{Table: *t}
	if n := len(t.Snapshots) - maxViewSnapshots; n > 0 {
		v.Snapshots, v.OmittedSnapshots = t.Snapshots[n:], n
	}
	if n := len(t.Files) - maxViewFiles; n > 0 {
		v.Files, v.OmittedFiles = t.Files[n:], n
	}
	return v
}
