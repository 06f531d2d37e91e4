package tail

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"

	"millrace/internal/waitfor"
	"millrace/schemas"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

func TestMultiline(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	cfg := testConfig(dir, data)
	cfg.Multiline = Multiline{StartPattern: `^\d{4}-`, MaxLines: 3, Timeout: 200 * time.Millisecond}
	writeFile(t, path, "2026-01-01 ERROR boom\n"+
		"java.lang.RuntimeException: boom\n"+
		"\tat a.b(C.java:1)\n"+
		"2026-01-01 INFO ok\n"+
		"2026-01-01 ERROR long\n"+
		"x1\nx2\nx3\nx4\n"+
		"2026-01-01 INFO last\n")
	start(t, c, cfg, ship.Config{})
	// The last event has no successor: only the timeout sends it.
	got := newConsumer(t, c).settle(t, 4)
	if len(got) != 4 {
		t.Fatalf("got %d events, want 4: %+v", len(got), got)
	}
	want := []struct {
		line      string
		truncated bool
	}{
		{"2026-01-01 ERROR boom\njava.lang.RuntimeException: boom\n\tat a.b(C.java:1)", false},
		{"2026-01-01 INFO ok", false},
		{"2026-01-01 ERROR long\nx1\nx2", true},
		{"2026-01-01 INFO last", false},
	}
	for i, w := range want {
		if got[i].Line != w.line || got[i].Truncated != w.truncated {
			t.Fatalf("event %d = %q truncated=%v, want %q truncated=%v", i, got[i].Line, got[i].Truncated, w.line, w.truncated)
		}
	}
	if got[1].Offset != int64(len("2026-01-01 ERROR boom\njava.lang.RuntimeException: boom\n\tat a.b(C.java:1)\n")) {
		t.Fatalf("second event offset %d", got[1].Offset)
	}
}

func TestLongLinesAreTruncatedAndMarked(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	cfg := testConfig(dir, data)
	cfg.MaxLineBytes = 100
	long := strings.Repeat("y", 300_000) // spans several reads
	writeFile(t, path, "short\n"+long+"\nafter\n"+strings.Repeat("z", 100)+"\n")
	start(t, c, cfg, ship.Config{})
	got := newConsumer(t, c).settle(t, 4)
	if len(got) != 4 {
		t.Fatalf("got %d records, want 4", len(got))
	}
	if got[1].Line != strings.Repeat("y", 100) || !got[1].Truncated || got[1].Offset != 6 {
		t.Fatalf("long line: len %d truncated %v offset %d", len(got[1].Line), got[1].Truncated, got[1].Offset)
	}
	if got[2].Line != "after" || got[2].Truncated || got[2].Offset != int64(6+len(long)+1) {
		t.Fatalf("line after the long one: %+v", got[2])
	}
	if got[3].Truncated || len(got[3].Line) != 100 {
		t.Fatalf("a line of exactly max_line_bytes must not be marked: %+v", got[3])
	}
}

func TestInvalidUTF8IsReplacedAndFlagged(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(dir, "app.log"), "ok é\nbad \xff\xfe here\nctl \x01\"\\\n")
	start(t, c, testConfig(dir, data), ship.Config{})
	got := newConsumer(t, c).settle(t, 3)
	if got[0].Line != "ok é" || got[0].InvalidUTF8 {
		t.Fatalf("valid line: %+v", got[0])
	}
	if got[1].Line != "bad \uFFFD\uFFFD here" || !got[1].InvalidUTF8 {
		t.Fatalf("invalid line: %q flagged %v", got[1].Line, got[1].InvalidUTF8)
	}
	if got[2].Line != "ctl \x01\"\\" {
		t.Fatalf("control characters not round-tripped: %q", got[2].Line)
	}
}

func TestEncoderAlwaysValidJSON(t *testing.T) {
	e := newEncoder("h\"ost", map[string]string{"b": "2", "a": "\n"})
	for _, line := range []string{"", "plain", "\xff", "\u2028x", "\x00\x1f", "é\xc3"} {
		b, _ := e.encode(nil, []byte("0123"), schemas.AppendJSONString(nil, "/p"), time.Unix(0, 5), lineEvent{offset: 7, line: []byte(line)})
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("line %q: invalid JSON %s: %v", line, b, err)
		}
		if m["host"] != "h\"ost" || m["offset"] != float64(7) {
			t.Fatalf("fields wrong: %s", b)
		}
	}
}

