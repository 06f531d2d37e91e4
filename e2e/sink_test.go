package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/sinks/lake"

	"millrace/internal/waitfor"
)

// clickBase is the first hour of the produced clicks' event times.
var clickBase = time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)

// clickEvent is the JSON of click number i, with an event time in one of
// hours hours after clickBase. extra, when not empty, is added as top-level
// members (",\"name\":value...").
func clickEvent(i, hours int, extra string) (value []byte, hour string) {
	ts := clickBase.Add(time.Duration(i%hours)*time.Hour + time.Duration(i%3600)*time.Second + time.Duration(i%1000)*time.Millisecond)
	v := fmt.Sprintf(`{"event_id":"ev-%09d","type":"%s","url":"https://shop.example/p/%d","referrer":"https://search.example/","anonymous_id":"anon-%d","session_id":"s-%d","ts":"%s","received_at":"%s","ip":"203.0.113.0","user_agent":"Mozilla/5.0 (X11; Linux x86_64)","properties":{"n":%d}%s}`,
		i, [...]string{"page_view", "click", "add_to_cart"}[i%3], i%500, i%20000, i%50000,
		ts.Format(time.RFC3339Nano), ts.Add(150*time.Millisecond).Format(time.RFC3339Nano), i, extra)
	return []byte(v), ts.Format("2006-01-02 15")
}

// produceClicks produces clicks [from, to) keyed by event id and returns the
// count per "YYYY-MM-DD HH". extra, when not nil, gives each click's added
// top-level members (see clickEvent).
func produceClicks(t *testing.T, k kafka, topic string, from, to, hours int, extra func(i int) string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := kafkaClient(t, k, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	perHour := map[string]int{}
	var failed atomic.Value
	for i := from; i < to; i++ {
		var members string
		if extra != nil {
			members = extra(i)
		}
		v, h := clickEvent(i, hours, members)
		perHour[h]++
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("ev-%09d", i)), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return perHour
}

// startSink runs `millrace sink` for the click topic.
func startSink(t *testing.T, k kafka, name, group, topic, out string, extra ...string) *process {
	t.Helper()
	args := append([]string{"sink", "-b", strings.Join(k.seeds(), ","), "--group", group, "--topic", topic, "--schema", "click",
		"--out", out, "--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn"}, extra...)
	return startProcess(t, name, args...)
}

// groupProgress returns the group's committed offsets summed over the topic's
// partitions and the sum of the partitions' end offsets.
func groupProgress(t *testing.T, adm *kadm.Client, group, topic string) (committed, end int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		end += o.Offset
		if c, ok := offs.Lookup(topic, o.Partition); ok && c.At > 0 {
			committed += c.At
		}
	})
	return committed, end
}

// waitLanded waits until the group has committed every partition to its end,
// failing if any of procs exits meanwhile.
func waitLanded(t *testing.T, k kafka, group, topic string, timeout time.Duration, procs ...*process) {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, k))
	var committed, end int64
	defer reportLastSeen(t, func() string { return fmt.Sprintf("group %s committed %d of %d records", group, committed, end) })()
	waitfor.Until(t, timeout, fmt.Sprintf("group %s to commit every record of %s", group, topic), func() bool {
		committed, end = groupProgress(t, adm, group, topic)
		if end > 0 && committed == end {
			return true
		}
		for _, p := range procs {
			p.exitedEarly("the topic was landed")
		}
		return false
	})
}

// waitMidway waits until the group has committed at least n records of the
// topic, failing if it committed everything first (what the test does next
// must come midway) or timeout passes.
func waitMidway(t *testing.T, k kafka, group, topic string, n int64, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, k))
	waitfor.Until(t, timeout, fmt.Sprintf("%d records landed", n), func() bool {
		committed, end := groupProgress(t, adm, group, topic)
		if committed >= end {
			t.Fatalf("everything landed (%d records) before the test's midway step", committed)
		}
		return committed >= n
	})
}

