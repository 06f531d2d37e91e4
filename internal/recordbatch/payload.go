package recordbatch

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DecodePayload returns a batch's record bytes (the payload after the
// header, decompressed), refusing more than limit; an uncompressed payload
// is body itself. The partition log's cleaner opens batches with it.
func (d *Decoder) DecodePayload(codec int, body []byte, limit int64) ([]byte, error) {
	if codec == CodecNone {
		return body, nil
	}
	if codec == CodecSnappy {
		// The walker knows both snappy framings and bounds them up front.
		w := d.walker()
		defer d.putWalker(w)
		if err := w.openSnappy(body, limit); err != nil {
			return nil, err
		}
		return bytes.Clone(w.snappy), nil
	}
	var r io.Reader
	switch codec {
	case CodecGzip:
		g, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, corrupt("gzip", err)
		}
		defer g.Close()
		r = g
	case CodecLZ4:
		r = lz4.NewReader(bytes.NewReader(body))
	case CodecZstd:
		d, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, corrupt("zstd", err)
		}
		defer d.Close()
		r = d
	default:
		return nil, fmt.Errorf("%w: unknown compression codec %d", ErrInvalidRecord, codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, corrupt(CodecName(codec), err)
	}
	if int64(len(out)) > limit {
		return nil, tooLarge(limit)
	}
	return out, nil
}

// CodecName names a codec number as compression.type spells it.
func CodecName(codec int) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[codec]
}

// EncodePayload compresses records with codec, as a producer of that codec
// would.
func EncodePayload(codec int, records []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case CodecNone:
		return records, nil
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(records); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecSnappy:
		// Raw snappy, which every Kafka client reads (the Java client reads
		// the xerial framing and raw blocks alike).
		return snappy.Encode(nil, records), nil
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(records); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecZstd:
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		out := e.EncodeAll(records, nil)
		return out, e.Close()
	default:
		return nil, fmt.Errorf("%w: unknown compression codec %d", ErrInvalidRecord, codec)
	}
	return buf.Bytes(), nil
}
