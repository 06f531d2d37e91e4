package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/schemas"
	"millrace/sinks/parquet"
)

// writeLakeFile writes click events as a Parquet file at root/name.
func writeLakeFile(t *testing.T, root, name string, events ...string) {
	t.Helper()
	path := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := parquet.NewWriter(f, schemas.Click, parquet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Append([]byte(e), time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLakeHeadCatCount runs the commands on an hourly lake named as a
// directory and as a URL, with columns, limits, a time range and both
// output formats.
func TestLakeHeadCatCount(t *testing.T) {
	root := t.TempDir()
	ev := func(typ, title, ts string) string {
		return fmt.Sprintf(`{"type":%q,"title":%q,"ts":"2024-05-01T%sZ"}`, typ, title, ts)
	}
	writeLakeFile(t, root, "clicks/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000002.parquet",
		ev("page_view", "home", "10:00:00"), ev("click", "boots", "10:01:00"), ev("click", "hat", "10:02:00"))
	writeLakeFile(t, root, "clicks/dt=2024-05-01/hr=11/part-0-00000000000000000003-00000000000000000003.parquet",
		ev("click", "boots", "11:00:00"))

	for _, lake := range []string{root, "file://" + root} {
		code, out, errOut := runMain("lake", "head", "clicks", "--lake", lake, "--columns", "type,title", "-n", "2")
		if want := "type       title\npage_view  home\nclick      boots\n"; code != 0 || out != want {
			t.Errorf("head --lake %s: exit %d\n%s%s\nwant\n%s", lake, code, out, errOut, want)
		}
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"cat", "clicks", "--columns", "title", "--json"},
			`{"title":"home"}` + "\n" + `{"title":"boots"}` + "\n" + `{"title":"hat"}` + "\n" + `{"title":"boots"}` + "\n"},
		{[]string{"cat", "clicks", "--columns", "title,ts", "--from", "2024-05-01T10:01", "--to", "2024-05-01T11"},
			"title  ts\nboots  2024-05-01T10:01:00Z\nhat    2024-05-01T10:02:00Z\n"},
		{[]string{"count", "clicks", "--by", "type"}, "type       count\nclick          3\npage_view      1\n"},
		{[]string{"count", "clicks", "--by", "title", "-n", "1", "--json"}, `{"title":"boots","count":2}` + "\n"},
		{[]string{"count", "clicks", "--by", "type", "--from", "2024-05-01T11:00:00Z"}, "type   count\nclick      1\n"},
		// --since is relative to now: nothing of 2024 is in the last hour.
		{[]string{"head", "clicks", "--since", "1h", "--columns", "type"}, "type\n"},
	}
	for _, c := range cases {
		args := append([]string{"lake"}, c.args...)
		args = append(args, "--lake", root)
		if code, out, errOut := runMain(args...); code != 0 || out != c.want {
			t.Errorf("%s: exit %d\n%s%s\nwant\n%s", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
}

// TestLakeRowsErrors: usage errors exit 2, a topic with nothing landed 1,
// each with a line that says what to do.
func TestLakeRowsErrors(t *testing.T) {
	root := t.TempDir()
	writeLakeFile(t, root, "clicks/dt=2024-05-01/part-0-00000000000000000000-00000000000000000000.parquet",
		`{"type":"click","ts":"2024-05-01T10:00:00Z"}`)
	missing := filepath.Join(root, "typo")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"head", "clicks"}, 2, "--lake is required"},
		{[]string{"count", "clicks", "--lake", root}, 2, "--by COLUMN is required"},
		{[]string{"head", "clicks", "--lake", root, "--since", "1h", "--from", "2024-05-01"}, 2, "give one"},
		{[]string{"head", "clicks", "--lake", root, "--from", "yesterday"}, 2, "--from: \"yesterday\""},
		{[]string{"head", "clicks", "--lake", root, "--from", "2024-05-02", "--to", "2024-05-01"}, 2, "is empty"},
		{[]string{"head", "clicks", "--lake", root, "-n", "-1"}, 2, "-n/--limit"},
		{[]string{"head", "a/b", "--lake", root}, 2, "a topic name has only"},
		{[]string{"head", "clicks", "--lake", root, "--columns", "type,,title"}, 2, "empty column name"},
		{[]string{"head", "clicks", "--lake", root, "--columns", "tpye"}, 1, `no column "tpye"`},
		{[]string{"head", "logs", "--lake", root}, 1, `no Parquet files of topic "logs" under file://` + root},
		{[]string{"count", "clicks", "--by", "type", "--lake", missing}, 1, "no lake at " + missing + ": not a directory"},
	} {
		code, _, errOut := runMain(append([]string{"lake"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
	// Reading never makes the directory a typo named.
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("lake count made %s: %v", missing, err)
	}
}
