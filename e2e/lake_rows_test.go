package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"millrace/pipeline/appliance"

	"millrace/internal/waitfor"
)

// readmeLakeCommands returns the `bin/millrace lake ...` lines of the
// README's "Start here" section, the commands a newcomer runs after `make
// run`, split into arguments.
func readmeLakeCommands(t *testing.T) [][]string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(raw), "## Start here")
	end := strings.Index(string(raw), "\n## What millrace is")
	if start < 0 || end < start {
		t.Fatal(`README.md: no "## Start here" section before "## What millrace is"`)
	}
	var cmds [][]string
	for _, line := range strings.Split(string(raw)[start:end], "\n") {
		if !strings.HasPrefix(line, "bin/millrace lake ") {
			continue
		}
		// The commands are split on spaces as a shell would split them
		// only without quotes, comments or variables.
		if strings.ContainsAny(line, `'"#$\`) {
			t.Fatalf("README.md: %q: this test splits commands on spaces; keep them free of quotes, comments and variables", line)
		}
		cmds = append(cmds, strings.Fields(line))
	}
	return cmds
}

// readmeCommand returns the README's command that starts with prefix.
func readmeCommand(t *testing.T, cmds [][]string, prefix ...string) []string {
	t.Helper()
	for _, c := range cmds {
		if len(c) >= len(prefix) && reflect.DeepEqual(c[:len(prefix)], prefix) {
			return c
		}
	}
	t.Fatalf("README.md's Start here has no `%s ...` command; it has %v", strings.Join(prefix, " "), cmds)
	return nil
}

// runIn runs a README command (bin/millrace being the binary under test) in
// dir, as a newcomer runs it in the checkout.
func runIn(dir string, args []string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, millraceBin, args[1:]...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// cellSeparator splits a table line of `lake head` and `lake count` into
// cells: they are padded with at least two spaces.
var cellSeparator = regexp.MustCompile(`  +`)

// parseTable returns the header and the rows of a printed table.
func parseTable(out string) (header []string, rows [][]string) {
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		cells := cellSeparator.Split(strings.TrimSpace(line), -1)
		if i == 0 {
			header = cells
			continue
		}
		rows = append(rows, cells)
	}
	return header, rows
}

// TestReadmeLakeCommandsOnTheDemo does what README.md tells a newcomer after
// `make run`, on a machine without DuckDB: the demo appliance runs, clicks
// arrive at its beacon, and the README's own `lake count` and `lake head`
// commands, run as written in the checkout, show how many clicks of each
// type landed and the clicks themselves.
func TestReadmeLakeCommandsOnTheDemo(t *testing.T) {
	t.Parallel()
	cmds := readmeLakeCommands(t)
	count := readmeCommand(t, cmds, "bin/millrace", "lake", "count", "clicks")
	head := readmeCommand(t, cmds, "bin/millrace", "lake", "head", "clicks")

	// The checkout: the demo's data directory is .millrace in it, where the
	// README's --lake .millrace/lake looks.
	checkout := t.TempDir()
	cfgPath, _, webAddr := writeDemoConfig(t, checkout, func(cfg *appliance.Config) {
		cfg.Data = filepath.Join(checkout, ".millrace")
		cfg.Demo.WriteLog = filepath.Join(checkout, ".millrace", "demo", "app.log")
		cfg.Tail[0].Paths = []string{filepath.Join(checkout, ".millrace", "demo", "*.log")}
	})
	up := startProcess(t, "up", "up", "--config", cfgPath)
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz")
	// The banner says where the clicks table and its catalog are.
	if want := "(Iceberg millrace.clicks; catalog " + filepath.Join(checkout, ".millrace", "lake", "catalog.db") + ")"; !strings.Contains(up.log(), want) {
		t.Errorf("the banner lacks %q:\n%s", want, up.log())
	}

	// The demo page shows the same commands.
	resp, err := http.Get(web + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{count, head} {
		if line := strings.Join(c, " "); !strings.Contains(string(page), line) {
			t.Errorf("the demo page does not show the README's %q", line)
		}
	}

	type click struct{ Type, URL, Title string }
	sent := []click{
		{"page_view", "http://shop.example/", "Home"},
		{"page_view", "http://shop.example/boots", "Boots"},
		{"click", "http://shop.example/boots", "Boots"},
		{"page_view", "http://shop.example/cart", "Cart"},
		{"add_to_cart", "http://shop.example/boots", "Boots"},
		{"click", "http://shop.example/cart", "Cart"},
	}
	var events []string
	for _, c := range sent {
		events = append(events, fmt.Sprintf(`{"type":%q,"url":%q,"title":%q}`, c.Type, c.URL, c.Title))
	}
	if a := request(t, "POST", web+"/v1/events", "application/json", "["+strings.Join(events, ",")+"]", nil); a.status != http.StatusOK {
		t.Fatalf("POST clicks: %d %v", a.status, a.body)
	}

	// Wait for the README's count to show every click: until then it
	// fails (nothing landed) or counts fewer.
	wantCounts := [][]string{{"page_view", "3"}, {"click", "2"}, {"add_to_cart", "1"}}
	var out, errOut string
	logLast := func() {
		if t.Failed() {
			t.Logf("%s, last run: %v:\n%s%s", strings.Join(count, " "), err, out, errOut)
		}
	}
	func() {
		defer logLast()
		waitfor.Until(t, 90*time.Second, fmt.Sprintf("%s to count %v", strings.Join(count, " "), wantCounts), func() bool {
			out, errOut, err = runIn(checkout, count)
			if err != nil {
				return false
			}
			header, rows := parseTable(out)
			if !reflect.DeepEqual(header, []string{"type", "count"}) {
				t.Fatalf("%s: header %q:\n%s", strings.Join(count, " "), header, out)
			}
			return reflect.DeepEqual(rows, wantCounts)
		})
	}()

	out, errOut, err = runIn(checkout, head)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(head, " "), err, errOut)
	}
	header, rows := parseTable(out)
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, name := range []string{"type", "url", "title"} {
		if _, ok := col[name]; !ok {
			t.Fatalf("%s: no %s column:\n%s", strings.Join(head, " "), name, out)
		}
	}
	var got, want []string
	for _, r := range rows {
		if len(r) != len(header) {
			t.Fatalf("%s: row %q does not fit the header %q:\n%s", strings.Join(head, " "), r, header, out)
		}
		got = append(got, r[col["type"]]+" "+r[col["url"]]+" "+r[col["title"]])
		if i, ok := col["received_at"]; ok {
			if at, err := time.Parse(time.RFC3339Nano, r[i]); err != nil || time.Since(at) > time.Hour {
				t.Errorf("%s: received_at %q is no recent RFC 3339 time", strings.Join(head, " "), r[i])
			}
		}
	}
	for _, c := range sent {
		want = append(want, c.Type+" "+c.URL+" "+c.Title)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s shows\n%s\nwant the clicks sent: %q", strings.Join(head, " "), out, want)
	}

	// The README's DuckDB query, on the view its inspect --sql prints over
	// the files of the table's current snapshot: the same counts.
	viewCmd, query := readmeDuckDB(t)
	out, errOut, err = runIn(checkout, viewCmd)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(viewCmd, " "), err, errOut)
	}
	db := openDuck(t)
	if _, err := db.Exec(out); err != nil {
		t.Fatalf("the view %s printed: %v\n%s", strings.Join(viewCmd, " "), err, out)
	}
	rows2, err := db.Query(query)
	if err != nil {
		t.Fatalf("README's query %q: %v", query, err)
	}
	defer rows2.Close()
	var gotCounts [][]string
	for rows2.Next() {
		var typ string
		var n int64
		if err := rows2.Scan(&typ, &n); err != nil {
			t.Fatal(err)
		}
		gotCounts = append(gotCounts, []string{typ, fmt.Sprint(n)})
	}
	sort.Slice(gotCounts, func(i, j int) bool { return gotCounts[i][1] > gotCounts[j][1] })
	if !reflect.DeepEqual(gotCounts, wantCounts) {
		t.Errorf("README's DuckDB query over the view counts %v, want %v", gotCounts, wantCounts)
	}
}

// readmeDuckDB returns the README's Start here command that prints the
// DuckDB view of the clicks table (without its redirection) and the query
// its duckdb line runs on it.
func readmeDuckDB(t *testing.T) (viewCmd []string, query string) {
	t.Helper()
	viewCmd = readmeCommand(t, readmeLakeCommands(t), "bin/millrace", "lake", "inspect", ".millrace/lake", "--table", "clicks", "--sql")
	if i := slices.Index(viewCmd, ">"); i > 0 {
		viewCmd = viewCmd[:i]
	}
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^duckdb -init clicks\.sql -c "([^"]+)"$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal(`README.md: no duckdb -init clicks.sql -c "..." line`)
	}
	return viewCmd, string(m[1])
}

// TestLakeRowsOnS3 lands clicks in S3 with `partition_by: day` and reads
// them back with lake count and lake head through the S3 API: counts by
// type, a time range within a day (by the rows' time), and JSON lines.
// Not parallel: makeBucket sets the AWS credentials in the environment.
func TestLakeRowsOnS3(t *testing.T) {
	const bucket = "warehouse"
	server := startVersitygw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s3 := server.makeBucket(t, ctx, bucket)
	b := startBroker(t)
	b.createTopic(t, "clicks", 2, nil)
	// Click i has type i%3 and lies in hour i%3 after clickBase: 11
	// page_view in the first hour, 10 click in the second, 10 add_to_cart
	// in the third, all in one day's directory.
	produceClicks(t, b, "clicks", 0, 31, 3, nil)
	startSink(t, b, "sink", "lake-s3-rows", "clicks", "s3://"+bucket+"/lake",
		"--s3-endpoint", server.endpoint(), "--partition-by", "day")

	lake := []string{"--lake", "s3://" + bucket + "/lake", "--s3-endpoint", server.endpoint()}
	lakeCmd := func(args ...string) (string, string, error) {
		return runErr(time.Minute, "", millraceBin, append(append([]string{"lake"}, args...), lake...)...)
	}
	want := "type         count\npage_view       11\nadd_to_cart     10\nclick           10\n"
	var out, errOut string
	var err error
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("lake count on S3, last run: %v\n%s%s\nwant\n%s", err, out, errOut, want)
			}
		}()
		waitfor.Until(t, 90*time.Second, "lake count on S3 to count every click", func() bool {
			out, errOut, err = lakeCmd("count", "clicks", "--by", "type")
			return err == nil && out == want
		})
	}()
	// The files are in the day layout (no hr= directory).
	dayLayout := regexp.MustCompile(`^lake/clicks/dt=2024-05-01/part-[^/]+\.parquet$`)
	for obj := range s3.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "lake/clicks/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if strings.HasSuffix(obj.Key, ".parquet") && !dayLayout.MatchString(obj.Key) {
			t.Errorf("object %s is not in the day layout", obj.Key)
		}
	}

	hour2 := clickBase.Add(time.Hour)
	from, to := hour2.Format(time.RFC3339), hour2.Add(time.Hour).Format(time.RFC3339)
	if out, errOut, err = lakeCmd("count", "clicks", "--by", "type", "--from", from, "--to", to); err != nil || out != "type   count\nclick     10\n" {
		t.Errorf("lake count --from %s --to %s: %v\n%s%s", from, to, err, out, errOut)
	}
	out, errOut, err = lakeCmd("head", "clicks", "--columns", "event_id,type,ts", "-n", "3", "--json", "--from", from, "--to", to)
	if err != nil {
		t.Fatalf("lake head --json: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lake head -n 3: %d lines:\n%s", len(lines), out)
	}
	for _, line := range lines {
		var row struct {
			EventID string    `json:"event_id"`
			Type    string    `json:"type"`
			TS      time.Time `json:"ts"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("lake head --json: %q: %v", line, err)
		}
		if !strings.HasPrefix(row.EventID, "ev-") || row.Type != "click" || row.TS.Before(hour2) || !row.TS.Before(hour2.Add(time.Hour)) {
			t.Errorf("lake head --json --from %s --to %s: row %q", from, to, line)
		}
	}
}
