package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/intake"
	"millrace/internal/waitfor"
	"millrace/pipeline/appliance"
)

// maxUpComponents bounds the records an idle `millrace up` may write to
// _millrace.metrics per interval: one per component (runtime, broker, log,
// ship, tail, beacon, lake, audit, http, ...), far below its few hundred
// series.
const maxUpComponents = 12

// An idle `millrace up` writes one record per component and interval to
// _millrace.metrics, not one per series: over several publications at a
// short interval, no publication has more records than components, and
// each carries many samples.
func TestUpIdleSelfMetricsAreBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const interval = 500 * time.Millisecond
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		cfg.Demo.WriteLog = "" // idle: nothing writes to the tailed files
		cfg.Tail[0].Paths = []string{filepath.Join(dir, "quiet", "*.log")}
		cfg.OpsMetrics.Interval = interval
	})
	up := startProcess(t, "up", "up", "--config", cfgPath)
	waitHTTP(t, up, "http://"+webAddr+"/healthz")

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumeTopics("_millrace.metrics"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Records per publication (the batches' ts), and their samples.
	type publication struct {
		records, samples int
		components       []string
	}
	pubs := map[time.Time]*publication{}
	const want = 8
	for len(pubs) < want+1 && ctx.Err() == nil { // +1: the newest may still be arriving
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var b intake.Batch
			if err := json.Unmarshal(r.Value, &b); err != nil || b.Component == "" {
				t.Fatalf("a record of _millrace.metrics is no batch: %v: %.200s", err, r.Value)
			}
			p := pubs[b.TS]
			if p == nil {
				p = &publication{}
				pubs[b.TS] = p
			}
			p.records++
			p.samples += len(b.Samples)
			p.components = append(p.components, b.Component)
		})
	}
	if len(pubs) < want+1 {
		t.Fatalf("%d publications within 60 s at a %v interval, want %d", len(pubs), interval, want+1)
	}
	times := slices.SortedFunc(func(yield func(time.Time) bool) {
		for ts := range pubs {
			if !yield(ts) {
				return
			}
		}
	}, func(a, b time.Time) int { return a.Compare(b) })
	total := 0
	for _, ts := range times[:want] {
		p := pubs[ts]
		total += p.records
		slices.Sort(p.components)
		if p.records > maxUpComponents || len(slices.Compact(slices.Clone(p.components))) != p.records {
			t.Fatalf("publication at %v: %d records for components %v, want one per component and at most %d", ts, p.records, p.components, maxUpComponents)
		}
		if p.samples < 10*p.records {
			t.Fatalf("publication at %v: %d samples in %d records: not the appliance's metrics", ts, p.samples, p.records)
		}
	}
	first := pubs[times[0]]
	t.Logf("%d publications: %d records, %d records and %d samples each; components %v", want, total, first.records, first.samples, first.components)
	if total > want*maxUpComponents {
		t.Fatalf("%d records in %d intervals, want at most %d", total, want, want*maxUpComponents)
	}
}

// A standalone `millrace tail` and `millrace sink` publish their own metrics
// as the appliance's parts do: `millrace top` lists them as components
// under their own source, and `top --metrics` shows their latest values.
func TestStandaloneTailAndSinkShowInTop(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "logs", 1, nil)
	dir := t.TempDir()
	logDir := filepath.Join(dir, "app")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for i := range 7 {
		fmt.Fprintf(&lines, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(logDir, "app.log"), []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "tail", "tail", "-b", b.addr, "--topic", "logs", "--data", filepath.Join(dir, "shipper-a"),
		"--ops-metrics-interval", "500ms", filepath.Join(logDir, "*.log"))
	startProcess(t, "sink", "sink", "-b", b.addr, "--group", "lake-logs", "--topic", "logs", "--schema", "log",
		"--out", "file://"+filepath.Join(dir, "lake"), "--idle-timeout", "1s", "--ops-metrics-interval", "500ms")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	tailSource, sinkSource := host+":tail:shipper-a", host+":sink:lake-logs"

	var out string
	defer reportLastSeen(t, func() string { return "the last millrace top --once:\n" + out })()
	waitfor.Until(t, 60*time.Second, fmt.Sprintf("top to list the standalone tail (%s) and sink (%s) with 7 lines and 7 rows", tailSource, sinkSource), func() bool {
		out = run(t, 60*time.Second, "", millraceBin, "top", "--once", "-b", b.addr, "--interval", "500ms")
		// COMPONENT KIND SOURCE RATE TOTAL
		var tailTotal, sinkTotal string
		for _, row := range rowsAfter(out, "COMPONENT") {
			switch {
			case len(row) >= 5 && row[0] == "tail:default" && row[1] == "agent" && row[2] == tailSource:
				tailTotal = row[len(row)-1]
			case len(row) >= 5 && row[0] == "lake" && row[1] == "sink" && row[2] == sinkSource:
				sinkTotal = row[len(row)-1]
			}
		}
		return tailTotal == "7" && sinkTotal == "7"
	})
	t.Logf("millrace top --once:\n%s", out)

	out = run(t, 60*time.Second, "", millraceBin, "top", "--once", "--metrics", "--match", "lines_read", "-b", b.addr, "--interval", "500ms")
	t.Logf("millrace top --once --metrics --match lines_read:\n%s", out)
	// METRIC LABELS SOURCE KIND VALUE AGE
	rows := rowsAfter(out, "METRIC")
	if len(rows) != 1 || len(rows[0]) != 6 || rows[0][0] != "millrace_tail_lines_read_total" || rows[0][1] != "-" ||
		rows[0][2] != tailSource || rows[0][3] != "counter" || rows[0][4] != "7" {
		t.Fatalf("top --metrics rows %q, want the tail's lines read (7) alone", rows)
	}
}
