package log

import (
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"millrace/internal/recordbatch"
)

// fakeClock is an injectable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func openTest(t testing.TB, dir string, cfg Config, opts options) *Log {
	t.Helper()
	l, err := openLog(dir, cfg, testLogger(t), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, batch []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(append([]byte(nil), batch...), 1)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

// readAllBatches reads the log from start to end and returns the batches.
func readAllBatches(t testing.TB, l *Log, from int64) []BatchHeader {
	t.Helper()
	var out []BatchHeader
	for off := from; off < l.EndOffset(); {
		s, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := s.ReadAll()
		s.Close()
		if err != nil {
			t.Fatalf("read all %d: %v", off, err)
		}
		hs, err := testDecoder.Validate(b, maxInt, storedRules)
		if err != nil {
			t.Fatalf("read at %d returned invalid batches: %v", off, err)
		}
		out = append(out, hs...)
		if s.NextOffset() <= off {
			t.Fatalf("read at %d made no progress", off)
		}
		off = s.NextOffset()
	}
	return out
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// testDecoder decodes what the tests validate outside a log.
var testDecoder = recordbatch.NewDecoder(0)
