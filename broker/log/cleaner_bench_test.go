package log

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"millrace/internal/recordbatch"
)

// BenchmarkClean cleans a 32 MiB log of 1 KiB records over 10,000 keys
// (each key written about three times, so about two records in three go)
// from scratch each time: the cleaner's MB/s of log cleaned, to set beside
// BenchmarkReplaceSegments (the swap alone) and dd.
func BenchmarkClean(b *testing.B) {
	for _, codec := range []int{codecNone, codecLZ4} {
		b.Run(recordbatch.CodecName(codec), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.CleanupPolicy = PolicyCompact
			cfg.SegmentBytes = 8 << 20
			pristine := filepath.Join(benchDir(b), "c-0")
			l, err := openLog(pristine, cfg, nil, options{})
			if err != nil {
				b.Fatal(err)
			}
			// Hex of random bytes: compressed about 2:1, as text payloads
			// are, so the compressed log holds about as many records.
			rng := rand.New(rand.NewPCG(1, 2))
			raw := make([]byte, 500)
			ts := time.Now().UnixMilli()
			for k := 0; l.Size() < 32<<20; {
				recs := make([]string, 100)
				for i := range recs {
					for j := range raw {
						raw[j] = byte(rng.Uint32())
					}
					recs[i] = fmt.Sprintf("key-%d=%s", k%10000, hex.EncodeToString(raw))
					k++
				}
				if _, err := l.Append(keyedBatch(b, ts, codec, recs...), 1); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Roll(); err != nil {
				b.Fatal(err)
			}
			size := l.Size()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			m := startCPUMeter(b)
			for range b.N {
				m.stopTimer()
				work := filepath.Join(b.TempDir(), "c-0")
				copyDir(b, pristine, work)
				l, err := openLog(work, cfg, nil, options{})
				if err != nil {
					b.Fatal(err)
				}
				m.startTimer()
				res, err := l.Clean(context.Background(), CleanOptions{Now: time.Now(), Bound: -1})
				if err != nil || !res.Cleaned {
					b.Fatalf("clean: %+v %v", res, err)
				}
				m.stopTimer()
				b.ReportMetric(float64(res.BytesAfter)/float64(res.BytesBefore), "kept-ratio")
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				m.startTimer()
			}
			m.report(size)
		})
	}
}
