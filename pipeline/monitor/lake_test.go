package monitor

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/schemas"
	"millrace/sinks/lakeread"
	"millrace/sinks/lakeread/tabletest"
	"millrace/store"
)

// TestLakePageShowsTables: /console/api/lake shows a lake's tables with
// their snapshots (the group's offsets in the summaries), the current
// snapshot's files and partitions with row counts, and not a file of the
// table's directory that no snapshot lists; a lake without a catalog is
// left out, and a console without lakes says why there is nothing.
func TestLakePageShowsTables(t *testing.T) {
	h10 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	click := func(title string, at time.Time) string {
		return fmt.Sprintf(`{"type":"click","title":%q,"ts":%q}`, title, at.Format(time.RFC3339))
	}
	dir := t.TempDir()
	w := tabletest.New(t, dir)
	tbl := w.Table(t, "clicks", schemas.Click)
	tbl = w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "lake-clicks", From: 0, To: 2, Files: []tabletest.File{{
		Name: "dt=2026-12-02/hr=10/part-0-00000000000000000000-00000000000000000001.parquet", At: h10,
		Events: []string{click("a", h10), click("b", h10)}}}})
	tbl = w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "lake-clicks", From: 2, To: 3, Files: []tabletest.File{{
		Name: "dt=2026-12-02/hr=11/part-0-00000000000000000002-00000000000000000002.parquet", At: h10.Add(time.Hour),
		Events: []string{click("c", h10.Add(time.Hour))}}}})
	w.Write(t, tbl, schemas.Click, tabletest.File{
		Name: "dt=2026-12-02/hr=10/part-0-00000000000000000000-00000000000000000009.parquet", At: h10,
		Events: []string{click("uncommitted", h10)}})
	st, err := store.NewFile(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	hive := t.TempDir()
	cfg := AuditConfig{Lakes: []AuditLake{{Name: "tables", Store: st, URL: "file://" + dir}, {Name: "hive", Store: st, URL: "file://" + hive},
		{Name: "more", Store: st, URL: "file://" + dir}}}
	a, err := newAuditor(cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(fixedSource(testSnapshot()), a))
	defer srv.Close()
	var v LakeView
	getJSON(t, srv.URL+"/console/api/lake", &v)
	if v.Message != "" || len(v.Lakes) != 1 || v.Lakes[0].Name != "tables, more" || v.Lakes[0].Error != "" || len(v.Lakes[0].Tables) != 1 {
		t.Fatalf("lakes %+v, want the one with a catalog and its one table", v)
	}
	got := v.Lakes[0].Tables[0]
	if got.Identifier != "millrace.clicks" || got.Rows != 3 || len(got.Files) != 2 || len(got.Partitions) != 2 || len(got.Snapshots) != 2 {
		t.Errorf("table %s: %d rows, %d files, %d partitions, %d snapshots; want millrace.clicks: 3, 2, 2, 2",
			got.Identifier, got.Rows, len(got.Files), len(got.Partitions), len(got.Snapshots))
	}
	if p := got.Partitions[0]; p.Name != "ts_hour=2026-12-02-10" || p.Rows != 2 || p.Files != 1 {
		t.Errorf("first partition %+v", p)
	}
	if s := got.Snapshots[1]; !s.Current || s.Summary["millrace.offsets.lake-clicks.clicks"] != "0:3" {
		t.Errorf("current snapshot %+v", s)
	}
	for _, f := range got.Files {
		if strings.Contains(f.Location, "00000000000000000009") {
			t.Errorf("the page lists the uncommitted file %s", f.Location)
		}
	}

	bare := httptest.NewServer(Handler(fixedSource(testSnapshot()), nil))
	defer bare.Close()
	v = LakeView{}
	getJSON(t, bare.URL+"/console/api/lake", &v)
	if v.Message != NoTablesMessage || len(v.Lakes) != 0 {
		t.Errorf("no lakes: %+v", v)
	}
}

// TestLakeViewKeepsTheNewest: the page gets the newest snapshots and files
// of a large table and says how many it left out.
func TestLakeViewKeepsTheNewest(t *testing.T) {
	tbl := &lakeread.Table{Rows: 7}
	for i := range maxViewSnapshots + 3 {
		tbl.Snapshots = append(tbl.Snapshots, lakeread.Snapshot{ID: int64(i)})
	}
	for i := range maxViewFiles + 5 {
		tbl.Files = append(tbl.Files, lakeread.DataFile{Location: fmt.Sprint(i)})
	}
	v := forTableView(tbl)
	if len(v.Snapshots) != maxViewSnapshots || v.OmittedSnapshots != 3 || v.Snapshots[0].ID != 3 ||
		len(v.Files) != maxViewFiles || v.OmittedFiles != 5 || v.Files[0].Location != "5" || v.Rows != 7 {
		t.Errorf("view: %d snapshots (%d omitted, first %d), %d files (%d omitted)",
			len(v.Snapshots), v.OmittedSnapshots, v.Snapshots[0].ID, len(v.Files), v.OmittedFiles)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
