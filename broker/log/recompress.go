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
// The codec work is internal/recordbatch's (Decoder.Recompress): it decodes
// through the log's Decoder, bounded by millrace.max.decompressed.bytes,
// and streams into the encoder, so a recompression holds no decoded copy
// of the batch except for the snappy codec. A batch that grows past
// max.message.bytes (a compressed batch stored uncompressed) is refused
// with MESSAGE_TOO_LARGE, as Kafka refuses it, as soon as its output
// passes the bound.
//
// Replicated appends copy the leader's stored batch and are never
// recompressed; neither are batches already in the target codec.

import (
	"errors"
	"fmt"

	"millrace/internal/recordbatch"
)

// recompressBatches returns b's batches (headers being their headers) with
// every produced batch whose codec is not the one cfg.CompressionType
// asks for recompressed. It returns b and headers themselves when no batch
// needs it, and a new buffer otherwise: b is left as it was.
func recompressBatches(d *recordbatch.Decoder, b []byte, headers []BatchHeader, cfg Config) ([]byte, []BatchHeader, error) {
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
			if out, err = d.Recompress(out, h, batch, target, cfg.MaxMessageBytes, cfg.MaxDecompressedBytes); err != nil {
				if errors.Is(err.Err, recordbatch.ErrRecompressedTooLarge) {
					err = grownTooLarge(cfg)
				}
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
		h := recordbatch.HeaderAt(out[pos:])
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
