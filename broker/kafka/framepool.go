package kafka

import (
	"math/bits"
	"sync"
)

// Produce request frames are the broker's big allocations: a client batching
// well sends frames of up to a megabyte, hundreds a second, and a fresh
// buffer for each costs an allocation, zeroing, growth copies, garbage
// collection and the scavenger returning and re-faulting the pages. Their
// buffers are recycled instead, once the Produce handler is done with them.
//
// Only Produce frames go back. A Produce request is decoded in place
// (UnsafeReadFrom): its topic names and record batches alias the frame, so
// whatever the Produce path keeps after the handler returns must be a copy.
// It keeps topic names in one place, cloned: the per-topic metric labels
// (brokerMetrics.produced). Everything else it touches is a lookup (cluster
// model, replication, data waiters), is written out before it returns
// (segment WriteAt, slog's synchronous handlers, the encoded response) or is
// a number (the log's producer state). Other requests are decoded with copied
// strings, though their byte slices (group member metadata, assignments)
// still alias the frame; their frames are left to the garbage collector.
//
// A pooled buffer is used for a frame only when one big enough is already
// free; otherwise the frame grows with the bytes that arrive (readFrame), so
// a size prefix alone still cannot make the broker allocate.

const (
	// frameClassMin is the capacity of the smallest pooled buffers.
	frameClassMin = 4 << 10
	// frameClasses is the number of size classes, doubling from
	// frameClassMin: 4 KiB to 64 MiB.
	frameClasses = 15
)

// framePoolMaxBytes bounds the capacity of the free buffers kept. A
// sync.Pool would not do: a garbage collection empties it, and in a broker
// whose heap is small every pool miss (a fresh frame of megabytes) brings
// the next collection closer, which empties the pool again.
const framePoolMaxBytes = 32 << 20

// frameBuffers are the free buffers.
var frameBuffers framePool

// framePool keeps free frame buffers by class: class k holds buffers whose
// capacity is at least frameClassMin<<k and less than twice that.
type framePool struct {
	mu    sync.Mutex // guards the following
	free  [frameClasses][][]byte
	bytes int // total capacity of free
}

// frameBuffer returns a free pooled buffer of length size, or nil when there
// is none big enough.
func frameBuffer(size int) []byte {
	if size <= 0 || size > frameClassMin<<(frameClasses-1) {
		return nil
	}
	k := 0
	if size > frameClassMin {
		k = bits.Len(uint(size-1)) - bits.Len(uint(frameClassMin-1))
	}
	p := &frameBuffers
	p.mu.Lock()
	defer p.mu.Unlock()
	// A client's frames vary around a size (a batch of up to
	// batch.max.bytes plus headers straddles a power of two), so a buffer
	// one class up, at most four times the frame, serves too.
	for last := min(k+2, frameClasses); k < last; k++ {
		if n := len(p.free[k]); n > 0 {
			b := p.free[k][n-1]
			p.free[k][n-1] = nil
			p.free[k] = p.free[k][:n-1]
			p.bytes -= cap(b)
			return b[:size]
		}
	}
	return nil
}

// frameCapacity is the capacity to allocate for a frame buffer that must
// hold n bytes: n rounded up to a class size, so that the buffer fits its
// class exactly when it is recycled; small and huge buffers as they are.
func frameCapacity(n int) int {
	if n <= frameClassMin || n > frameClassMin<<(frameClasses-1) {
		return n
	}
	return 1 << bits.Len(uint(n-1))
}

// recycleFrame makes a frame's buffer free for reuse, unless the pool is
// full. The caller must hold no reference into it.
func recycleFrame(frame []byte) {
	c := cap(frame)
	if c < frameClassMin {
		return
	}
	// The largest class the buffer satisfies whole.
	k := min(bits.Len(uint(c))-bits.Len(uint(frameClassMin)), frameClasses-1)
	p := &frameBuffers
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bytes+c > framePoolMaxBytes {
		return
	}
	p.free[k] = append(p.free[k], frame[:0])
	p.bytes += c
}
