package parquet

import (
	"io"
	"testing"

	"millrace/schemas"
)

// BenchmarkClickJSONToParquet measures click events landed per second: JSON
// decode, Arrow building, Parquet encoding and compression, to io.Discard.
// b.SetBytes counts JSON input bytes.
func BenchmarkClickJSONToParquet(b *testing.B) {
	events := make([][]byte, 4096)
	var total int
	for i := range events {
		events[i] = []byte(clickEvent(i))
		total += len(events[i])
	}
	for _, codec := range []string{"zstd", "snappy"} {
		b.Run(codec, func(b *testing.B) {
			b.SetBytes(int64(total / len(events)))
			b.ReportAllocs()
			w, err := NewWriter(io.Discard, schemas.Click, Options{Compression: codec})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := w.Append(events[i%len(events)], base); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkDecodeClick measures the JSON decoder alone.
func BenchmarkDecodeClick(b *testing.B) {
	ev := []byte(clickEvent(6))
	r := schemas.Click.NewRow()
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := r.Decode(ev); err != nil {
			b.Fatal(err)
		}
	}
}
