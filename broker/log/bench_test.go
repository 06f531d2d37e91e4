package log

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// benchBatch builds a batch of about batchBytes made of recordBytes records.
func benchBatch(recordBytes, batchBytes int) []byte {
	n := max(batchBytes/(recordBytes+8), 1)
	return batchtest.Make(n, recordBytes, 1, 7)
}

// benchDir is a new directory under $TMPDIR (default /tmp), the directory
// bench/append-vs-dd.sh runs dd in: whether it is tmpfs or a disk
// filesystem changes the cost of a page-cache write.
func benchDir(b *testing.B) string {
	dir, err := os.MkdirTemp("", "millrace-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cpuMeter adds up the CPU time (user + system, all threads) the process
// spends while a benchmark's timer runs, and reports throughput per CPU
// second (cpu-MB/s) beside the wall-clock MB/s. On a shared machine it is
// the steadier number: time spent waiting for a CPU does not count, while
// the copy into the page cache, done by the write system call, does.
type cpuMeter struct {
	b       *testing.B
	started time.Duration
	total   time.Duration
}

// startCPUMeter resets the benchmark's timer and starts measuring.
func startCPUMeter(b *testing.B) *cpuMeter {
	b.ResetTimer()
	return &cpuMeter{b: b, started: processCPUTime(b)}
}

// stopTimer stops the benchmark's timer and the meter.
func (m *cpuMeter) stopTimer() {
	m.total += processCPUTime(m.b) - m.started
	m.b.StopTimer()
}

// startTimer starts the benchmark's timer and the meter again.
func (m *cpuMeter) startTimer() {
	m.b.StartTimer()
	m.started = processCPUTime(m.b)
}

// report stops the meter and reports bytes per op per CPU second.
func (m *cpuMeter) report(bytesPerOp int64) {
	m.stopTimer()
	if m.total > 0 {
		m.b.ReportMetric(float64(bytesPerOp)*float64(m.b.N)/m.total.Seconds()/1e6, "cpu-MB/s")
	}
}

func processCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// appendRound is how many bytes one log (or baseline file) receives before
// the benchmark starts over with a new one: each round writes to new pages
// of the page cache, as dd to a new file does, and deleting the old file
// drops its dirty pages, so writeback of earlier rounds does not throttle
// later ones.
const appendRound = 64 << 20

// noSyncFile is an *os.File whose Sync does nothing: deleting a benchmark
// log then drops its dirty pages as deleting the baseline file does,
// instead of Close writing them back (kernel writeback would take CPU
// from the rounds that follow on a small machine).
type noSyncFile struct{ *os.File }

func (noSyncFile) Sync() error { return nil }

func openNoSyncFile(path string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// BenchmarkAppend measures appends to the page cache (no fsync), with a new
// log every appendRound bytes, and reports the batch size (B/batch) so
// bench/append-vs-dd.sh can run dd with the same block size. The pwrite
// sub-benchmarks write the same batches to a new plain file the same way:
// one pwrite(2) per batch from a Go buffer, what dd if=/dev/zero does
// without its read of /dev/zero, so a stricter baseline than dd.
func BenchmarkAppend(b *testing.B) {
	for _, rec := range []int{100, 1024} {
		for _, batch := range []int{16 << 10, 1 << 20} {
			buf := benchBatch(rec, batch)
			b.Run(fmt.Sprintf("record=%d/batch=%dKiB", rec, batch>>10), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.MaxMessageBytes = 2 << 20
				dir := benchDir(b)
				var l *Log
				fresh := func() {
					if l != nil {
						if err := l.Delete(); err != nil {
							b.Fatal(err)
						}
					}
					var err error
					if l, err = openLog(filepath.Join(dir, "t-0"), cfg, nil, options{openFile: openNoSyncFile}); err != nil {
						b.Fatal(err)
					}
					// The first append at a leader epoch fsyncs the epoch
					// checkpoint (once per leadership change in a real log,
					// but once per round here): done before the timer runs.
					if _, err := l.Append(buf, 0); err != nil {
						b.Fatal(err)
					}
				}
				fresh()
				b.SetBytes(int64(len(buf)))
				cpu := startCPUMeter(b)
				for i := 0; i < b.N; i++ {
					if l.Size()+int64(len(buf)) > appendRound {
						cpu.stopTimer()
						fresh()
						cpu.startTimer()
					}
					if _, err := l.Append(buf, 0); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(int64(len(buf)))
				b.ReportMetric(float64(len(buf)), "B/batch")
				l.Delete()
			})
			b.Run(fmt.Sprintf("record=%d/batch=%dKiB/pwrite", rec, batch>>10), func(b *testing.B) {
				dir := benchDir(b)
				var f *os.File
				var pos int64
				fresh := func() {
					if f != nil {
						f.Close()
						if err := os.Remove(f.Name()); err != nil {
							b.Fatal(err)
						}
					}
					var err error
					if f, err = os.OpenFile(filepath.Join(dir, "baseline"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
						b.Fatal(err)
					}
					pos = 0
				}
				fresh()
				b.SetBytes(int64(len(buf)))
				cpu := startCPUMeter(b)
				for i := 0; i < b.N; i++ {
					if pos+int64(len(buf)) > appendRound {
						cpu.stopTimer()
						fresh()
						cpu.startTimer()
					}
					if _, err := f.WriteAt(buf, pos); err != nil {
						b.Fatal(err)
					}
					pos += int64(len(buf))
				}
				cpu.report(int64(len(buf)))
				b.ReportMetric(float64(len(buf)), "B/batch")
				f.Close()
			})
		}
	}
}

// BenchmarkRead measures sequential reads from the page cache: Read of 1 MiB
// fetches, their bytes copied out with Slice.Read.
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
				cpu := startCPUMeter(b)
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
				cpu.report(total / int64(b.N))
				b.SetBytes(total / int64(b.N))
			})
		}
	}
}

// BenchmarkValidate measures the checks every produced batch goes through
// (CRC-32C, header, record framing), which an append pays beyond the write:
// ValidateProduce, as the Produce handler calls it, under a topic config
// whose max.message.bytes admits the batch.
func BenchmarkValidate(b *testing.B) {
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 2 << 20
	for _, rec := range []int{100, 1024} {
		for _, batch := range []int{16 << 10, 1 << 20} {
			buf := benchBatch(rec, batch)
			now := time.Now()
			b.Run(fmt.Sprintf("record=%d/batch=%dKiB", rec, batch>>10), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := validateProduce(testDecoder, buf, cfg, now); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
