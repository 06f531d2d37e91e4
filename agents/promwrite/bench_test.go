package promwrite

import (
	"fmt"
	"strconv"
	"testing"
)

// BenchmarkDecode decodes requests the size Prometheus sends by default
// (max_samples_per_send 2000), one sample a series, as a scrape's worth
// of series are sent.
func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{100, 2000} {
		ss := make([]series, n)
		for i := range ss {
			ss[i] = series{labels: named("http_requests_total", "code", "200", "instance", "web-1:9100", "job", "node",
				"path", "/api/"+strconv.Itoa(i)), samples: []Sample{{float64(i), 1700000000000}}}
		}
		in := encodeRequest(ss, nil)
		lim := Limits{MaxSeries: n, MaxSamples: n, MaxLabels: 5 * n, MaxMetadata: 0}
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(in, lim); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
