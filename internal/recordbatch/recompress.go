package recordbatch

// Recompression, as Kafka's LogValidator does it when a topic's
// compression.type differs from a produced batch's codec: the payload is
// decoded and its records written again with the target codec.
//
// Only the payload changes. The records' bytes are kept verbatim (their
// offset and timestamp deltas, keys, values and headers), and so is the
// header but for the length, the attributes' codec bits and the CRC-32C:
// base offset, lastOffsetDelta, first and max timestamps, producer ID,
// epoch and base sequence, the transactional flag and the timestamp type.
// Kafka rebuilds the batch record by record (MemoryRecordsBuilder), which
// for a batch as producers write it gives the same fields.
//
// Decoding goes through the Decoder's pooled walkers and its slots, and
// streams through the walker's window into the encoder, so a
// recompression holds no decoded copy of the batch except for the snappy
// codec, whose block format has no streaming encoder. Encoders are pooled
// too. Which batches are recompressed, and the refusal's wording, are the
// partition log's (its recompress.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Recompress appends batch (header h) to dst with its records encoded
// with codec target, decoding at most maxDecompressed bytes. What a
// decoder streams out is refused, with an *Error wrapping
// ErrRecompressedTooLarge, as soon as the batch passes maxBytes
// (max.message.bytes), so a small batch that expands is never held whole
// (a compressed batch on an uncompressed topic). On error dst is returned
// as it was.
func (d *Decoder) Recompress(dst []byte, h Header, batch []byte, target int, maxBytes int, maxDecompressed int64) ([]byte, *Error) {
	body := batch[HeaderSize:]
	start := len(dst)
	dst = append(dst, batch[:HeaderSize]...)
	out := appendWriter{b: dst, max: start + maxBytes}
	var err *Error
	if h.Compression() == CodecNone {
		err = d.encodeRecords(&out, target, body)
	} else {
		d.acquire()
		w := d.walker()
		if err = w.open(h.Compression(), body, maxDecompressed); err == nil {
			err = d.encodeStream(&out, target, &w.stream)
		}
		d.putWalker(w)
		d.release()
	}
	if err != nil {
		return dst[:start], err
	}
	dst = out.b
	sealBatch(dst[start:], target)
	return dst, nil
}

// sealBatch sets a rewritten batch's length, codec and CRC-32C.
func sealBatch(b []byte, codec int) {
	binary.BigEndian.PutUint32(b[PosLength:], uint32(len(b)-LengthOverhead))
	attrs := binary.BigEndian.Uint16(b[PosAttributes:])&^AttrCompressionMask | uint16(codec)
	binary.BigEndian.PutUint16(b[PosAttributes:], attrs)
	binary.BigEndian.PutUint32(b[PosCRC:], crc32.Checksum(b[PosAttributes:], castagnoli))
}

// ErrRecompressedTooLarge: a recompressed batch passed max.message.bytes.
var ErrRecompressedTooLarge = errors.New("recompressed batch exceeds max.message.bytes")

// appendWriter is an io.Writer that appends to b, refusing to make it
// longer than max (no bound when 0).
type appendWriter struct {
	b   []byte
	max int
}