// openDuck opens an in-memory DuckDB.
func openDuck(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkLake asserts with DuckDB that the Parquet files under glob hold every
// produced event exactly once, in the hour directory of its event time.
func checkLake(t *testing.T, glob string, want map[string]int) {
	t.Helper()
	total := 0
	for _, n := range want {
		total += n
	}
	db := openDuck(t)
	src := fmt.Sprintf("read_parquet('%s', hive_partitioning=true, union_by_name=true)", glob)
	var count, distinct, misplaced int64
	row := db.QueryRow(`SELECT count(*), count(DISTINCT event_id),
		count(*) FILTER (WHERE CAST(dt AS VARCHAR) || ' ' || lpad(CAST(hr AS VARCHAR), 2, '0') <>
			strftime(make_timestamp(epoch_us(ts)), '%Y-%m-%d %H')) FROM ` + src)
	if err := row.Scan(&count, &distinct, &misplaced); err != nil {
		t.Fatal(err)
	}
	if count != int64(total) || distinct != int64(total) || misplaced != 0 {
		t.Errorf("lake: count(*) = %d, count(DISTINCT event_id) = %d, rows in the wrong hour = %d; want %d, %d, 0",
			count, distinct, misplaced, total, total)
	}
	rows, err := db.Query(`SELECT CAST(dt AS VARCHAR) || ' ' || lpad(CAST(hr AS VARCHAR), 2, '0') AS h, count(*) FROM ` + src + ` GROUP BY h`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var h string
		var n int
		if err := rows.Scan(&h, &n); err != nil {
			t.Fatal(err)
		}
		got[h] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sortedCounts(got)) != fmt.Sprint(sortedCounts(want)) {
		t.Errorf("per-hour counts:\n got %v\nwant %v", sortedCounts(got), sortedCounts(want))
	}
}

func sortedCounts(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}

// leftovers lists temporary files under root.
func leftovers(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestSinkFilesystemExactlyOnce: a million clicks on six partitions, three
// sink workers, one killed with SIGKILL midway and restarted; DuckDB finds
// every event exactly once, in the right hour.
func TestSinkFilesystemExactlyOnce(t *testing.T) {
	const (
		total  = 1_000_000
		topic  = "clicks"
		group  = "lake"
		hours  = 5
		killAt = total / 3
	)
	b := startBroker(t)
	b.createTopic(t, topic, 6, nil)
	want := produceClicks(t, b, topic, 0, total, hours, nil)
	root := t.TempDir()
	out := "file://" + root
	var sinks []*process
	for i := 0; i < 3; i++ {
		sinks = append(sinks, startSink(t, b, fmt.Sprintf("sink-%d", i), group, topic, out, "--roll-rows", "40000"))
	}

	waitMidway(t, b, group, topic, killAt, 2*time.Minute)
	sinks[1].kill()
	sinks[1].restartAfter(200 * time.Millisecond)

	waitLanded(t, b, group, topic, 3*time.Minute, sinks...)
	for _, s := range sinks {
		if !s.stop(syscall.SIGTERM, 30*time.Second) || s.exitCode() != 0 {
			t.Errorf("%s: SIGTERM did not end it with status 0 (status %d)", s.name, s.exitCode())
		}
	}
	checkLake(t, root+"/clicks/**/*.parquet", want)
	if l := leftovers(t, root); len(l) > 0 {
		t.Errorf("temporary files left behind: %v", l)
	}
}

// TestSinkCrashBetweenPublishes: one window holds events of two hours; the
// worker dies right after publishing the first of its two files, before the
// commit. After a restart every event is in the lake exactly once.
func TestSinkCrashBetweenPublishes(t *testing.T) {
	const (
		total = 4000
		topic = "clicks"
		group = "lake"
	)
	b := startBroker(t)
	b.createTopic(t, topic, 1, nil)
	want := produceClicks(t, b, topic, 0, total, 2, nil)
	root := t.TempDir()
	out := "file://" + root

	crasher := startSink(t, b, "sink-crash", group, topic, out, "--crash-after-publish", "1")
	select {
	case <-crasher.done:
	case <-time.After(time.Minute):
		t.Fatal("the sink did not crash after its first publish")
	}
	if code := crasher.exitCode(); code != 3 {
		t.Fatalf("crashed sink exit status %d, want 3:\n%s", code, crasher.log())
	}
	files, _ := filepath.Glob(root + "/clicks/*/*/*.parquet")
	if len(files) != 1 {
		t.Fatalf("after the crash: %d published files %v, want 1 (one of the window's two)", len(files), files)
	}
	if committed, _ := groupProgress(t, b.admin(t), group, topic); committed != 0 {
		t.Fatalf("committed %d before the window was fully published", committed)
	}

	sink := startSink(t, b, "sink", group, topic, out)
	waitLanded(t, b, group, topic, time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("sink: status %d after SIGTERM", sink.exitCode())
	}
	checkLake(t, root+"/clicks/**/*.parquet", want)
	files, _ = filepath.Glob(root + "/clicks/*/*/*.parquet")
	if len(files) != 2 {
		t.Errorf("files after the restart: %v, want the two of the window", files)
	}
}

// TestSinkReplacesAStoppedWorker: a regular file where the topic's directory
// must go makes landing fail, which stops the worker; `millrace sink` keeps
// running and starts new workers until the store works again, and then every
// event lands exactly once.
func TestSinkReplacesAStoppedWorker(t *testing.T) {
	const (
		total = 4000
		topic = "clicks"
		group = "lake"
	)
	b := startBroker(t)
	b.createTopic(t, topic, 2, nil)
	want := produceClicks(t, b, topic, 0, total, 2, nil)
	root := t.TempDir()
	blocker := filepath.Join(root, topic)
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	sink := startSink(t, b, "sink", group, topic, "file://"+root)

	// Twice: the second worker, started in place of the first, stops too.
	sink.waitLog("sink worker stopped; starting a new one", 2, time.Minute)
	// The sink re-executed itself to return freed memory lazily (see
	// internal/lazyfree): the running image has the setting added to
	// GODEBUG, unless the environment chose madvdontneed already.
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", sink.pid()))
	if err != nil {
		t.Fatal(err)
	}
	debug := os.Getenv("GODEBUG")
	if !strings.Contains(debug, "madvdontneed=") {
		debug = strings.TrimPrefix(debug+",madvdontneed=0", ",")
	}
	if !slices.Contains(strings.Split(string(environ), "\x00"), "GODEBUG="+debug) {
		t.Errorf("the sink's environment has no GODEBUG=%s: %q", debug, environ)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	waitLanded(t, b, group, topic, 2*time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("sink: status %d after SIGTERM", sink.exitCode())
	}
	checkLake(t, root+"/clicks/**/*.parquet", want)
}

// TestSinkDeadLetters: records that do not fit the click schema go to
// `clicks.dlq` with the reason while the clicks around them land, among them
// records whose envelope would outgrow the producer's limit (900 KiB of
// binary, base64 in the envelope; 600 KiB of control characters, escaped six
// bytes each): their dead letters carry the first 128 KiB, and the sink
// neither stops nor loses the clicks after them.
func TestSinkDeadLetters(t *testing.T) {
	const (
		topic = "clicks"
		group = "lake"
	)
	b := startBroker(t)
	b.createTopic(t, topic, 1, nil)
	want := produceClicks(t, b, topic, 0, 1000, 2, nil)
	bad := [][]byte{
		[]byte("not json"),
		[]byte(`{"event_id":"no-type","ts":"2024-05-01T08:00:00Z"}`),
		bytes.Repeat([]byte{0xff}, 900<<10),
		bytes.Repeat([]byte{0x01}, 600<<10),
	}
	cl := b.client(t, kgo.DefaultProduceTopic(topic))
	for i, v := range bad {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint("bad-", i)), Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce bad record %d: %v", i, err)
		}
	}
	for h, n := range produceClicks(t, b, topic, 1000, 2000, 2, nil) {
		want[h] += n
	}
	root := t.TempDir()
	sink := startSink(t, b, "sink", group, topic, "file://"+root)
	waitLanded(t, b, group, topic, time.Minute, sink)
	if strings.Contains(sink.log(), "sink worker stopped") {
		t.Errorf("the sink's worker stopped:\n%s", tail([]byte(sink.log()), 4096))
	}
	checkLake(t, root+"/clicks/**/*.parquet", want)

	letters := map[int64]lake.DeadLetter{}
	for _, v := range consumeAll(t, b, topic+".dlq", len(bad), 10*time.Second) {
		var d lake.DeadLetter
		if err := json.Unmarshal(v, &d); err != nil {
			t.Fatalf("dead letter %.200q: %v", v, err)
		}
		letters[d.Offset] = d
	}
	for i, v := range bad {
		d, ok := letters[int64(1000+i)]
		if !ok {
			t.Errorf("no dead letter for offset %d (have %d letters)", 1000+i, len(letters))
			continue
		}
		kept := []byte(nil)
		if d.Value != nil {
			kept = []byte(*d.Value)
		} else if kept, _ = base64.StdEncoding.DecodeString(d.ValueBase64); kept == nil {
			t.Errorf("offset %d: no value in the dead letter", d.Offset)
		}
		cut := min(len(v), 128<<10)
		if d.Reason == "" || d.ValueBytes != len(v) || d.Truncated != (cut < len(v)) || !bytes.Equal(kept, v[:cut]) {
			t.Errorf("offset %d: reason %q, value_bytes %d, truncated %v, %d bytes kept; want a reason, %d, %v, the first %d",
				d.Offset, d.Reason, d.ValueBytes, d.Truncated, len(kept), len(v), cut < len(v), cut)
		}
	}
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("sink: status %d after SIGTERM", sink.exitCode())
	}
}

// TestSinkBrokerKilled: the broker is killed with SIGKILL while the sink is
// landing and comes back 3 s later; the sink rides it out (its client
// reconnects, or a worker whose commit failed is replaced) and every event
// lands exactly once.
func TestSinkBrokerKilled(t *testing.T) {
	const (
		total = 60_000
		topic = "clicks"
		group = "lake"
	)
	b := startBroker(t)
	b.createTopic(t, topic, 3, nil)
	want := produceClicks(t, b, topic, 0, total, 3, nil)
	root := t.TempDir()
	sink := startSink(t, b, "sink", group, topic, "file://"+root, "--roll-rows", "2000")
	waitMidway(t, b, group, topic, total/4, time.Minute)
	b.stop(syscall.SIGKILL, 15*time.Second)
	// The broker stays down for 3 s, a fault held while the sink retries.
	time.Sleep(3 * time.Second)
	b.start()
	b.waitReady()
	waitLanded(t, b, group, topic, 2*time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("sink: status %d after SIGTERM", sink.exitCode())
	}
	checkLake(t, root+"/clicks/**/*.parquet", want)
	if left := leftovers(t, root); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}
