package log

// Recompression on append (compression.type other than "producer"), as
// Kafka's LogValidator does when the source and target codecs differ: a
// produced batch of another codec is decoded and its records written again
// with the topic's codec before the batch is appended.
//
// Only the payload changes. The records' bytes are kept verbatim (their
// offset and timestamp deltas, keys, values and headers), and so is the
// header but for the length, the attributes' codec bits and the CRC-32C:
// base offset, lastOffsetDelta, first and max timestamps, producer ID,
// epoch and base sequence, the transactional flag and the timestamp type.
// Kafka rebuilds the batch record by record (MemoryRecordsBuilder), which
// for a batch as producers write it gives the same fields.
//
// Control batches are left as they are: Kafka does not compress control
// records unless they are written compressed, producers cannot write
// them, and the transaction markers this broker writes are uncompressed.
//
// Decoding goes through the validator's pooled walkers and decodeSlots
// (validate_records.go), bounded by millrace.max.decompressed.bytes, and
// streams through the walker's window into the encoder, so a recompression
// holds no decoded copy of the batch except for the snappy codec, whose
// block format has no streaming encoder. Encoders are pooled too. A batch
// that grows past max.message.bytes (a compressed batch stored
// uncompressed) is refused with MESSAGE_TOO_LARGE, as Kafka refuses it,
// as soon as its output passes the bound.
//
// Replicated appends copy the leader's stored batch and are never
// recompressed; neither are batches already in the target codec.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// recompressBatches returns b's batches (headers being their headers) with
// every produced batch whose codec is not the one cfg.CompressionType
// asks for recompressed. It returns b and headers themselves when no batch
// needs it, and a new buffer otherwise: b is left as it was.
func recompressBatches(b []byte, headers []BatchHeader, cfg Config) ([]byte, []BatchHeader, error) {
	target := cfg.targetCodec()
	if target < 0 || !needsRecompression(headers, target) {
		return b, headers, nil
	}
	// Room for what an encoder may add to incompressible records (snappy's
	// worst case is about a sixth), so the output is allocated once.
	out := make([]byte, 0, len(b)+len(b)/6+64*len(headers))
	pos := 0
	for _, h := range headers {
		batch := b[pos : pos+h.Size()]
		start := len(out)
		if h.Control() || h.Compression() == target {
			out = append(out, batch...)
		} else {
			var err *BatchError
			if out, err = recompressBatch(out, h, batch, target, cfg); err != nil {
				err.Position = pos
				return nil, nil, err
			}
			if len(out)-start > cfg.MaxMessageBytes {
				err := grownTooLarge(cfg)
				err.Position = pos
				return nil, nil, err
			}
		}
		pos += h.Size()
	}
	rewritten := make([]BatchHeader, 0, len(headers))
	for pos := 0; pos < len(out); {
		h := parseHeader(out[pos:])
		rewritten = append(rewritten, h)
		pos += h.Size()
	}
	return out, rewritten, nil
}

func needsRecompression(headers []BatchHeader, target int) bool {
	for _, h := range headers {
		if !h.Control() && h.Compression() != target {
			return true
		}
	}
	return false
}

// grownTooLarge is the refusal of a batch that recompression made larger
// than max.message.bytes.
func grownTooLarge(cfg Config) *BatchError {
	return &BatchError{Reason: fmt.Sprintf("the batch once recompressed with %s (compression.type) exceeds max.message.bytes %d", cfg.CompressionType, cfg.MaxMessageBytes), Err: ErrBatchTooLarge}
}

// recompressBatch appends batch (header h) to dst with its records
// encoded with codec target, decoding at most cfg.MaxDecompressedBytes.
// What a decoder streams out is refused as soon as the batch passes
// max.message.bytes, so a small batch that expands is never held whole
// (a compressed batch on an uncompressed topic).
func recompressBatch(dst []byte, h BatchHeader, batch []byte, target int, cfg Config) ([]byte, *BatchError) {
	body := batch[batchHeaderSize:]
	start := len(dst)
	dst = append(dst, batch[:batchHeaderSize]...)
	out := appendWriter{b: dst, max: start + cfg.MaxMessageBytes}
	var err *BatchError
	if h.Compression() == codecNone {
		err = encodeRecords(&out, target, body)
	} else {
		decodeSlots <- struct{}{}
		w := walkers.Get().(*walker)
		if err = w.open(h.Compression(), body, cfg.MaxDecompressedBytes); err == nil {
			err = encodeStream(&out, target, &w.stream)
		}
		w.release()
		<-decodeSlots
	}
	if err != nil {
		if errors.Is(err.Err, errRecompressedTooLarge) {
			err = grownTooLarge(cfg)
		}
		return dst[:start], err
	}
	dst = out.b
	sealBatch(dst[start:], target)
	return dst, nil
}