func TestEventIDStableAndDistinct(t *testing.T) {
	a, b := eventIDPrefix(newFileID()), eventIDPrefix(newFileID())
	seen := map[string]string{}
	for _, c := range []struct {
		name   string
		prefix *[16]byte
		offset int64
	}{{"a@0", &a, 0}, {"a@1", &a, 1}, {"a@4096", &a, 4096}, {"a@max", &a, 1<<63 - 1}, {"b@0", &b, 0}, {"b@1", &b, 1}} {
		id := string(eventID(nil, c.prefix, c.offset))
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("%s: event_id %q is not 32 hex chars", c.name, id)
		}
		if again := string(eventID([]byte("x"), c.prefix, c.offset)); again != "x"+id {
			t.Fatalf("%s: %q then %q", c.name, id, again)
		}
		if other, dup := seen[id]; dup {
			t.Fatalf("%s and %s share event_id %s", other, c.name, id)
		}
		seen[id] = c.name
	}
	// The prefix is derived from the persisted identity alone, so a restart
	// gives the file's lines the ids they had.
	if first, again := eventIDPrefix("same"), eventIDPrefix("same"); first != again {
		t.Fatalf("the prefix of one file identity changed: %s, then %s", first[:], again[:])
	}
}

func TestCheckpointWaitsForOldestUnacknowledged(t *testing.T) {
	h := &harvester{}
	starts := []int64{0, 10, 20, 30, 40}
	var seqs []uint64
	for i, s := range starts {
		seqs = append(seqs, h.track(s, s+10, 0))
		_ = i
	}
	steps := []struct {
		ack  int
		want int64
	}{
		{2, 0}, {3, 0}, {0, 10}, {4, 10}, {1, 50},
	}
	for _, st := range steps {
		h.settle(seqs[st.ack])
		if got := h.checkpoint(); got != st.want {
			t.Fatalf("after acking line %d: checkpoint %d, want %d", st.ack, got, st.want)
		}
	}
	h.settle(seqs[1]) // a duplicate ack changes nothing
	if h.checkpoint() != 50 || h.inflightCount() != 0 {
		t.Fatalf("checkpoint %d inflight %d", h.checkpoint(), h.inflightCount())
	}
}

// heldProducer keeps every record until the test acknowledges it.
type heldProducer struct {
	mu   sync.Mutex
	recs []*kgo.Record
	acks []ship.Promise
}

func (p *heldProducer) Wrap(ack ship.AckFunc) ship.Promise { return ship.Promise(ack) }

func (p *heldProducer) ProduceWrapped(_ context.Context, r *kgo.Record, ack ship.Promise) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recs = append(p.recs, r)
	p.acks = append(p.acks, ack)
}

func (p *heldProducer) ack(i int, err error) {
	p.mu.Lock()
	r, a := p.recs[i], p.acks[i]
	p.mu.Unlock()
	a(r, err)
}

func (p *heldProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recs)
}

func TestRegistryFollowsOutOfOrderAcks(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "a", 0, 4) // each line is 14 bytes
	p := &heldProducer{}
	tl, err := New(testConfig(dir, data), p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tl.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	waitfor.Until(t, 20*time.Second, "4 records", func() bool { return p.count() == 4 })
	expect := func(want int64) {
		t.Helper()
		waitfor.Until(t, 20*time.Second, "registry offset", func() bool { return registryOffset(t, data, path) == want })
	}
	expect(0)
	p.ack(2, nil)
	p.ack(3, nil)
	time.Sleep(150 * time.Millisecond) // several checkpoint intervals
	if got := registryOffset(t, data, path); got != 0 {
		t.Fatalf("registry advanced to %d past an unacknowledged line", got)
	}
	p.ack(0, nil)
	expect(14)
	// A permanent rejection is skipped, not retried forever.
	p.ack(1, errPermanent)
	expect(56)
}

var errPermanent = kerr.InvalidRecord

// TestInflightWindow settles lines out of order through many reuses of the
// in-flight array: the checkpoint is always the start of the oldest
// unsettled line, or the end of the last line once all are settled.
func TestInflightWindow(t *testing.T) {
	h := &harvester{}
	var pending []uint64 // tracked, not settled, oldest first
	next := int64(0)
	for round := range 200 {
		for range 1 + round%37 {
			pending = append(pending, h.track(next*10, next*10+10, 0))
			next++
		}
		// Settle every other pending line, newest first, then the oldest.
		for i := len(pending) - 1; i > 0; i -= 2 {
			h.settle(pending[i])
			pending = append(pending[:i], pending[i+1:]...)
		}
		if round%3 == 0 && len(pending) > 0 {
			h.settle(pending[0])
			pending = pending[1:]
		}
		want := next * 10
		if len(pending) > 0 {
			want = int64(pending[0]) * 10 // line seq starts at offset seq*10
		}
		if got := h.checkpoint(); got != want {
			t.Fatalf("round %d: checkpoint %d, want %d", round, got, want)
		}
		// The window runs from the oldest unsettled line to the newest.
		window := 0
		if len(pending) > 0 {
			window = int(next - int64(pending[0]))
		}
		if got := h.inflightCount(); got != window {
			t.Fatalf("round %d: %d in flight, want %d", round, got, window)
		}
	}
	for _, seq := range pending {
		h.settle(seq)
	}
	if got, want := h.checkpoint(), next*10; got != want || h.inflightCount() != 0 {
		t.Fatalf("all settled: checkpoint %d (want %d), %d in flight", got, want, h.inflightCount())
	}
}
