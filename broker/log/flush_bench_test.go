package log

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"millrace/internal/recordbatch"
)

// BenchmarkSyncTo measures the group commit of millrace.flush.on.ack: each
// of P producers appends a batch of 100-byte records and waits for SyncTo
// before its next, as a Produce with acks=all does. fsyncs/op is the number
// of segment fsyncs per append: 1 without grouping, falling as producers
// wait together. nosync is the same appends without waiting for the disk.
func BenchmarkSyncTo(b *testing.B) {
	for _, batchBytes := range []int{1 << 10, 16 << 10} {
		buf := benchBatch(100, batchBytes)
		records := int(recordbatch.HeaderAt(buf).Records)
		for _, producers := range []int{1, 4, 16} {
			for _, wait := range []bool{false, true} {
				mode := "nosync"
				if wait {
					mode = "sync"
				}
				b.Run(fmt.Sprintf("batch=%dKiB/producers=%d/%s", batchBytes>>10, producers, mode), func(b *testing.B) {
					c := newSyncCounter()
					l, err := openLog(filepath.Join(benchDir(b), "t-0"), DefaultConfig(), nil, options{openFile: c.open})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					c.reset()
					b.SetBytes(int64(len(buf)))
					b.ResetTimer()
					var next atomic.Int64
					var wg sync.WaitGroup
					errs := make(chan error, producers)
					for range producers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							mine := append([]byte(nil), buf...)
							for next.Add(1) <= int64(b.N) {
								info, err := l.Append(mine, 0)
								if err == nil && wait {
									err = l.SyncTo(context.Background(), info.LastOffset+1)
								}
								if err != nil {
									errs <- err
									return
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					close(errs)
					for err := range errs {
						b.Fatal(err)
					}
					b.ReportMetric(float64(c.logSyncs.Load())/float64(b.N), "fsyncs/op")
					b.ReportMetric(float64(b.N*records)/b.Elapsed().Seconds(), "records/s")
				})
			}
		}
	}
}
