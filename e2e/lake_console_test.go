package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"millrace/audit"
)

// TestLakeConsoleInChromium: `millrace sink --format iceberg` lands clicks
// of two hours in a table, a file nobody committed is put beside its files,
// and the console's Lake tab (Chromium) shows the table: its rows, a
// snapshot with the group's offsets, one partition per hour with its rows,
// and the committed files only.
func TestLakeConsoleInChromium(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "clicks", 2, nil)
	b.createTopic(t, "clicks.dlq", 1, nil)
	b.createTopic(t, audit.Topic, 1, nil)
	perHour := produceClicks(t, b, "clicks", 0, 20, 2, nil) // "2024-05-01 08" and "09"
	root := t.TempDir()
	sink := startSink(t, b, "sink", "lake-console", "clicks", "file://"+root, "--format", "iceberg")
	waitLanded(t, b, "lake-console", "clicks", time.Minute, sink)

	// A stray file in the table's data directory, as a fenced worker
	// leaves one: no snapshot lists it, so the page must not.
	data := filepath.Join(root, "millrace.db", "clicks", "data", "dt=2024-05-01", "hr=08")
	committed, err := filepath.Glob(filepath.Join(data, "*.parquet"))
	if err != nil || len(committed) == 0 {
		t.Fatalf("no files in %s: %v", data, err)
	}
	raw, err := os.ReadFile(committed[0])
	if err != nil {
		t.Fatal(err)
	}
	const stray = "part-1-00000000000000000900-00000000000000000999.parquet"
	if err := os.WriteFile(filepath.Join(data, stray), raw, 0o644); err != nil {
		t.Fatal(err)
	}

	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	console := startProcess(t, "console", "console", "-b", b.addr, "--listen", listen, "--lake", "file://"+root)
	base := "http://" + listen
	waitHTTP(t, console, base+"/console")

	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(base+"/console#lake")); err != nil {
		t.Fatalf("loading the console: %v", err)
	}
	step, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	table := `.lake-table[data-table="millrace.clicks"]`
	if err := chromedp.Do(step, chromedp.WaitVisible(chromedp.CSS(table))); err != nil {
		t.Fatalf("no clicks table on the lake tab: %v", err)
	}
	text, err := chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector('`+table+`').innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"20 rows", "lake-console.clicks = 0:", "(current)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table's box lacks %q:\n%s", want, text)
		}
	}
	for hour, n := range perHour {
		partition := "ts_hour=" + strings.Replace(hour, " ", "-", 1)
		if !hasCells(text, partition, strconv.Itoa(n)) {
			t.Errorf("no partition %s with %d rows:\n%s", partition, n, text)
		}
	}
	if strings.Contains(text, stray) || !strings.Contains(text, filepath.Base(committed[0])) {
		t.Errorf("the page lists the stray file, or not the committed one:\n%s", text)
	}
}
