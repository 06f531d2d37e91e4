package lake

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkOtelLogs lands OTLP log records (otlp_proto, 100 log records of
// one service each, with an event_id, as agents/otlp writes them) into
// Parquet files, and reports log records per second: the decode, the two
// builds of each row (deciding, then writing) and the Parquet writing.
func BenchmarkOtelLogs(b *testing.B) {
	for _, dedup := range []string{"on", "off"} {
		b.Run("dedup="+dedup, func(b *testing.B) {
			const perRecord = 100
			recs := make([]*kgo.Record, 100)
			for i := range recs {
				ids, hours := make([]int, perRecord), make([]int, perRecord)
				for j := range ids {
					ids[j] = i*perRecord + j
				}
				recs[i] = logRecord(b, int64(i), otlpLogs(fmt.Sprint("svc", i%4), ids, hours), false)
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				w, _, _ := testWorker(b, b.TempDir(), func(c *Config) {
					c.Topics, c.Schema, c.Dedup, c.RollRows = []string{"otlp_logs"}, "otel-logs", dedup, 1<<20
				})
				b.StartTimer()
				if err := feedTopic(w, "otlp_logs", recs, 0); err != nil {
					b.Fatal(err)
				}
				if err := flushAll(w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(recs)*perRecord)/b.Elapsed().Seconds(), "logrecords/s")
		})
	}
}
