package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// monitoredCluster is a broker with topic "events" (3 partitions, 20
// records each) and group "audit", which committed offset 5 on every
// partition and so lags 45 records.
func monitoredCluster(t *testing.T) (*broker, *kgo.Client) {
	t.Helper()
	b := startBroker(t)
	b.createTopic(t, "events", 3, nil)
	cl := b.client(t, kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 60 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte("event " + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offsets := kadm.Offsets{}
	for p := range int32(3) {
		offsets.Add(kadm.Offset{Topic: "events", Partition: p, At: 5, LeaderEpoch: -1})
	}
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, "audit", offsets); err != nil {
		t.Fatalf("committing for audit: %v", err)
	}
	return b, cl
}

// keepProducing produces to events until the returned stop is called, and
// stop reports how many records it produced.
func keepProducing(t *testing.T, cl *kgo.Client) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	n := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte("more")}).FirstErr(); err == nil {
				n++
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int {
		cancel()
		wg.Wait()
		return n
	}
}

// rowsAfter returns the whitespace-split rows of the table whose header
// line starts with header, up to the blank line that ends it.
func rowsAfter(out, header string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, header):
			in = true
		case in && strings.TrimSpace(line) == "":
			return rows
		case in:
			rows = append(rows, strings.Fields(line))
		}
	}
	return rows
}

// `millrace top --once` prints the topic with its partition count and a
// produce rate taken while records arrive, and the group's lag.
func TestTopOnceShowsTopicsRatesAndLag(t *testing.T) {
	b, cl := monitoredCluster(t)
	stop := keepProducing(t, cl)
	out := run(t, 60*time.Second, "", millraceBin, "top", "--once", "-b", b.addr, "--interval", "1s")
	produced := stop()
	if strings.Contains(out, "\x1b") {
		t.Fatalf("--once wrote terminal control codes:\n%q", out)
	}
	t.Logf("millrace top --once:\n%s", out)

	var events []string
	for _, row := range rowsAfter(out, "TOPIC") {
		if row[0] == "events" {
			events = row
		}
	}
	// BROKER ADDRESS RACK DATA FREE: the broker's logs hold the records.
	brokers := rowsAfter(out, "BROKER")
	size := regexp.MustCompile(`^[1-9][0-9.]*([KMGTPE]i)?B$`)
	if len(brokers) == 0 || len(brokers[0]) != 5 || !size.MatchString(brokers[0][3]) || !strings.Contains(brokers[0][4], "/") {
		t.Fatalf("broker rows %q, want DATA above 0 bytes and FREE as usable/total:\n%s", brokers, out)
	}
	// TOPIC PARTITIONS RF RECORDS PRODUCE/S UNDER-REPL OFFLINE
	if len(events) != 7 || events[1] != "3" || events[2] != "1" || events[5] != "0" || events[6] != "0" {
		t.Fatalf("events row %q in:\n%s", events, out)
	}
	if rate, err := strconv.ParseFloat(events[4], 64); err != nil || rate <= 0 {
		t.Fatalf("produce rate %q while producing, want > 0:\n%s", events[4], out)
	}

	var audit []string
	for _, row := range rowsAfter(out, "GROUP") {
		if row[0] == "audit" && len(row) == 6 && row[3] == "events" {
			audit = row
		}
	}
	if audit == nil {
		t.Fatalf("no row for group audit on events:\n%s", out)
	}
	// GROUP STATE MEMBERS TOPIC LAG CONSUME/S: the lag is 45 plus what was
	// produced before top read the cluster.
	lag, err := strconv.Atoi(audit[4])
	if err != nil || lag < 45 || lag > 45+produced {
		t.Fatalf("audit lag %q, want between 45 and %d:\n%s", audit[4], 45+produced, out)
	}
	if audit[2] != "0" {
		t.Fatalf("audit members %q, want 0", audit[2])
	}
}

// The web console served by `millrace console` shows the topic and the
// group's lag in a real Chromium, and the components read from the ops
// metrics topic; a screenshot is kept as a test artifact.
func TestConsoleInChromium(t *testing.T) {
	b, cl := monitoredCluster(t)
	b.createTopic(t, "_millrace.metrics", 1, nil)
	now := time.Now().UTC()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i, rows := range []int{100, 400} {
		sample := fmt.Sprintf(`{"name":"millrace_lake_rows_total","kind":"counter","value":%d,"labels":{"sink":"clicks","topic":"clicks"},"ts":%q,"source":"e2e:millrace-up"}`,
			rows, now.Add(time.Duration(i-1)*10*time.Second).Format(time.RFC3339Nano))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "_millrace.metrics", Value: []byte(sample)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Records keep arriving so the produce chart has a rising line.
	stop := keepProducing(t, cl)
	defer stop()
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	console := startProcess(t, "console", "console", "-b", b.addr, "--listen", listen, "--interval", "1s")
	url := "http://" + listen + "/console"
	waitHTTP(t, console, url)

	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(url)); err != nil {
		t.Fatalf("loading the console: %v", err)
	}
	var topics, groups, components, brokers string
	defer reportLastSeen(t, func() string {
		return fmt.Sprintf("topics:\n%s\ngroups:\n%s\ncomponents:\n%s\nbrokers:\n%s", topics, groups, components, brokers)
	})()
	waitfor.Until(t, 90*time.Second, "the console to show the topic, the lag, the sink and the broker's disk", func() bool {
		step, cancelStep := context.WithTimeout(browser, 10*time.Second)
		text := func(id string) string {
			s, err := chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector("#`+id+` tbody").innerText`))
			if err != nil {
				t.Fatalf("reading #%s: %v", id, err)
			}
			return s
		}
		topics, groups, components = text("topics"), text("groups"), text("components")
		brokers = text("brokers")
		cancelStep()
		return hasCells(topics, "events", "3") && hasCells(groups, "audit", "events") && lagAtLeast(groups, "audit", 45) && hasCells(components, "clicks", "sink", "30.0 rows/s") &&
			strings.Contains(brokers, "iB of ")
	})
	// The charts draw once two readings exist: a line per topic.
	step, cancelStep := context.WithTimeout(browser, 30*time.Second)
	defer cancelStep()
	if err := chromedp.Do(step, chromedp.WaitVisible(chromedp.CSS(`#chart-produce path.series`))); err != nil {
		t.Fatalf("no produce chart line: %v", err)
	}
	png, err := chromedp.Run(step, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("MILLRACE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "console.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshot: %s (%d bytes)", path, len(png))
}

// lagAtLeast reports a groups-table row of group whose lag (fifth cell) is
// at least min.
func lagAtLeast(text, group string, min int) bool {
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Split(line, "\t")
		if len(cells) >= 5 && strings.TrimSpace(cells[0]) == group {
			lag, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(cells[4]), ",", ""))
			if err == nil && lag >= min {
				return true
			}
		}
	}
	return false
}

// hasCells reports a row of tab-separated innerText holding every cell.
func hasCells(text string, cells ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		have := map[string]bool{}
		for _, c := range strings.Split(line, "\t") {
			have[strings.TrimSpace(c)] = true
		}
		all := true
		for _, c := range cells {
			all = all && have[c]
		}
		if all {
			return true
		}
	}
	return false
}
