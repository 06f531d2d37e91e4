package log

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// logLineBatch is a batch of n service-log records of about 110 bytes each,
// JSON as the tailer ships them, compressed with the named codec.
func logLineBatch(b *testing.B, n int, codec string) []byte {
	recs := make([]batchtest.Record, n)
	for i := range recs {
		recs[i] = batchtest.Record{
			Value: fmt.Appendf(nil, `{"ts":"2026-12-03T14:%02d:%02d.%03dZ","level":"info","service":"checkout","msg":"order %d placed","user":%d}`,
				i/60%60, i%60, i*7%1000, 100000+i*13, i*7919%100000),
			TSDelta: int64(i),
		}
	}
	plain := batchtest.Build(recs, time.Now().UnixMilli()-1000, 0)
	if codec == "none" {
		return plain
	}
	return batchtest.WithPayload(plain, batchtest.CodecOf(codec), int32(n), batchtest.Compress(b, codec, plain[batchHeaderSize:]))
}

// BenchmarkProduceRecompress measures what the leader spends on one
// produced batch of 160 log lines (about 18 KiB): ValidateProduce and
// AppendValidated to the page cache, with the topic's compression.type
// keeping the producer's codec and recompressing it. It reports wall and
// CPU time and allocations per record.
func BenchmarkProduceRecompress(b *testing.B) {
	const records = 160
	for _, c := range []struct{ source, target string }{
		{"none", "producer"},
		{"none", "zstd"},
		{"none", "lz4"},
		{"none", "snappy"},
		{"none", "gzip"},
		{"lz4", "producer"},
		{"lz4", "zstd"},
	} {
		batch := logLineBatch(b, records, c.source)
		b.Run(fmt.Sprintf("from=%s/compression.type=%s", c.source, c.target), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.CompressionType = c.target
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
				// The first append at an epoch fsyncs its checkpoint: not timed.
				if _, err := l.Append(append([]byte(nil), batch...), 0); err != nil {
					b.Fatal(err)
				}
			}
			fresh()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu := startCPUMeter(b)
			for i := 0; i < b.N; i++ {
				if l.Size()+int64(len(batch)) > appendRound {
					cpu.stopTimer()
					fresh()
					cpu.startTimer()
				}
				v, err := validateProduce(testDecoder, batch, cfg, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.AppendValidated(v, 0); err != nil {
					b.Fatal(err)
				}
			}
			cpu.stopTimer()
			runtime.ReadMemStats(&after)
			perRecord := float64(b.N * records)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perRecord, "ns/record")
			b.ReportMetric(float64(cpu.total.Nanoseconds())/perRecord, "cpu-ns/record")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/perRecord, "allocs/record")
			b.ReportMetric(float64(len(batch)), "B/batch")
			l.Delete()
		})
	}
}
