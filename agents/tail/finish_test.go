package tail

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

// wantExactly checks got holds each prefix's lines exactly once.
func wantExactly(t *testing.T, got []logLine, want map[string][2]int) {
	t.Helper()
	n := 0
	for prefix, r := range want {
		wantLines(t, got, prefix, r[0], r[1])
		n += r[1] - r[0]
	}
	if len(got) != n {
		t.Fatalf("got %d records, want %d (no duplicates without a crash)", len(got), n)
	}
	ids := map[string]bool{}
	for _, l := range got {
		if ids[l.EventID] {
			t.Fatalf("event_id %s used twice", l.EventID)
		}
		ids[l.EventID] = true
	}
}

// TestRenamedOutOfGlobsWhileStopped: the rest of a file renamed away from
// the globs while the tailer was down is read under its old identity.
func TestRenamedOutOfGlobsWhileStopped(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "old", 0, 100)
	h := start(t, c, testConfig(dir, data), ship.Config{})
	cons := newConsumer(t, c)
	first := cons.waitFor(t, 100)
	h.stop()
	appendLines(t, path, "old", 100, 150)
	if err := os.Rename(path, path+".1"); err != nil { // *.log no longer matches
		t.Fatal(err)
	}
	appendLines(t, path, "new", 0, 20)
	start(t, c, testConfig(dir, data), ship.Config{})
	got := cons.settle(t, 170)
	wantExactly(t, got, map[string][2]int{"old": {0, 150}, "new": {0, 20}})
	// The rest keeps the old identity and its source.
	for _, l := range got {
		if l.Line == "old line 000120" && (l.Source != path || l.Offset <= first[99].Offset) {
			t.Fatalf("finished line %+v: want source %s after offset %d", l, path, first[99].Offset)
		}
	}
}

// TestRenamedAwayWhileClosed: a file closed at EOF (close_inactive) gets
// more lines and is renamed out of the globs before the tailer reopens
// it; the lines are found by identity.
func TestRenamedAwayWhileClosed(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	appendLines(t, path, "old", 0, 50)
	cfg := testConfig(dir, data)
	cfg.CloseInactive = 100 * time.Millisecond
	h := start(t, c, cfg, ship.Config{})
	cons := newConsumer(t, c)
	cons.waitFor(t, 50)
	waitfor.Until(t, 20*time.Second, "the file to be closed", func() bool { return openUnder(t, dir) == 0 })
	// The writer keeps its descriptor across the rename and writes its
	// last lines before reopening: they land in the renamed file, which
	// the tailer holds no descriptor of.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, filepath.Join(dir, "app.log-20260101")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("old line 000050\nold line 000051\nold line 000052\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	appendLines(t, path, "new", 0, 10)
	got := cons.settle(t, 63)
	wantExactly(t, got, map[string][2]int{"old": {0, 53}, "new": {0, 10}})
	waitfor.Until(t, 20*time.Second, "descriptors to be released", func() bool { return openUnder(t, dir) == 0 })
	waitfor.Until(t, 20*time.Second, "the finished file to be forgotten", func() bool {
		h.tailer.mu.Lock()
		defer h.tailer.mu.Unlock()
		return len(h.tailer.files) == 1
	})
}

// copyTruncate copies path to dst and truncates path, as logrotate's
// copytruncate does.
func copyTruncate(t *testing.T, path, dst string) {
	t.Helper()
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
}

// TestCopyTruncateWhileStopped: the unread rest of a file copytruncated
// while the tailer was down is read from the (excluded) copy.
func TestCopyTruncateWhileStopped(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	cfg := testConfig(dir, data)
	cfg.Paths = []string{filepath.Join(dir, "app.log*")}
	cfg.Exclude = []string{"*.ct"}
	appendLines(t, path, "old", 0, 100)
	h := start(t, c, cfg, ship.Config{})
	cons := newConsumer(t, c)
	cons.waitFor(t, 100)
	h.stop()
	appendLines(t, path, "old", 100, 140)
	copyTruncate(t, path, path+".ct")
	appendLines(t, path, "new", 0, 200) // longer than the old content
	start(t, c, cfg, ship.Config{})
	got := cons.settle(t, 340)
	wantExactly(t, got, map[string][2]int{"old": {0, 140}, "new": {0, 200}})
}

// gateProducer passes records to a Shipper until closed is set, then holds
// each Produce call until open is called: a broker that stops answering,
// seen from the tailer.
type gateProducer struct {
	next *ship.Shipper
	mu   sync.Mutex
	cond *sync.Cond
	shut bool
	held int
}

func newGate(s *ship.Shipper) *gateProducer {
	g := &gateProducer{next: s}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gateProducer) Wrap(ack ship.AckFunc) ship.Promise { return g.next.Wrap(ack) }

func (g *gateProducer) ProduceWrapped(ctx context.Context, r *kgo.Record, p ship.Promise) {
	g.mu.Lock()
	for g.shut && ctx.Err() == nil {
		g.held++
		g.cond.Wait()
		g.held--
	}
	g.mu.Unlock()
	g.next.ProduceWrapped(ctx, r, p)
}

func (g *gateProducer) set(shut bool) {
	g.mu.Lock()
	g.shut = shut
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *gateProducer) waiting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held > 0
}