func (w *appendWriter) Write(p []byte) (int, error) {
	if w.max > 0 && len(w.b)+len(p) > w.max {
		return 0, ErrRecompressedTooLarge
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// encodeRecords writes records, encoded with codec, to out.
func (d *Decoder) encodeRecords(out *appendWriter, codec int, records []byte) *Error {
	switch codec {
	case CodecNone:
		out.b = append(out.b, records...)
		return nil
	case CodecSnappy:
		out.b = appendSnappy(out.b, records)
		return nil
	}
	e := d.encoders.Get().(*encoder)
	defer d.putEncoder(e)
	if codec == CodecZstd {
		// One call for a whole input: no stream state to set up per batch.
		z, err := e.zstdEncoder()
		if err != nil {
			return compressFailed(CodecZstd, err)
		}
		out.b = z.EncodeAll(records, out.b)
		return nil
	}
	w, err := e.writer(codec, out)
	if err == nil {
		_, err = w.Write(records)
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return compressFailed(codec, err)
	}
	return nil
}

// compressFailed is the refusal of a batch its encoder failed on, which
// happens only when the output passes max.message.bytes.
func compressFailed(codec int, err error) *Error {
	if errors.Is(err, ErrRecompressedTooLarge) {
		return &Error{Reason: err.Error(), Err: ErrRecompressedTooLarge}
	}
	return &Error{Reason: fmt.Sprintf("cannot compress the batch with %s: %v", CodecName(codec), err), Err: ErrCorrupt}
}

// encodeStream writes the decoded records s yields, encoded with codec, to
// out.
func (d *Decoder) encodeStream(out *appendWriter, codec int, s *recordStream) *Error {
	if codec == CodecSnappy {
		// The block format needs the whole input: gather it in a pooled buffer.
		e := d.encoders.Get().(*encoder)
		defer d.putEncoder(e)
		plain := appendWriter{b: e.plain[:0]}
		if err := s.drain(&plain); err != nil {
			return err
		}
		out.b = appendSnappy(out.b, plain.b)
		e.keepPlain(plain.b)
		return nil
	}
	if codec == CodecNone {
		return s.drain(out)
	}
	e := d.encoders.Get().(*encoder)
	defer d.putEncoder(e)
	w, err := e.writer(codec, out)
	if err != nil {
		return compressFailed(codec, err)
	}
	if err := s.drain(w); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return compressFailed(codec, err)
	}
	return nil
}

// drain writes every decoded byte of the stream to w.
func (s *recordStream) drain(w io.Writer) *Error {
	for {
		if s.fill(len(s.buf)) > 0 {
			if _, err := w.Write(s.buf[s.pos:s.end]); err != nil {
				return compressFailed(CodecNone, err)
			}
			s.pos = s.end
		}
		switch s.srcErr {
		case nil:
			continue
		case io.EOF:
			return nil
		case errDecompressedTooLarge:
			return tooLarge(s.limit)
		default:
			return &Error{Reason: fmt.Sprintf("cannot decompress the batch: %v", s.srcErr), Err: ErrCorrupt}
		}
	}
}

// appendSnappy appends src as one raw snappy block, which every Kafka
// client reads (the Java client reads raw blocks and the xerial framing
// alike), in s2's snappy-compatible fast mode: snappy.Encode's "better"
// mode took twice the CPU per record in BenchmarkProduceRecompress.
func appendSnappy(dst, src []byte) []byte {
	n := s2.MaxEncodedLen(len(src))
	start := len(dst)
	if cap(dst)-start < n {
		dst = append(dst[:cap(dst)], make([]byte, start+n-cap(dst))...)
	}
	enc := s2.EncodeSnappy(dst[start:start+n], src)
	return dst[:start+len(enc)]
}

// encoder holds one recompression's encoders, pooled: a zstd encoder
// allocates its tables once, an lz4 writer its block buffers.
type encoder struct {
	gzip  *gzip.Writer
	lz4   *lz4.Writer
	zstd  *zstd.Encoder
	plain []byte // decoded records gathered for snappy
}

// writer returns e's encoder for codec (gzip, lz4 or zstd) writing to out.
// Levels are the codecs' defaults, as a producer's: gzip 6, zstd 3, lz4
// fast with Kafka's 64 KiB blocks.
func (e *encoder) writer(codec int, out io.Writer) (io.WriteCloser, error) {
	switch codec {
	case CodecGzip:
		if e.gzip == nil {
			e.gzip = gzip.NewWriter(out)
		} else {
			e.gzip.Reset(out)
		}
		return e.gzip, nil
	case CodecLZ4:
		if e.lz4 == nil {
			w := lz4.NewWriter(out)
			if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
				return nil, err
			}
			e.lz4 = w
		} else {
			e.lz4.Reset(out)
		}
		return e.lz4, nil
	case CodecZstd:
		z, err := e.zstdEncoder()
		if err != nil {
			return nil, err
		}
		z.Reset(out)
		return z, nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// zstdEncoder returns e's zstd encoder, made on first use.
func (e *encoder) zstdEncoder() (*zstd.Encoder, error) {
	if e.zstd == nil {
		z, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, err
		}
		e.zstd = z
	}
	return e.zstd, nil
}

// putEncoder points e's encoders away from the last batch's buffer, so the
// pool keeps no batch alive, and returns e to the pool.
func (d *Decoder) putEncoder(e *encoder) {
	if e.gzip != nil {
		e.gzip.Reset(io.Discard)
	}
	if e.lz4 != nil {
		e.lz4.Reset(io.Discard)
	}
	if e.zstd != nil {
		e.zstd.Reset(io.Discard)
	}
	d.encoders.Put(e)
}

// keepPlain keeps the snappy gathering buffer for the next use unless it
// grew past what a pooled walker keeps too.
func (e *encoder) keepPlain(b []byte) {
	if cap(b) > snappyKeep {
		b = nil
	}
	e.plain = b[:0]
}
