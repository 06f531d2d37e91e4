package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// walker holds one walk's decoders and buffers; they are pooled so a walk
// allocates nothing once the pool is warm.
type walker struct {
	stream recordStream
	window []byte
	src    bytes.Reader
	gzip   *gzip.Reader
	lz4    *lz4.Reader
	zstd   *zstd.Decoder
	snappy []byte // a whole decoded snappy payload
}

// Decoder decodes compressed batches under its owner's limits: it bounds
// how many are decoded at once and pools the decoders and buffers, so a
// warm walk allocates nothing. Each owner (a broker's partition logs, a
// sink worker) makes its own: the decoding of one never waits on the
// other's. A Decoder is safe for concurrent use.
type Decoder struct {
	// slots bounds how many compressed batches are decoded at once. A
	// decoder's memory is set by the frame (a zstd window up to
	// zstdMaxWindow, lz4 blocks up to 4 MiB, a snappy payload up to
	// snappyMaxRatio times its size), so without a bound every connection
	// could make the broker hold that much at the same time. Decoding is
	// CPU work: more of it at once than there are CPUs would not finish
	// sooner.
	slots    chan struct{}
	walkers  sync.Pool // of *walker
	encoders sync.Pool // of *encoder (recompress.go)
}

// NewDecoder returns a Decoder that decodes at most concurrency compressed
// batches at once; concurrency <= 0 means as many as there are CPUs to
// run Go code (GOMAXPROCS), and at least two.
func NewDecoder(concurrency int) *Decoder {
	if concurrency <= 0 {
		concurrency = max(runtime.GOMAXPROCS(0), 2)
	}
	d := &Decoder{slots: make(chan struct{}, concurrency)}
	d.walkers.New = func() any { return new(walker) }
	d.encoders.New = func() any { return new(encoder) }
	return d
}

// acquire takes a decoding slot, waiting for one; release gives it back.
func (d *Decoder) acquire() { d.slots <- struct{}{} }
func (d *Decoder) release() { <-d.slots }

// walker returns a pooled walker; putWalker returns it.
func (d *Decoder) walker() *walker { return d.walkers.Get().(*walker) }
func (d *Decoder) putWalker(w *walker) {
	w.reset()
	d.walkers.Put(w)
}

// walkProduced walks the records of a produced batch whose header h has
// passed the header checks, body being the bytes after the header, and
// returns the largest record timestamp (-1 when none is larger than -1).
func (d *Decoder) walkProduced(h Header, body []byte, rules *Rules) (int64, *Error) {
	if h.LogAppendTime() && rules.RefuseLogAppendTime {
		return 0, &Error{Reason: "a producer must not set the LogAppendTime timestamp type", Err: ErrInvalidTimestamp}
	}
	if h.Compression() != 0 {
		d.acquire()
		defer d.release()
	}
	w := d.walker()
	defer d.putWalker(w)
	if err := w.open(h.Compression(), body, rules.MaxDecompressed); err != nil {
		return 0, err
	}
	return w.stream.walk(h, rules)
}

// open points the stream at the batch's decoded records.
func (w *walker) open(codec int, body []byte, limit int64) *Error {
	if codec == 0 {
		w.stream.resetBytes(body)
		return nil
	}
	if len(body) == 0 {
		return &Error{Reason: "compressed batch has no payload", Err: ErrCorrupt}
	}
	if w.window == nil {
		w.window = make([]byte, walkWindow)
	}
	w.src.Reset(body)
	var src io.Reader
	switch codec {
	case CodecGzip:
		if w.gzip == nil {
			w.gzip = new(gzip.Reader)
		}
		if err := w.gzip.Reset(&w.src); err != nil {
			return corrupt("gzip", err)
		}
		src = w.gzip
	case CodecSnappy:
		return w.openSnappy(body, limit)
	case CodecLZ4:
		if w.lz4 == nil {
			w.lz4 = lz4.NewReader(nil)
		}
		w.lz4.Reset(&w.src)
		src = w.lz4
	case CodecZstd:
		if w.zstd == nil {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(zstdMaxWindow),
				// Never decode a small input whole: it would expand a bomb past our bound.
				zstd.WithDecodeBuffersBelow(0))
			if err != nil {
				return corrupt("zstd", err)
			}
			w.zstd = d
		}
		if err := w.zstd.Reset(&w.src); err != nil {
			return corrupt("zstd", err)
		}
		src = w.zstd
	}
	w.stream.reset(src, w.window, limit)
	return nil
}

// openSnappy decodes a snappy payload, raw or xerial-framed, at once: the
// block format has no streaming decoder. Each block states its decoded
// length up front, so the bound is checked before anything is decoded.
// DecodeStrict refuses the s2 extensions that Java and librdkafka
// consumers cannot read.
func (w *walker) openSnappy(body []byte, limit int64) *Error {
	out := w.snappy[:0]
	decode := func(block []byte) *Error {
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return corrupt("snappy", err)
		}
		if n > snappyMaxRatio*len(block) {
			return &Error{Reason: fmt.Sprintf("snappy: a block of %d bytes claims to decode to %d", len(block), n), Err: ErrCorrupt}
		}
		if int64(len(out))+int64(n) > limit {
			return tooLarge(limit)
		}
		if cap(out)-len(out) < n {
			out = append(out[:cap(out)], make([]byte, n)...)[:len(out)]
		}
		if _, err := snappy.DecodeStrict(out[len(out):len(out)+n], block); err != nil {
			return corrupt("snappy", err)
		}
		out = out[:len(out)+n]
		return nil
	}
	if len(body) >= xerialHeaderSize && bytes.Equal(body[:len(xerialMagic)], xerialMagic) {
		for rest := body[xerialHeaderSize:]; len(rest) > 0; {
			if len(rest) < 4 {
				return &Error{Reason: "snappy: xerial block length cut short", Err: ErrCorrupt}
			}
			n := binary.BigEndian.Uint32(rest)
			if uint64(n) > uint64(len(rest)-4) {
				return &Error{Reason: fmt.Sprintf("snappy: xerial block of %d bytes but %d remain", n, len(rest)-4), Err: ErrCorrupt}
			}
			if err := decode(rest[4 : 4+n]); err != nil {
				return err
			}
			rest = rest[4+n:]
		}
	} else if err := decode(body); err != nil {
		return err
	}
	w.snappy = out
	w.stream.resetBytes(out)
	return nil
}

// reset drops every reference to the caller's bytes (a recycled request
// frame), before w goes back to the pool.
func (w *walker) reset() {
	w.src.Reset(nil)
	w.stream = recordStream{}
	if cap(w.snappy) > snappyKeep {
		// One huge snappy batch should not pin its buffer in the pool.
		w.snappy = nil
	}
}

func corrupt(codec string, err error) *Error {
	return &Error{Reason: fmt.Sprintf("cannot decompress the %s payload: %v", codec, err), Err: ErrCorrupt}
}

func tooLarge(limit int64) *Error {
	return &Error{Reason: fmt.Sprintf("the batch decompresses to more than millrace.max.decompressed.bytes (%d)", limit), Err: ErrTooLarge}
}
