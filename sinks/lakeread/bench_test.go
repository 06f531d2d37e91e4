package lakeread

import (
	"context"
	"fmt"
	"testing"
	"time"

	"millrace/schemas"
	"millrace/sinks/parquet"
)

// BenchmarkScan measures rows read per second from one hour of a click lake
// (8 files of 25,000 rows on a local directory): every column, the three a
// README command shows, and count by type.
func BenchmarkScan(b *testing.B) {
	const files, perFile = 8, 25_000
	st := newStore(b)
	for f := 0; f < files; f++ {
		ctx := context.Background()
		obj, err := st.Create(ctx, fmt.Sprintf("clicks/dt=2024-05-01/hr=10/part-%d-00000000000000000000-%020d.parquet", f, perFile-1))
		if err != nil {
			b.Fatal(err)
		}
		w, err := parquet.NewWriter(obj, schemas.Click, parquet.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < perFile; i++ {
			ev := fmt.Sprintf(`{"event_id":"%032x","type":%q,"url":"https://shop.example/p/%d","title":"Product %d","anonymous_id":"a%d","ts":%q,"user_agent":"Mozilla/5.0 (X11; Linux x86_64)","properties":{"n":%d}}`,
				f*perFile+i, []string{"page_view", "click", "add_to_cart"}[i%3], i%500, i%500, i%1000, hour10.Add(time.Duration(i)*100*time.Millisecond).Format(time.RFC3339Nano), i)
			if err := w.Append([]byte(ev), hour10); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		if err := obj.Publish(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name    string
		columns []string
	}{
		{"all-columns", nil},
		{"three-columns", []string{"received_at", "type", "url"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s, err := Open(context.Background(), st, Query{Topic: "clicks", Columns: c.columns})
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				if err := s.Scan(context.Background(), func([]any) error { n++; return nil }); err != nil || n != files*perFile {
					b.Fatalf("%d rows, %v", n, err)
				}
			}
			b.ReportMetric(float64(b.N*files*perFile)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	b.Run("count-by-type", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			groups, err := Count(context.Background(), st, Query{Topic: "clicks"}, "type")
			if err != nil || len(groups) != 3 {
				b.Fatalf("%v, %v", groups, err)
			}
		}
		b.ReportMetric(float64(b.N*files*perFile)/b.Elapsed().Seconds(), "rows/s")
	})
}
