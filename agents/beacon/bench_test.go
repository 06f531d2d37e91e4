package beacon

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"millrace/agents/ship"
)

// BenchmarkPostEvents measures POST /v1/events end to end in one process:
// HTTP over loopback, validation and enrichment, producing to a kfake
// broker and waiting for its acknowledgements. Reports events/s.
func BenchmarkPostEvents(b *testing.B) {
	for _, batch := range []int{1, 20, 100} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			h := newHarness(b, Config{RateLimit: -1}, ship.Config{})
			event := `{"type":"click","url":"https://shop.example.com/p/42","referrer":"https://search.example.org/?q=x",` +
				`"title":"Product 42","anonymous_id":"0190f3c2-7b1e-7abc-8def-0123456789ab","session_id":"s-1",` +
				`"ts":1714557600000,"properties":{"button":"buy","price":9.99}}`
			body := []byte("[" + strings.TrimSuffix(strings.Repeat(event+",", batch), ",") + "]")
			client := h.http.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
			var failed atomic.Int64
			b.SetBytes(int64(len(body)))
			// Each request waits for the broker's acknowledgement, so
			// throughput comes from many requests in flight, as with many
			// browsers.
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(h.http.URL+"/v1/events", "text/plain", bytes.NewReader(body))
					if err != nil {
						failed.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d requests failed", n)
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
