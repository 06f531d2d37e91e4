package ship

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RecordOverhead is what the buffer counts for a record beyond its key,
// value and headers: the kgo.Record, the client's slot for it, the caller's
// own state (the tailer's line record and its place in the file's
// bookkeeping) and the collector's room around them. Measured on a full
// tailer buffer with the broker down: the process grew by about 900 bytes
// per 390-byte line. Counting only the bytes made a "5 MiB" buffer cost
// 11.5 MiB.
const RecordOverhead = 512

// RecordCost is the room rec takes in the buffer while it is not yet
// acknowledged (see Config.MaxBufferedBytes).
func RecordCost(rec *kgo.Record) int64 {
	return recordBytes(rec) + RecordOverhead
}

// recordBytes is rec's key, value and headers: what goes to the broker.
func recordBytes(rec *kgo.Record) int64 {
	n := len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// room is the producer buffer's budget. A record takes its cost before it
// is handed to the client and gives it back when its promise runs, so what
// records hold never exceeds the limit. kgo's own byte bound counts only
// keys, values and headers, which for log lines is under half of what they
// hold.
type room struct {
	limit   int64
	used    atomic.Int64
	waiters atomic.Int32
	freed   chan struct{} // wakes one waiter; capacity 1
}

func newRoom(limit int) *room {
	return &room{limit: int64(limit), freed: make(chan struct{}, 1)}
}

// tryTake takes n if it fits. A record larger than the whole budget fits
// when nothing else is held, so it cannot wait forever.
func (r *room) tryTake(n int64) bool {
	for {
		u := r.used.Load()
		if u > 0 && u+n > r.limit {
			return false
		}
		if r.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// take waits until n fits or ctx ends.
func (r *room) take(ctx context.Context, n int64) error {
	if r.tryTake(n) {
		return nil
	}
	r.waiters.Add(1)
	defer r.waiters.Add(-1)
	for {
		// Registered as a waiter before this check, so a give after it
		// leaves a wake-up in freed.
		if r.tryTake(n) {
			if r.waiters.Load() > 1 {
				r.wake() // what was freed may fit another waiter too
			}
			return nil
		}
		select {
		case <-r.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// hold takes n whether or not it fits: for a record that fails before it
// took its room, since its promise gives the room back all the same.
func (r *room) hold(n int64) { r.used.Add(n) }

func (r *room) give(n int64) {
	r.used.Add(-n)
	if r.waiters.Load() > 0 {
		r.wake()
	}
}

func (r *room) wake() {
	select {
	case r.freed <- struct{}{}:
	default:
	}
}
