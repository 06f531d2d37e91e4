package log

import (
	"fmt"
	"os"
	"testing"
)

// benchBatch builds a batch of about batchBytes made of recordBytes records.
func benchBatch(recordBytes, batchBytes int) []byte {
	n := max(batchBytes/(recordBytes+8), 1)
	return makeBatch(n, recordBytes, 1, 7)
}

func benchDir(b *testing.B) string {
	dir, err := os.MkdirTemp("/tmp", "millrace-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// BenchmarkAppend measures appends to the page cache (no fsync).
func BenchmarkAppend(b *testing.B) {
	for _, rec := range []int{100, 1024} {
		for _, batch := range []int{16 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("record=%d/batch=%dKiB", rec, batch>>10), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.MaxMessageBytes = 2 << 20
				l, err := Open(benchDir(b), cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				buf := benchBatch(rec, batch)
				b.SetBytes(int64(len(buf)))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := l.Append(buf, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRead measures sequential reads (Read + ReadAll of 1 MiB fetches).
func BenchmarkRead(b *testing.B) {
	for _, rec := range []int{100, 1024} {
		for _, batch := range []int{16 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("record=%d/batch=%dKiB", rec, batch>>10), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.MaxMessageBytes = 2 << 20
				l, err := Open(benchDir(b), cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				buf := benchBatch(rec, batch)
				for l.Size() < 256<<20 {
					if _, err := l.Append(buf, 0); err != nil {
						b.Fatal(err)
					}
				}
				dst := make([]byte, 2<<20)
				var off int64
				b.ResetTimer()
				var total int64
				for i := 0; i < b.N; i++ {
					if off >= l.EndOffset() {
						off = 0
					}
					s, err := l.Read(off, 1<<20, l.EndOffset())
					if err != nil {
						b.Fatal(err)
					}
					n, err := s.Read(dst[:s.Len()])
					if err != nil || n != s.Len() {
						b.Fatal(err)
					}
					total += int64(n)
					off = s.NextOffset()
					s.Close()
				}
				b.SetBytes(total / int64(b.N))
			})
		}
	}
}
