package txn

import (
	"testing"
	"time"
)

// BenchmarkTransaction measures one transaction's coordinator work on the
// embedded store: a partition added, the commit decided, markers written
// (by a marker writer that does nothing) and the completion recorded.
func BenchmarkTransaction(b *testing.B) {
	f := newFixture(b)
	c := f.coordinator(b, nil)
	p, code := c.InitProducer("User:test", "bench", time.Minute, ProducerIDAndEpoch{ID: -1, Epoch: -1})
	if code != 0 {
		b.Fatal(code)
	}
	partitions := map[string][]int32{"t": {0}}
	b.ResetTimer()
	for range b.N {
		if code := c.AddPartitions("bench", p, partitions); code != 0 {
			b.Fatal(code)
		}
		if code := c.EndTransaction("bench", p, true); code != 0 {
			b.Fatal(code)
		}
		for m, _ := c.Describe("bench"); m.State != CompleteCommit; m, _ = c.Describe("bench") {
		}
	}
}