// sealBatch sets a rewritten batch's length, codec and CRC-32C.
func sealBatch(b []byte, codec int) {
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-batchLengthOverhead))
	attrs := binary.BigEndian.Uint16(b[offAttributes:])&^attrCompressionMask | uint16(codec)
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// errRecompressedTooLarge: a recompressed batch passed max.message.bytes.
var errRecompressedTooLarge = errors.New("recompressed batch exceeds max.message.bytes")

// appendWriter is an io.Writer that appends to b, refusing to make it
// longer than max (no bound when 0).
type appendWriter struct {
	b   []byte
	max int
}

func (w *appendWriter) Write(p []byte) (int, error) {
	if w.max > 0 && len(w.b)+len(p) > w.max {
		return 0, errRecompressedTooLarge
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// encodeRecords writes records, encoded with codec, to out.
func encodeRecords(out *appendWriter, codec int, records []byte) *BatchError {
	switch codec {
	case codecNone:
		out.b = append(out.b, records...)
		return nil
	case codecSnappy:
		out.b = appendSnappy(out.b, records)
		return nil
	}
	e := encoders.Get().(*encoder)
	defer e.release()
	if codec == codecZstd {
		// One call for a whole input: no stream state to set up per batch.
		z, err := e.zstdEncoder()
		if err != nil {
			return compressFailed(codecZstd, err)
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
func compressFailed(codec int, err error) *BatchError {
	if errors.Is(err, errRecompressedTooLarge) {
		return &BatchError{Reason: err.Error(), Err: errRecompressedTooLarge}
	}
	return &BatchError{Reason: fmt.Sprintf("cannot compress the batch with %s: %v", codecName(codec), err), Err: ErrCorruptBatch}
}

// encodeStream writes the decoded records s yields, encoded with codec, to
// out.
func encodeStream(out *appendWriter, codec int, s *recordStream) *BatchError {
	if codec == codecSnappy {
		// The block format needs the whole input: gather it in a pooled buffer.
		e := encoders.Get().(*encoder)
		defer e.release()
		plain := appendWriter{b: e.plain[:0]}
		if err := s.drain(&plain); err != nil {
			return err
		}
		out.b = appendSnappy(out.b, plain.b)
		e.keepPlain(plain.b)
		return nil
	}
	if codec == codecNone {
		return s.drain(out)
	}
	e := encoders.Get().(*encoder)
	defer e.release()
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
func (s *recordStream) drain(w io.Writer) *BatchError {
	for {
		if s.fill(len(s.buf)) > 0 {
			if _, err := w.Write(s.buf[s.pos:s.end]); err != nil {
				return compressFailed(codecNone, err)
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
			return &BatchError{Reason: fmt.Sprintf("cannot decompress the batch: %v", s.srcErr), Err: ErrCorruptBatch}
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

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// writer returns e's encoder for codec (gzip, lz4 or zstd) writing to out.
// Levels are the codecs' defaults, as a producer's: gzip 6, zstd 3, lz4
// fast with Kafka's 64 KiB blocks.
func (e *encoder) writer(codec int, out io.Writer) (io.WriteCloser, error) {
	switch codec {
	case codecGzip:
		if e.gzip == nil {
			e.gzip = gzip.NewWriter(out)
		} else {
			e.gzip.Reset(out)
		}
		return e.gzip, nil
	case codecLZ4:
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
	case codecZstd:
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

// release points e's encoders away from the last batch's buffer, so the
// pool keeps no batch alive, and returns e to the pool.
func (e *encoder) release() {
	if e.gzip != nil {
		e.gzip.Reset(io.Discard)
	}
	if e.lz4 != nil {
		e.lz4.Reset(io.Discard)
	}
	if e.zstd != nil {
		e.zstd.Reset(io.Discard)
	}
	encoders.Put(e)
}

// keepPlain keeps the snappy gathering buffer for the next use unless it
// grew past what a pooled walker keeps too.
func (e *encoder) keepPlain(b []byte) {
	if cap(b) > snappyKeep {
		b = nil
	}
	e.plain = b[:0]
}
