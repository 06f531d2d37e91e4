package lake

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/sinks/parquet"
	"millrace/sinks/parquet/parquettest"
	"millrace/store"
)

// fakeCommitter records commits; fail makes the next commits fail.
type fakeCommitter struct {
	mu      sync.Mutex
	offsets map[topicPartition]int64
	log     []string
	fail    error
}

func (c *fakeCommitter) commit(_ context.Context, wc windowCommit) error {
	tp, offset := wc.tp, wc.next
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	if c.offsets == nil {
		c.offsets = map[topicPartition]int64{}
	}
	c.offsets[tp] = offset
	c.log = append(c.log, fmt.Sprintf("%s/%d@%d", tp.topic, tp.partition, offset))
	return nil
}

type fakeDeadLetters struct {
	sent []DeadLetter
}

func (d *fakeDeadLetters) send(letter DeadLetter, _ []byte) {
	d.sent = append(d.sent, letter)
}
func (d *fakeDeadLetters) flush(context.Context) error { return nil }

// testWorker is a worker over a file store with fake Kafka sides.
func testWorker(t testing.TB, root string, mod func(*Config)) (*Worker, *fakeCommitter, *fakeDeadLetters) {
	t.Helper()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
		RollRows: 1000, IdleTimeout: time.Hour, Compression: "snappy"}
	if mod != nil {
		mod(&cfg)
	}
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, d := &fakeCommitter{}, &fakeDeadLetters{}
	w.commit, w.dlq = c, d
	return w, c, d
}

var base = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// click returns record offset of partition 0 with an event in hour h after base.
func click(offset int64, h int) *kgo.Record {
	ts := base.Add(time.Duration(h)*time.Hour + time.Duration(offset)*time.Millisecond)
	v := fmt.Sprintf(`{"event_id":"e%d","type":"click","ts":"%s"}`, offset, ts.Format(time.RFC3339Nano))
	return &kgo.Record{Topic: "clicks", Partition: 0, Offset: offset, Value: []byte(v),
		Timestamp: base.Add(time.Duration(offset) * time.Second)}
}

// feed processes records from offset from, as the group would deliver them
// after a commit at from, stopping at the first error.
func feed(w *Worker, recs []*kgo.Record, from int64) error {
	w.landing.Lock()
	defer w.landing.Unlock()
	p := w.assign(topicPartition{"clicks", 0})
	for _, r := range recs[from:] {
		if err := w.processRecord(context.Background(), p, r); err != nil {
			return err
		}
	}
	return nil
}

func flushAll(w *Worker) error {
	w.landing.Lock()
	defer w.landing.Unlock()
	if err := w.runActions(context.Background(), w.core.shutdown(), nil); err != nil {
		return err
	}
	return w.settle() // as Shutdown does: the last window's commit ends
}

