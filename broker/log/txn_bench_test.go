package log

import (
	"testing"
	"time"
)

// BenchmarkTxnMarker measures one transaction on a partition: its batch
// and its marker; an abort also appends to the segment's .txnindex (no
// fsync: it is fsynced with the segment). Medians of 7 alternating runs of
// 2000 on a shared 2-core machine: abort 46 us (2.67 ms while each abort
// rewrote the index with fsyncs), commit 52 us (59 us).
func BenchmarkTxnMarker(b *testing.B) {
	for _, commit := range []bool{true, false} {
		name := "abort"
		if commit {
			name = "commit"
		}
		b.Run(name, func(b *testing.B) {
			l := openTest(b, b.TempDir(), DefaultConfig(), options{})
			defer l.Close()
			for i := range int64(b.N) {
				v, err := l.ValidateProduce(txnBatch(i+1, 0, 0, 1), time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.AppendValidated(v, 0); err != nil {
					b.Fatal(err)
				}
				if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: i + 1, Commit: commit}, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAbortedTransactions measures the read_committed fetch's lookup
// of aborted transactions in a partition of 100 segments with 10 aborts
// each, for a range near the end.
func BenchmarkAbortedTransactions(b *testing.B) {
	l := openTest(b, b.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	for s := range int64(100) {
		for i := range int64(10) {
			id := s*10 + i + 1
			v, err := l.ValidateProduce(txnBatch(id, 0, 0, 1), time.Now())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.AppendValidated(v, 0); err != nil {
				b.Fatal(err)
			}
			if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: id}, 0); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil {
			b.Fatal(err)
		}
	}
	from := l.EndOffset() - 40
	b.ResetTimer()
	for range b.N {
		got, err := l.AbortedTransactions(from, from+40)
		if err != nil || len(got) != 20 {
			b.Fatalf("%d aborted, %v", len(got), err)
		}
	}
}
