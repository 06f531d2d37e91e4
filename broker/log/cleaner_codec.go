package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/recordbatch"
)

// The cleaner's record codec: it opens a stored batch into its records and
// writes a batch holding a subset of them. A rewritten batch keeps the
// original header (base offset, lastOffsetDelta, timestamps, producer ID,
// epoch and base sequence), so every kept record keeps its offset and
// timestamp deltas verbatim and the producer's sequence numbers still end
// where they did; only the length, CRC, record count and payload change,
// as in Kafka's MemoryRecords.filterTo.

// cleanerRecord is one record of a batch being cleaned.
type cleanerRecord struct {
	raw       []byte // the whole encoded record, length prefix included
	key       []byte // nil for a record without key
	tombstone bool   // a null value
	offset    int64
	timestamp int64
}

// openRecords decodes the records of a stored batch b (header h), at most
// limit bytes of them once decompressed through d. The records' slices point into the
// returned buffer or b.
func openRecords(d *recordbatch.Decoder, h BatchHeader, b []byte, limit int64) ([]cleanerRecord, error) {
	body := b[batchHeaderSize:h.Size()]
	raw, err := d.DecodePayload(h.Compression(), body, limit)
	if err != nil {
		return nil, err
	}
	records := make([]cleanerRecord, 0, h.Records)
	for pos := 0; pos < len(raw); {
		length, n := binary.Varint(raw[pos:])
		if n <= 0 || length < 0 || int64(len(raw)-pos-n) < length {
			return nil, fmt.Errorf("%w: record at byte %d of batch %d is cut short", ErrCorruptBatch, pos, h.BaseOffset)
		}
		end := pos + n + int(length)
		var r kmsg.Record
		if err := r.UnsafeReadFrom(raw[pos:end]); err != nil {
			return nil, fmt.Errorf("%w: record at byte %d of batch %d: %v", ErrCorruptBatch, pos, h.BaseOffset, err)
		}
		ts := h.FirstTimestamp + r.TimestampDelta64
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		records = append(records, cleanerRecord{raw: raw[pos:end], key: r.Key, tombstone: r.Value == nil,
			offset: h.BaseOffset + int64(r.OffsetDelta), timestamp: ts})
		pos = end
	}
	if len(records) != int(h.Records) {
		return nil, fmt.Errorf("%w: batch %d holds %d records, its header says %d", ErrCorruptBatch, h.BaseOffset, len(records), h.Records)
	}
	return records, nil
}

// rebuildBatch returns the batch b (header h) holding only kept, appended
// to dst. An empty kept list yields a batch without records, which Kafka's
// cleaner also writes to keep a producer's last sequence number in the log;
// it is written uncompressed, as there is nothing to compress.
func rebuildBatch(dst []byte, h BatchHeader, b []byte, kept []cleanerRecord) ([]byte, error) {
	var records []byte
	for _, r := range kept {
		records = append(records, r.raw...)
	}
	codec := h.Compression()
	if len(kept) == 0 {
		codec = codecNone
	}
	payload, err := recordbatch.EncodePayload(codec, records)
	if err != nil {
		return dst, fmt.Errorf("log: compressing cleaned batch %d: %w", h.BaseOffset, err)
	}
	start := len(dst)
	dst = append(dst, b[:batchHeaderSize]...)
	dst = append(dst, payload...)
	out := dst[start:]
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-batchLengthOverhead))
	attrs := binary.BigEndian.Uint16(out[offAttributes:])&^attrCompressionMask | uint16(codec)
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(out[offRecordCount:], uint32(len(kept)))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return dst, nil
}
