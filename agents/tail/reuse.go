package tail

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The shipping path reuses its memory: every shipped line used to cost a
// record struct and a value of its own, so the tailer allocated about
// four times what it read, and under the memory limit (pipeline/cli) a full
// producer buffer meant a collection every few MiB read, with the runtime
// handing pages back to the kernel and faulting them in again. Records and
// value space now come back once the broker has acknowledged their line.

// recycler keeps acknowledged objects for the loop to reuse. Any goroutine
// may put; only the loop gets and drops. An object is either in flight or
// here, and the loop makes a new one only when none is here, so together
// they never outgrow the most ever in flight at once (bounded by the
// producer's buffer). The loop drops them whenever it has nothing to read,
// so an idle tailer gives the memory back.
type recycler[T any] struct {
	spare []*T // owned by the loop; refilled from free all at once
	// The pads keep spare, which the loop changes on every get, off the
	// cache line put locks: sharing one made each put's lock a cache miss,
	// which made put the tailer's costliest function after lz4.
	_ [64]byte

	mu   sync.Mutex // guards the following
	free []*T
	_    [64]byte
}

func (r *recycler[T]) put(x *T) {
	r.mu.Lock()
	r.free = append(r.free, x)
	r.mu.Unlock()
}

// get returns a kept object, or nil. It takes the lock once per batch of
// acknowledgements rather than once per line.
func (r *recycler[T]) get() *T {
	if len(r.spare) == 0 {
		r.mu.Lock()
		r.spare, r.free = r.free, r.spare[:0]
		r.mu.Unlock()
	}
	n := len(r.spare)
	if n == 0 {
		return nil
	}
	x := r.spare[n-1]
	r.spare[n-1] = nil
	r.spare = r.spare[:n-1]
	return x
}

func (r *recycler[T]) drop() {
	r.spare = nil
	r.mu.Lock()
	r.free = nil
	r.mu.Unlock()
}

// Record values are laid end to end in chunks, in read order, so they
// cost their exact size (a value allocated alone is rounded up to a size
// class) and one allocation per chunk. Lines of a file are acknowledged
// roughly in order, so a chunk comes free soon after its last line.
const (
	chunkSize = 64 << 10
	// maxChunkedValue is the largest value put in a chunk; longer ones
	// get their own allocation, so one long line cannot waste a chunk.
	maxChunkedValue = chunkSize / 8
)

// valueChunk holds the values of consecutive lines.
type valueChunk struct {
	buf  []byte       // the part handed out so far; only the loop changes it
	refs atomic.Int32 // values not yet released, plus one while the loop fills it
	pool *recycler[valueChunk]
}

// unref releases one value (or the loop's hold) and recycles the chunk
// once nothing refers to it.
func (c *valueChunk) unref() {
	if c.refs.Add(-1) == 0 {
		c.pool.put(c)
	}
}

// valueSpace returns room for an n-byte value and the chunk it is in (nil
// for a value allocated alone). The chunk stays referenced until the value
// is released.
func (t *Tailer) valueSpace(n int) ([]byte, *valueChunk) {
	if n > maxChunkedValue {
		return make([]byte, n), nil
	}
	c := t.chunk
	if c == nil || len(c.buf)+n > cap(c.buf) {
		if c != nil {
			c.unref() // the loop's hold
		}
		if c = t.chunks.get(); c == nil {
			c = &valueChunk{buf: make([]byte, 0, chunkSize), pool: &t.chunks}
		}
		c.buf = c.buf[:0]
		c.refs.Store(1)
		t.chunk = c
	}
	at := len(c.buf)
	c.buf = c.buf[:at+n]
	c.refs.Add(1)
	return c.buf[at : at+n : at+n], c
}

// newLine returns a reused lineRecord, or a new one.
func (t *Tailer) newLine() *lineRecord {
	if lr := t.lines.get(); lr != nil {
		return lr
	}
	lr := &lineRecord{t: t}
	lr.ack = t.producer.Wrap(lr.settled)
	return lr
}

// release keeps an acknowledged lineRecord, and its value space, for
// reuse. kgo reads nothing of a record after its promise (the
// acknowledgement) returns.
func (lr *lineRecord) release() {
	if lr.chunk != nil {
		lr.chunk.unref()
	}
	lr.rec, lr.h, lr.chunk = kgo.Record{}, nil, nil
	lr.t.lines.put(lr)
}
