package otlp

import (
	"errors"
	"io"
	"sync/atomic"
)

// errReadingFull is a body read refused because the bodies being read hold
// the receiver's whole reading budget.
var errReadingFull = errors.New("the receiver is reading as many request bodies as it may hold; retry")

// readingBudget bounds the bytes of request bodies being read, before a
// request takes one of the MaxInFlight slots. Bodies are read first so
// that a slow sender holds none of the slots the others need (a slot is
// held only while a body is decoded and its records published), and the
// budget is taken as bytes arrive, so a slow sender holds what it sent,
// not what it announced.
type readingBudget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes; false when they would pass max.
func (b *readingBudget) take(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *readingBudget) give(n int64) { b.used.Add(-n) }

// budgetReader reads from r, taking from budget what it reads; held is
// what it took, to give back once the body is no longer needed.
type budgetReader struct {
	r      io.Reader
	budget *readingBudget
	held   int64
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 {
		if !br.budget.take(int64(n)) {
			return 0, errReadingFull
		}
		br.held += int64(n)
	}
	return n, err
}