// TestCopyTruncateWhileReadingPaused: copytruncate happens while reading
// is paused (broker down) with lines unread, and the writer refills the
// file past the read position; the tailer must notice the content changed
// (the size alone cannot tell), finish the old rest from the copy, and
// read the new content from the start.
func TestCopyTruncateWhileReadingPaused(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	cfg := testConfig(dir, data)
	cfg.Exclude = []string{"*.ct"}
	cfg.Paths = []string{filepath.Join(dir, "*")}
	s := newShipper(t, c, ship.Config{})
	g := newGate(s)
	g.set(true)
	tl, err := New(cfg, g, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendLines(t, path, "old", 0, 100)
	if err := tl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tl.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	waitfor.Until(t, 20*time.Second, "reading to pause", g.waiting)
	appendLines(t, path, "old", 100, 150) // after the chunk being shipped: unread
	copyTruncate(t, path, path+".ct")
	appendLines(t, path, "new", 0, 300)
	g.set(false)
	got := newConsumer(t, c).settle(t, 450)
	wantExactly(t, got, map[string][2]int{"old": {0, 150}, "new": {0, 300}})
}

// TestEvictionPrefersFilesReadToEnd: with one descriptor to spare, a file
// read to its end is closed before one with bytes unread.
func TestEvictionPrefersFilesReadToEnd(t *testing.T) {
	tl := &Tailer{cfg: Config{MaxOpenFiles: 2}.WithDefaults(), metrics: mustMetrics(t), logger: slog.New(slog.DiscardHandler)}
	dir := t.TempDir()
	open := func(name string, atEOF bool, idle time.Duration) *harvester {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		h := &harvester{file: f, atEOF: atEOF, lastData: time.Now().Add(-idle), path: f.Name()}
		tl.files = append(tl.files, h)
		tl.open++
		return h
	}
	busy := open("busy.log", false, time.Hour) // idle longest, but unread bytes
	done := open("done.log", true, time.Minute)
	if !tl.evict(nil) {
		t.Fatal("nothing evicted")
	}
	if done.file != nil || busy.file == nil {
		t.Fatalf("evicted the wrong file: done open=%v busy open=%v", done.file != nil, busy.file != nil)
	}
	if !tl.evict(nil) || busy.file != nil || !busy.wantOpen {
		t.Fatal("a file with unread bytes must be evicted last and reopened later")
	}
}

func mustMetrics(t *testing.T) *metrics {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRestartAfterEmptyFingerprint: a file registered while still empty
// (no fingerprint yet) and killed before the next checkpoint keeps its
// identity on restart, so lines read again carry the same event_id.
func TestRestartAfterEmptyFingerprint(t *testing.T) {
	c := newCluster(t)
	dir, data := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "app.log")
	writeFile(t, path, "")
	cfg := testConfig(dir, data)
	cfg.CheckpointInterval = time.Hour // only the discovery is persisted
	h := start(t, c, cfg, ship.Config{})
	waitfor.Until(t, 20*time.Second, "the empty file to be registered", func() bool { return registryOffset(t, data, path) == 0 })
	appendLines(t, path, "a", 0, 10)
	cons := newConsumer(t, c)
	first := cons.waitFor(t, 10)
	h.kill()
	start(t, c, testConfig(dir, data), ship.Config{})
	got := cons.settle(t, 20)
	if len(got) != 20 {
		t.Fatalf("got %d records, want the 10 lines twice", len(got))
	}
	for i, l := range got[10:] {
		if l.Line != first[i].Line || l.EventID != first[i].EventID {
			t.Fatalf("re-read line %q has event_id %s, first copy %q had %s", l.Line, l.EventID, first[i].Line, first[i].EventID)
		}
	}
}

// ackHolder stands in for a broker that never answers: it keeps what it is
// given and sends nothing, so every line stays in flight.
type ackHolder struct {
	mu   sync.Mutex
	held int
}

func (a *ackHolder) Wrap(ack ship.AckFunc) ship.Promise { return ship.Promise(ack) }

func (a *ackHolder) ProduceWrapped(context.Context, *kgo.Record, ship.Promise) {
	a.mu.Lock()
	a.held++
	a.mu.Unlock()
}

func (a *ackHolder) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held
}

// TestRotationWithLinesInFlight: a file read to its end is rotated away
// before its last lines are acknowledged, and the tailer crashes before
// they are. Nothing of the old file is unread, but the registry must keep
// its entry until its lines are acknowledged, so the restarted tailer
// ships them from where the rotation left them.
func TestRotationWithLinesInFlight(t *testing.T) {
	for name, rotate := range map[string]func(t *testing.T, path string){
		"copytruncate": func(t *testing.T, path string) { copyTruncate(t, path, path+".ct") },
		"rename out of the globs": func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
		},
		"rename within the globs": func(t *testing.T, path string) {
			if err := os.Rename(path, strings.TrimSuffix(path, ".log")+"-1.log"); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			dir, data := t.TempDir(), t.TempDir()
			path := filepath.Join(dir, "app.log")
			cfg := testConfig(dir, data)
			cfg.Exclude = []string{"*.ct"}
			appendLines(t, path, "old", 0, 100)
			holder := &ackHolder{}
			tl, err := New(cfg, holder, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if err := tl.Start(ctx); err != nil {
				t.Fatal(err)
			}
			waitfor.Until(t, 20*time.Second, "the old lines to be shipped", func() bool { return holder.count() == 100 })
			rotate(t, path)
			appendLines(t, path, "new", 0, 10)
			// The new file's identity is persisted before its lines ship,
			// so the registry the crash leaves is one written after the
			// rotation was noticed.
			waitfor.Until(t, 20*time.Second, "the new lines to be shipped", func() bool { return holder.count() == 110 })
			cancel()
			if err := tl.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			start(t, c, cfg, ship.Config{})
			got := newConsumer(t, c).settle(t, 110)
			wantExactly(t, got, map[string][2]int{"old": {0, 100}, "new": {0, 10}})
		})
	}
}
