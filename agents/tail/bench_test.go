package tail

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"millrace/agents/ship"
)

// writeBenchFile writes about size bytes of log lines of 100–200 bytes.
func writeBenchFile(b *testing.B, path string, size int64) (int64, int) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	pad := strings.Repeat("abcdefghij", 20)
	var written int64
	lines := 0
	// One millisecond apart: no two lines share a timestamp, the dearest
	// case for timestamp.pattern (nothing repeats for its cache).
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var ts []byte
	for written < size {
		ts = start.Add(time.Duration(lines)*time.Millisecond).AppendFormat(ts[:0], "2006-01-02T15:04:05.000Z07:00")
		n, _ := fmt.Fprintf(w, "%s INFO request id=%d path=/api/v1/items status=200 %s\n", ts, lines, pad[:lines%100])
		written += int64(n)
		lines++
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return written, lines
}

// BenchmarkTailToBroker ships a 256 MiB file to an in-memory broker that
// discards what it acknowledges, and reports MB/s (from b.SetBytes) and
// lines/s until the checkpoint reaches the end of the file. The
// "+timestamp" case parses every line's ts with an anchored pattern.
func BenchmarkTailToBroker(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "big.log")
	size, lines := writeBenchFile(b, path, 256<<20)
	for _, bc := range []struct {
		name, comp string
		timestamp  Timestamp
	}{
		{name: "lz4", comp: "lz4"},
		{name: "zstd", comp: "zstd"},
		{name: "none", comp: "none"},
		{name: "lz4+timestamp", comp: "lz4", timestamp: Timestamp{Pattern: `^(\S+) `}},
	} {
		comp := bc.comp
		b.Run(bc.name, func(b *testing.B) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic), kfake.BlackholeProduce())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(size)
			b.ResetTimer()
			begin := time.Now()
			for range b.N {
				s, err := ship.New(ship.Config{Brokers: c.ListenAddrs(), Compression: comp}, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				cfg := testConfig(dir, b.TempDir())
				cfg.Timestamp = bc.timestamp
				tl, err := New(cfg, s, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := tl.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				for !tl.delivered(size) {
					time.Sleep(5 * time.Millisecond)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := tl.Shutdown(ctx); err != nil {
					b.Fatal(err)
				}
				if err := s.Shutdown(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			b.ReportMetric(float64(lines)*float64(b.N)/time.Since(begin).Seconds(), "lines/s")
		})
	}
}

// delivered reports whether the one followed file is acknowledged up to size.
func (t *Tailer) delivered(size int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.files) == 1 && t.files[0].checkpoint() == size
}
