package srclient

import (
	"context"
	"testing"

	"millrace/schemas/srclient/srtest"
)

// benchClient is a client of a fresh in-process registry with avroClick
// registered (which puts its ID in the client's cache), and a click framed
// with that ID.
func benchClient(b *testing.B) (*Client, int, []byte) {
	b.Helper()
	reg := srtest.Start(b)
	c, err := New(Config{URLs: []string{reg.URL}})
	if err != nil {
		b.Fatal(err)
	}
	sub, err := c.Register(context.Background(), "clicks-value", Registration{Text: avroClick})
	if err != nil {
		b.Fatal(err)
	}
	framed, err := EncodeWith(sub.ID, sub.Schema, map[string]any{"url": "https://shop.example/p/42", "n": 42.0})
	if err != nil {
		b.Fatal(err)
	}
	return c, sub.ID, framed
}

// reportLookups reports b.N over the benchmark's elapsed time as
// lookups/s: with RunParallel, every goroutine's lookups together.
func reportLookups(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

// BenchmarkDecodeCached decodes a framed Avro click whose schema ID is in
// the cache: the header, the ID's look-up under the client's lock, and the
// Avro decode into Go values, with no request to the registry. parallel
// runs it from GOMAXPROCS goroutines at once on one client, as a sink's
// workers share none but a beacon's handlers share one: lookups/s there
// against serial's shows whether the cache's lock serializes them.
func BenchmarkDecodeCached(b *testing.B) {
	c, id, framed := benchClient(b)
	ctx := context.Background()
	if got, _, _, err := c.Decode(ctx, framed); err != nil || got != id {
		b.Fatalf("Decode: ID %d, %v; want %d", got, err, id)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := c.Decode(ctx, framed); err != nil {
				b.Fatal(err)
			}
		}
		reportLookups(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, _, err := c.Decode(ctx, framed); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportLookups(b)
	})
}

// BenchmarkLookupCached is SchemaByID of a cached ID alone, without the
// decode: the cost of the cache and its lock, serial and from GOMAXPROCS
// goroutines at once.
func BenchmarkLookupCached(b *testing.B) {
	c, id, _ := benchClient(b)
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.SchemaByID(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		reportLookups(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.SchemaByID(ctx, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportLookups(b)
	})
}