// landed reads every row back with xitongsys/parquet-go and returns the
// event ids by file (relative name).
func landed(t *testing.T, root string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(root + "/clicks/dt=*/hr=*/*.parquet")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range files {
		rows, err := parquet.ReadRows[parquettest.ClickRow](f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, r := range rows {
			out[rel] = append(out[rel], *r.EventID)
		}
	}
	return out
}

func TestWindowNamesAndCommits(t *testing.T) {
	root := t.TempDir()
	w, c, _ := testWorker(t, root, func(c *Config) { c.RollRows = 4 })
	// Offsets 0..5: hours 0,1,0,1,1,0. Window 1 = 0..3, window 2 = 4..5.
	hours := []int{0, 1, 0, 1, 1, 0}
	var recs []*kgo.Record
	for i, h := range hours {
		recs = append(recs, click(int64(i), h))
	}
	if err := feed(w, recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	got := landed(t, root)
	want := map[string][]string{
		"clicks/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000002.parquet": {"e0", "e2"},
		"clicks/dt=2024-05-01/hr=11/part-0-00000000000000000001-00000000000000000003.parquet": {"e1", "e3"},
		"clicks/dt=2024-05-01/hr=11/part-0-00000000000000000004-00000000000000000004.parquet": {"e4"},
		"clicks/dt=2024-05-01/hr=10/part-0-00000000000000000005-00000000000000000005.parquet": {"e5"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files:\n got %v\nwant %v", got, want)
	}
	if strings.Join(c.log, " ") != "clicks/0@4 clicks/0@6" {
		t.Errorf("commits: %v", c.log)
	}
	info, err := parquet.Inspect(filepath.Join(root, "clicks/dt=2024-05-01/hr=11/part-0-00000000000000000001-00000000000000000003.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Metadata[parquet.MetaFirstOffset] != "1" || info.Metadata[parquet.MetaLastOffset] != "3" {
		t.Errorf("source metadata: %v", info.Metadata)
	}
}

// TestRewriteAfterLostCommit: a window's files are published but its commit
// is lost (crash); the next owner starts at the committed offset with other
// cut points, and the lake still holds every record exactly once.
func TestRewriteAfterLostCommit(t *testing.T) {
	var recs []*kgo.Record
	for i := 0; i < 200; i++ {
		recs = append(recs, click(int64(i), (i/7)%3))
	}
	for _, rollRows := range []int64{13, 50, 120, 1000} {
		t.Run(fmt.Sprint(rollRows), func(t *testing.T) {
			root := t.TempDir()
			// First owner: windows of 60 rows; the commit of the second
			// window is lost after its files were published.
			w1, c1, _ := testWorker(t, root, func(c *Config) { c.RollRows = 60 })
			w1.cfg.AfterPublish = func(string) {
				if len(c1.log) == 1 {
					c1.fail = errors.New("crash")
				}
			}
			if err := feed(w1, recs, 0); err == nil {
				t.Fatal("the lost commit was not reported")
			}
			committed := c1.offsets[topicPartition{"clicks", 0}]
			if committed != 60 {
				t.Fatalf("committed %d, want 60", committed)
			}
			// Next owner, from the committed offset, with other cut points.
			w2, _, _ := testWorker(t, root, func(c *Config) { c.RollRows = rollRows })
			if err := feed(w2, recs, committed); err != nil {
				t.Fatal(err)
			}
			if err := flushAll(w2); err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, ids := range landed(t, root) {
				for _, id := range ids {
					seen[id]++
				}
			}
			if len(seen) != len(recs) {
				t.Errorf("%d distinct events landed, want %d", len(seen), len(recs))
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("%s landed %d times", id, n)
				}
			}
		})
	}
}

func TestDeadLettersAndRollAge(t *testing.T) {
	root := t.TempDir()
	w, c, d := testWorker(t, root, func(c *Config) { c.RollAge = 10 * time.Second })
	recs := []*kgo.Record{click(0, 0), click(1, 0), click(2, 0)}
	recs[1].Value = []byte(`{"type":42}`)
	// Offset 3's record time is 11s after the window's first: it starts a new window.
	late := click(3, 0)
	late.Timestamp = base.Add(11 * time.Second)
	recs = append(recs, late, &kgo.Record{Topic: "clicks", Offset: 4, Timestamp: late.Timestamp})
	if err := feed(w, recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.log, " ") != "clicks/0@3 clicks/0@5" {
		t.Errorf("commits: %v", c.log)
	}
	if len(d.sent) != 2 || d.sent[0].Offset != 1 || !strings.Contains(d.sent[0].Reason, "type") ||
		d.sent[0].Value == nil || *d.sent[0].Value != `{"type":42}` || d.sent[1].Reason != "empty record value" {
		t.Errorf("dead letters: %+v", d.sent)
	}
	if n := len(landed(t, root)); n != 2 {
		t.Errorf("%d files, want 2", n)
	}
}

// A dead letter carries at most maxDeadLetterValue bytes of the value, so
// that its envelope fits the producer's and the broker's limits: text is cut
// at a character boundary, other bytes are cut and base64-encoded.
func TestDeadLetterBounds(t *testing.T) {
	tp := topicPartition{"clicks", 0}
	euro := strings.Repeat("€", maxDeadLetterValue/3+10) // 3 bytes each; the limit falls inside one
	binary := bytes.Repeat([]byte{0xff}, 900<<10)
	for _, c := range []struct {
		name  string
		value []byte
		cut   int // bytes of the value kept
	}{
		{"short", []byte(`{"type":42}`), 11},
		{"long text", []byte(euro), maxDeadLetterValue - maxDeadLetterValue%3},
		{"long binary", binary, maxDeadLetterValue},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &kgo.Record{Offset: 7, Key: bytes.Repeat([]byte("k"), len(c.value)), Value: c.value}
			d := newDeadLetter(tp, r, "bad")
			if d.ValueBytes != len(c.value) || d.Truncated != (c.cut < len(c.value)) {
				t.Errorf("value_bytes %d, truncated %v; want %d, %v", d.ValueBytes, d.Truncated, len(c.value), c.cut < len(c.value))
			}
			kept := []byte(nil)
			if d.Value != nil {
				kept = []byte(*d.Value)
			} else if b, err := base64.StdEncoding.DecodeString(d.ValueBase64); err == nil {
				kept = b
			}
			if !bytes.Equal(kept, c.value[:c.cut]) {
				t.Errorf("kept %d bytes (text %v), want the first %d", len(kept), d.Value != nil, c.cut)
			}
			if utf8.Valid(c.value) != (d.Value != nil) {
				t.Errorf("text value as base64 or binary as text")
			}
			env, err := json.Marshal(d)
			if err != nil || len(env)+len(deadLetterKey(r)) > 1_000_000 {
				t.Errorf("envelope of %d bytes and a key of %d (%v): over the producer's limit", len(env), len(deadLetterKey(r)), err)
			}
		})
	}
}

func TestOpenFileCapEndsWindow(t *testing.T) {
	root := t.TempDir()
	w, c, _ := testWorker(t, root, func(c *Config) { c.MaxOpenFiles = 2 })
	recs := []*kgo.Record{click(0, 0), click(1, 1), click(2, 2), click(3, 0)}
	if err := feed(w, recs, 0); err != nil {
		t.Fatal(err)
	}
	if w.core.openFiles > 2 {
		t.Errorf("%d open files, cap 2", w.core.openFiles)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.log, " ") != "clicks/0@2 clicks/0@4" {
		t.Errorf("commits: %v", c.log)
	}
	names := make([]string, 0)
	for n := range landed(t, root) {
		names = append(names, filepath.Base(n))
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[part-0-00000000000000000000-00000000000000000000.parquet part-0-00000000000000000001-00000000000000000001.parquet part-0-00000000000000000002-00000000000000000002.parquet part-0-00000000000000000003-00000000000000000003.parquet]" {
		t.Errorf("files: %v", names)
	}
}

func TestFailedPublishDiscardsAndDoesNotCommit(t *testing.T) {
	root := t.TempDir()
	w, c, _ := testWorker(t, root, nil)
	c.fail = errors.New("coordinator gone")
	if err := feed(w, []*kgo.Record{click(0, 0), click(1, 1)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err == nil {
		t.Fatal("failed commit not reported")
	}
	if w.core.openFiles != 0 {
		t.Errorf("%d files still open", w.core.openFiles)
	}
	matches, _ := filepath.Glob(root + "/clicks/*/*/.tmp-*")
	if len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

type fakeProgress struct{ pos map[string]time.Time }

func (f *fakeProgress) positions(context.Context, []string, time.Time) (map[string]time.Time, error) {
	return f.pos, nil
}

func TestSuccessMarkers(t *testing.T) {
	root := t.TempDir()
	w, _, _ := testWorker(t, root, func(c *Config) { c.SuccessGrace = 5 * time.Minute; c.SuccessInterval = time.Nanosecond })
	if err := feed(w, []*kgo.Record{click(0, 0), click(1, 1)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	// Past hour 10 plus the grace, not past hour 11.
	w.progress = &fakeProgress{map[string]time.Time{"clicks": base.Add(65 * time.Minute)}}
	w.maybeWriteMarkers(context.Background())
	got, _ := filepath.Glob(root + "/clicks/*/*/_SUCCESS")
	if len(got) != 1 || !strings.Contains(got[0], "hr=10") {
		t.Errorf("markers: %v", got)
	}
}

// TestSuccessMarkersAfterRestart: a worker lands hours 10 and 11 and stops
// before either marker is due; the worker that is assigned the partition next
// lands nothing more in those hours, and still writes both markers when they
// come due.
func TestSuccessMarkersAfterRestart(t *testing.T) {
	root := t.TempDir()
	config := func(c *Config) { c.SuccessGrace = 5 * time.Minute; c.SuccessInterval = time.Nanosecond }
	first, _, _ := testWorker(t, root, config)
	if err := feed(first, []*kgo.Record{click(0, 0), click(1, 1)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(first); err != nil {
		t.Fatal(err)
	}
	// An hour 9 that already has its marker stays as it is.
	if err := os.MkdirAll(root+"/clicks/dt=2024-05-01/hr=09", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"part-0-00000000000000000000-00000000000000000000.parquet", "_SUCCESS"} {
		if err := os.WriteFile(root+"/clicks/dt=2024-05-01/hr=09/"+name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	next, _, _ := testWorker(t, root, config)
	progress := &fakeProgress{map[string]time.Time{"clicks": base.Add(65 * time.Minute)}}
	next.progress = progress
	next.onAssigned(context.Background(), nil, map[string][]int32{"clicks": {0}})
	markers := func() []string {
		next.maybeWriteMarkers(context.Background())
		got, _ := filepath.Glob(root + "/clicks/*/*/_SUCCESS")
		sort.Strings(got)
		for i := range got {
			got[i], _ = filepath.Rel(root, got[i])
		}
		return got
	}
	if got := markers(); !slices.Equal(got, []string{"clicks/dt=2024-05-01/hr=09/_SUCCESS", "clicks/dt=2024-05-01/hr=10/_SUCCESS"}) {
		t.Errorf("markers past hour 10 and the grace: %v", got)
	}
	progress.pos["clicks"] = base.Add(2*time.Hour + 5*time.Minute)
	if got := markers(); len(got) != 3 || got[2] != "clicks/dt=2024-05-01/hr=11/_SUCCESS" {
		t.Errorf("markers past hour 11 and the grace: %v", got)
	}
}

func TestHelpers(t *testing.T) {
	m := finalNameMatcher(3)
	for name, want := range map[string]bool{
		"clicks/dt=2024-05-01/hr=10/part-3-00000000000000000042-00000000000000000042.parquet":  true,
		"clicks/dt=2024-05-01/hr=10/part-3-00000000000000000042-00000000000000000099.parquet":  true,
		"clicks/dt=2024-05-01/hr=10/part-31-00000000000000000042-00000000000000000099.parquet": false,
		"clicks/dt=2024-05-01/hr=10/part-3-00000000000000000099-00000000000000000042.parquet":  false,
		"clicks/dt=2024-05-01/hr=10/part-03-00000000000000000042-00000000000000000042.parquet": false,
		"clicks/dt=2024-05-01/hr=10/part-3-00000000000000000042.parquet":                       false,
		"clicks/dt=2024-05-01/hr=10/part-3-42-99.parquet":                                      false,
		"clicks/dt=2024-05-01/hr=10/_SUCCESS":                                                  false,
	} {
		if m(name) != want {
			t.Errorf("matcher(%q) = %v", name, !want)
		}
	}
	ts := time.UnixMilli(1714557600123).UTC()
	if got, ok := decodeWatermark(encodeWatermark(ts)); !ok || !got.Equal(ts) {
		t.Errorf("watermark round trip: %v %v", got, ok)
	}
	if _, ok := decodeWatermark("member-1"); ok {
		t.Error("foreign metadata decoded as a watermark")
	}
	bad := []Config{
		{},
		{Brokers: []string{"x"}, Group: "g", Topics: []string{"a.dlq"}, Schema: "click"},
		{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", TimestampField: "url"},
		{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", PartitionBy: "minute"},
		{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", Compression: "lz4"},
		{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", Fields: []string{"campaign"}},
		{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", Fields: []string{"url:string"}},
		{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", Fields: []string{"n:int64"}, TimestampField: "n"},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("config %d accepted", i)
		}
	}
	good := Config{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", TimestampField: "received_at"}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
	// A declared timestamp field can pick the bucket.
	good.Fields, good.TimestampField = []string{"shipped_at:timestamp"}, "shipped_at"
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}

// refusingAudit is an audit publisher whose records the broker refuses.
type refusingAudit struct{ published int }

func (a *refusingAudit) publish(*audit.SinkRecord) { a.published++ }
func (a *refusingAudit) flush(context.Context) error {
	return kerr.MessageTooLarge
}
func (a *refusingAudit) load(context.Context) ([]audit.Entry, error) { return nil, nil }

// TestAuditRefusalDoesNotStallLanding: a broker that refuses a window's
// audit records does not keep the window from landing and committing.
func TestAuditRefusalDoesNotStallLanding(t *testing.T) {
	root := t.TempDir()
	w, c, _ := testWorker(t, root, func(c *Config) { c.RollRows = 2 })
	a := &refusingAudit{}
	w.audit = a
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, click(int64(i), 0))
	}
	if err := feed(w, recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.log, " ") != "clicks/0@2 clicks/0@4" || a.published == 0 {
		t.Fatalf("commits %v with %d audit records refused, want both windows committed", c.log, a.published)
	}
	if n := len(landed(t, root)); n != 2 {
		t.Fatalf("%d files landed, want 2", n)
	}
}
