package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"millrace/schemas"
	"millrace/sinks/lakeread/tabletest"
)

// landClicksTable commits two rolls of clicks to the clicks table of a
// warehouse in root, leaves a file no snapshot lists beside them, and
// lands a logs topic as Hive directories in the same root.
func landClicksTable(t *testing.T, root string) {
	t.Helper()
	ev := func(typ, title, ts string) string {
		return fmt.Sprintf(`{"type":%q,"title":%q,"url":"https://shop.example/x","ts":"2024-05-01T%sZ"}`, typ, title, ts)
	}
	w := tabletest.New(t, root)
	tbl := w.Table(t, "clicks", schemas.Click)
	tbl = w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "lake-clicks", From: 0, To: 2, Files: []tabletest.File{{
		Name:   "dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000001.parquet",
		Events: []string{ev("page_view", "home", "10:00:00"), ev("click", "boots", "10:01:00")}}}})
	w.Commit(t, tbl, schemas.Click, tabletest.Roll{Group: "lake-clicks", From: 2, To: 3, Files: []tabletest.File{{
		Name:   "dt=2024-05-01/hr=11/part-0-00000000000000000002-00000000000000000002.parquet",
		Events: []string{ev("click", "hat", "11:00:00")}}}})
	w.Write(t, tbl, schemas.Click, tabletest.File{
		Name:   "dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000009.parquet",
		Events: []string{ev("click", "uncommitted", "10:30:00")}})
	writeLakeFile(t, root, "logs/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000000.parquet",
		`{"type":"click","title":"a hive topic","ts":"2024-05-01T10:00:00Z"}`)
}

// TestLakeTable: head, cat and count read a table's current snapshot (not
// the uncommitted file in its directory) in a warehouse with the default
// catalog, a Hive topic in the same lake stays readable, and inspect shows
// the snapshots with the group's offsets, the files and the partitions.
func TestLakeTable(t *testing.T) {
	root := t.TempDir()
	landClicksTable(t, root)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cat", "clicks", "--columns", "title"}, "title\nhome\nboots\nhat\n"},
		{[]string{"count", "clicks", "--by", "type"}, "type       count\nclick          2\npage_view      1\n"},
		{[]string{"head", "clicks", "-n", "1", "--columns", "type,title", "--namespace", "millrace"}, "type       title\npage_view  home\n"},
		{[]string{"cat", "clicks", "--columns", "title", "--from", "2024-05-01T11"}, "title\nhat\n"},
		{[]string{"cat", "logs", "--columns", "title"}, "title\na hive topic\n"},
	} {
		args := append(append([]string{"lake"}, c.args...), "--lake", root)
		if code, out, errOut := runMain(args...); code != 0 || out != c.want {
			t.Errorf("%s: exit %d\n%s%s\nwant\n%s", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}

	tableDir := filepath.Join(root, "millrace.db", "clicks")
	for _, args := range [][]string{{root, "--table", "clicks"}, {tableDir}, {"file://" + tableDir}} {
		code, out, errOut := runMain(append([]string{"lake", "inspect"}, args...)...)
		for _, want := range []string{
			"table millrace.clicks\n",
			"millrace.offsets.lake-clicks.clicks = 0:2\n",
			"millrace.offsets.lake-clicks.clicks = 0:3\n",
			"  (current)\n",
			"ts_hour=2024-05-01-10  1      2",
			"ts_hour=2024-05-01-11  1      1",
			"part-0-00000000000000000002-00000000000000000002.parquet  ts_hour=2024-05-01-11  1",
			"total: 2 snapshots, 2 partitions, 2 files, 3 rows",
		} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("inspect %v: exit %d, want %q in\n%s%s", args, code, want, out, errOut)
			}
		}
		if strings.Contains(out, "uncommitted") || strings.Contains(out, "00000000000000000009") {
			t.Errorf("inspect %v lists the uncommitted file:\n%s", args, out)
		}
	}
	// Without --table, a warehouse's every Parquet file, and a hint.
	code, out, errOut := runMain("lake", "inspect", root)
	if code != 0 || !strings.Contains(out, "total: 4 files") || !strings.Contains(errOut, "holds an Iceberg catalog") {
		t.Errorf("inspect of the warehouse: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runMain("lake", "inspect", root, "--table", "clicks", "--json")
	var got struct {
		Rows      int64
		Snapshots []struct{ Summary map[string]string }
		Files     []struct{ Rows int64 }
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Rows != 3 || len(got.Files) != 2 ||
		len(got.Snapshots) != 2 || got.Snapshots[1].Summary["millrace.offsets.lake-clicks.clicks"] != "0:3" {
		t.Errorf("inspect --json: exit %d, %v, %+v\n%s%s", code, err, got, out, errOut)
	}

	code, out, errOut = runMain("lake", "inspect", root, "--table", "clicks", "--sql")
	for _, want := range []string{
		`CREATE OR REPLACE VIEW "clicks" AS SELECT * FROM read_parquet([` + "\n  '" + filepath.Join(tableDir, "data"),
		"hr=10/part-0-00000000000000000000-00000000000000000001.parquet',\n",
		"hr=11/part-0-00000000000000000002-00000000000000000002.parquet'\n], hive_partitioning = true, union_by_name = true);\n",
	} {
		if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "00000000000000000009") {
			t.Errorf("inspect --sql: exit %d, want %q and not the uncommitted file in\n%s%s", code, want, out, errOut)
		}
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"inspect", root, "--table", "clicks", "--sql", "--json"}, 2, "give one"},
		{[]string{"inspect", filepath.Join(root, "logs"), "--sql"}, 2, "are for a table"},
		{[]string{"head", "nope", "--lake", root, "--namespace", "millrace"}, 1, "no table millrace.nope"},
		{[]string{"head", "clicks", "--lake", root, "--catalog", "postgres"}, 2, "needs a URL"},
		{[]string{"inspect", root, "--table", "nope"}, 1, "no table millrace.nope"},
		{[]string{"inspect", t.TempDir(), "--table", "clicks"}, 1, "no SQLite catalog"},
	} {
		code, _, errOut := runMain(append([]string{"lake"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
	// audit takes the same catalog settings, for the lake --lake names.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "-b", "127.0.0.1:1", "--namespace", "ops"}, "for the lake --lake names"},
		{[]string{"audit", "-b", "127.0.0.1:1", "--lake", "s3://bucket/lake", "--catalog", "sqlite"}, "not one"},
	} {
		if code, _, errOut := runMain(c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
}

// TestTableFlagsToken: --catalog-token-file's token (without the file's
// newline) goes to a rest catalog's configuration; with another catalog,
// or a file that cannot be read, it is a usage error.
func TestTableFlagsToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := tableFlags{catalog: "rest", catalogURI: "http://127.0.0.1:8181", catalogTokenFile: file}
	c, err := tf.config(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "s3cret" {
		t.Errorf("token %q, want s3cret", c.Token)
	}
	for _, bad := range []struct {
		flags tableFlags
		want  string
	}{
		{tableFlags{catalogTokenFile: file}, "a token or an OAuth2 credential is for a REST catalog only"},
		{tableFlags{catalogCredentialFile: file}, "a token or an OAuth2 credential is for a REST catalog only"},
		{tableFlags{catalog: "rest", catalogURI: "http://127.0.0.1:8181", catalogTokenFile: file + ".missing"}, "--catalog-token-file"},
	} {
		_, err := bad.flags.config(t.TempDir())
		var usage *usageErr
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want a usage error with %q", bad.flags, err, bad.want)
		}
	}
}
