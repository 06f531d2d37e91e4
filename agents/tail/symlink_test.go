package tail

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"millrace/agents/ship"
)

// syncBuffer is a log destination safe for the tailer's goroutines.
type syncBuffer struct {
	mu  sync.Mutex // guards b
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startObserved is start with a metrics registry and a log the test reads.
func startObserved(t *testing.T, cfg Config) (*harness, *prometheus.Registry, *syncBuffer) {
	t.Helper()
	c := newCluster(t)
	s := newShipper(t, c, ship.Config{})
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	tl, err := New(cfg, s, reg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := tl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cluster: c, shipper: s, tailer: tl, cancel: cancel}
	t.Cleanup(func() { h.stop() })
	return h, reg, logs
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestSymlinksSkippedByDefault: a glob matching a link to a file outside
// the log directory ships nothing from it; the link is logged and counted
// once however many scans see it.
func TestSymlinksSkippedByDefault(t *testing.T) {
	dir, outside, data := t.TempDir(), t.TempDir(), t.TempDir()
	appendLines(t, filepath.Join(dir, "app.log"), "app", 0, 3)
	secret := filepath.Join(outside, "secret.txt")
	appendLines(t, secret, "secret", 0, 3)
	link := filepath.Join(dir, "secret.log")
	symlink(t, secret, link)

	h, reg, logs := startObserved(t, testConfig(dir, data))
	cons := newConsumer(t, h.cluster)
	cons.waitFor(t, 3)
	// Two more files, each found by a later scan: the link is seen again
	// by each of those scans.
	for _, name := range []string{"b", "c"} {
		appendLines(t, filepath.Join(dir, name+".log"), name, 0, 1)
		cons.waitFor(t, len(cons.got)+1)
	}
	got := cons.settle(t, 5)
	if set := lineSet(got); len(got) != 5 || set["secret line 000000"] != 0 {
		t.Fatalf("got %d records %v, want the 5 lines of the regular files only", len(got), set)
	}
	if n := testutil.ToFloat64(h.tailer.metrics.symlinks); n != 1 {
		t.Fatalf("millrace_tail_symlinks_skipped_total = %v, want 1", n)
	}
	if n, err := testutil.GatherAndCount(reg, "millrace_tail_symlinks_skipped_total"); err != nil || n != 1 {
		t.Fatalf("metric not exported: %d series, %v", n, err)
	}
	if n := strings.Count(logs.String(), "skipping a symbolic link"); n != 1 {
		t.Fatalf("the skipped link was logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), link) {
		t.Fatalf("the log does not name the link %s:\n%s", link, logs.String())
	}
}

// TestSymlinksFollowedReadOnce: with symlinks on, a link to a file outside
// the directory is followed, and a file reached through two links and
// through its own glob is read once, under one identity.
func TestSymlinksFollowedReadOnce(t *testing.T) {
	dir, outside, data := t.TempDir(), t.TempDir(), t.TempDir()
	appendLines(t, filepath.Join(dir, "app.log"), "app", 0, 3)
	target := filepath.Join(outside, "target.log")
	appendLines(t, target, "target", 0, 3)
	symlink(t, target, filepath.Join(dir, "link.log"))
	symlink(t, target, filepath.Join(dir, "other-link.log"))

	cfg := testConfig(dir, data)
	cfg.Paths = append(cfg.Paths, filepath.Join(outside, "*.log"))
	cfg.Symlinks = true
	h, _, _ := startObserved(t, cfg)
	cons := newConsumer(t, h.cluster)
	cons.waitFor(t, 6)
	// Written after the start: read once more, through the one harvester.
	appendLines(t, target, "target", 3, 5)
	got := cons.settle(t, 8)
	set := lineSet(got)
	if len(got) != 8 {
		t.Fatalf("got %d records %v, want 8: each line once", len(got), set)
	}
	wantLines(t, got, "app", 0, 3)
	wantLines(t, got, "target", 0, 5)
	sources := map[string]bool{}
	for _, l := range got {
		if strings.HasPrefix(l.Line, "target") {
			sources[l.Source] = true
		}
	}
	if len(sources) != 1 {
		t.Fatalf("the target's lines came under %d sources %v, want one", len(sources), sources)
	}
	if n := testutil.ToFloat64(h.tailer.metrics.symlinks); n != 0 {
		t.Fatalf("millrace_tail_symlinks_skipped_total = %v with symlinks on, want 0", n)
	}
}

// TestOpenReadRefusesLinks: without symlinks a file is opened with
// O_NOFOLLOW, so a link put in a file's place between scan and open is not
// read.
func TestOpenReadRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	appendLines(t, target, "x", 0, 1)
	link := filepath.Join(dir, "link.log")
	symlink(t, target, link)
	if f, err := openRead(link, false); err == nil {
		f.Close()
		t.Fatal("opened a symlink without symlinks on")
	}
	f, err := openRead(link, true)
	if err != nil {
		t.Fatalf("symlinks on: %v", err)
	}
	f.Close()
}
