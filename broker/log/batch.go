// Package log is millrace's partition log: an append-only sequence of Kafka v2
// record batches split into segments, with a sparse offset index and a time
// index per segment, crash recovery, retention and zero-copy reads.
//
// A partition directory <topic>-<partition>/ holds, per segment, the files
// <20-digit base offset>.log, .index and .timeindex, plus small checkpoint
// files (recovery point, log start offset, leader epochs) and, after a clean
// Close, a clean-shutdown marker.
package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Kafka v2 record batch header ("magic 2"), stored verbatim on disk and on the
// wire. All integers are big-endian. Offsets below are byte positions in the batch.
const (
	// offBaseOffset: int64, offset of the first record. Assigned by the leader;
	// not covered by the CRC, so it is rewritten in place.
	offBaseOffset = 0
	// offLength: int32, number of bytes after this field (whole batch = length+12).
	offLength = 8
	// offLeaderEpoch: int32, partitionLeaderEpoch, set by the leader; not covered by the CRC.
	offLeaderEpoch = 12
	// offMagic: int8, record format version; millrace accepts 2 only.
	offMagic = 16
	// offCRC: uint32, CRC-32C (Castagnoli) of bytes [offAttributes, end).
	offCRC = 17
	// offAttributes: int16; bits 0-2 compression (0 none, 1 gzip, 2 snappy,
	// 3 lz4, 4 zstd), bit 3 timestamp type (1 = LogAppendTime), bit 4
	// transactional, bit 5 control batch, bit 6 has delete horizon.
	offAttributes = 21
	// offLastOffsetDelta: int32, last record's offset minus baseOffset.
	offLastOffsetDelta = 23
	// offFirstTimestamp: int64, timestamp of the first record (ms).
	offFirstTimestamp = 27
	// offMaxTimestamp: int64, largest record timestamp (ms); for LogAppendTime
	// batches the broker's append time.
	offMaxTimestamp = 35
	// offProducerID: int64, idempotent/transactional producer id, -1 if none.
	offProducerID = 43
	// offProducerEpoch: int16, producer epoch, -1 if none.
	offProducerEpoch = 51
	// offBaseSequence: int32, sequence number of the first record, -1 if none.
	offBaseSequence = 53
	// offRecordCount: int32, number of records that follow.
	offRecordCount = 57
	// batchHeaderSize: bytes before the first record; the smallest valid batch.
	batchHeaderSize = 61
	// batchLengthOverhead: bytes not counted by the length field (baseOffset + length).
	batchLengthOverhead = 12
	// batchMagic: the only record format version stored.
	batchMagic = 2

	// attrCompressionMask: compression codec bits of the attributes.
	attrCompressionMask = 0x07
	// attrLogAppendTime: timestamp-type bit; set when the broker stamped maxTimestamp.
	attrLogAppendTime = 0x08
	// maxCompressionCodec: zstd, the highest codec Kafka defines.
	maxCompressionCodec = 4
	// minRecordSize: smallest encoded record: length, attributes, timestampDelta,
	// offsetDelta, keyLength, valueLength, headerCount, one byte each.
	minRecordSize = 7
)

// castagnoli is the CRC-32C table used by record batches.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sentinel errors. Storage errors are wrapped (test with errors.Is); batch
// validation failures come as *BatchError wrapping one of the batch sentinels.
// Suggested Kafka error codes for the wire side are in brackets.
var (
	// ErrCorruptBatch: a batch is truncated, fails its CRC or has an
	// inconsistent header [CORRUPT_MESSAGE, 2].
	ErrCorruptBatch = errors.New("log: corrupt record batch")
	// ErrInvalidRecord: the batch is intact but its contents are not acceptable,
	// e.g. a record count that disagrees with lastOffsetDelta [INVALID_RECORD, 87].
	ErrInvalidRecord = errors.New("log: invalid record batch")
	// ErrUnsupportedMagic: the batch is not record format v2
	// [UNSUPPORTED_FOR_MESSAGE_FORMAT, 43].
	ErrUnsupportedMagic = errors.New("log: unsupported record batch magic")
	// ErrBatchTooLarge: a batch exceeds max.message.bytes or segment.bytes
	// [MESSAGE_TOO_LARGE, 10].
	ErrBatchTooLarge = errors.New("log: record batch too large")
	// ErrOffsetOutOfRange: a read or truncation outside [StartOffset, EndOffset]
	// [OFFSET_OUT_OF_RANGE, 1].
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrOffsetMismatch: a replicated append starts before the log end offset.
	ErrOffsetMismatch = errors.New("log: replicated batch starts before the log end offset")
	// ErrClosed: the log or manager was closed.
	ErrClosed = errors.New("log: closed")
)

// BatchError reports why a batch was rejected and where it starts in the
// buffer passed to Append or ValidateBatches.
type BatchError struct {
	Position int    // byte position of the batch in the input
	Reason   string // what is wrong, in words
	Err      error  // sentinel: ErrCorruptBatch, ErrInvalidRecord, ErrUnsupportedMagic, ErrBatchTooLarge or ErrInvalidTimestamp
	// Records lists the records a produced batch was refused for, when
	// it was refused for what they hold rather than for its framing
	// (record_errors.go); nil otherwise.
	Records []RecordError
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%v at byte %d: %s", e.Err, e.Position, e.Reason)
}

// Unwrap returns the sentinel error.
func (e *BatchError) Unwrap() error { return e.Err }

// BatchHeader holds the header fields of one v2 record batch.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32 // the length field: batch size minus 12
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	Records              int32
}

// Size is the batch's size in bytes, header included.
func (h BatchHeader) Size() int { return int(h.Length) + batchLengthOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec number (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h BatchHeader) Compression() int { return int(h.Attributes) & attrCompressionMask }

// LogAppendTime reports whether the batch's timestamp type is LogAppendTime.
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// ParseBatchHeader decodes the 61-byte header at the start of b. It checks
// only that b holds a whole header, not that the batch is valid.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < batchHeaderSize {
		return BatchHeader{}, &BatchError{Reason: fmt.Sprintf("%d bytes is shorter than a batch header (%d)", len(b), batchHeaderSize), Err: ErrCorruptBatch}
	}
	return parseHeader(b), nil
}

// parseHeader decodes a header; b must hold at least batchHeaderSize bytes.
func parseHeader(b []byte) BatchHeader {
	_ = b[batchHeaderSize-1]
	be := binary.BigEndian
	return BatchHeader{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		Length:               int32(be.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		Records:              int32(be.Uint32(b[offRecordCount:])),
	}
}

// ValidateBatches checks one or more concatenated batches as a producer
// sends them or the log stores them (see validateBatches), walking their
// records but not bounding their timestamps, and returns their headers.
// Compressed batches may decompress to the default
// millrace.max.decompressed.bytes or maxMessageBytes, whichever is larger.
// It never modifies b. Produced batches go through ValidateProduce.
func ValidateBatches(b []byte, maxMessageBytes int) ([]BatchHeader, error) {
	rules := &recordRules{maxDecompressed: max(DefaultConfig().MaxDecompressedBytes, int64(maxMessageBytes))}
	return validateBatches(b, maxMessageBytes, rules)
}

// validateBatches checks each batch: its length field against the buffer,
// magic 2, the minimum size, max.message.bytes, the compression codec, the
// CRC-32C, and the record count.
//
// rules is non-nil for batches from a producer: they must satisfy
// records == lastOffsetDelta+1, and their records are walked under rules,
// compressed ones decompressed (validate_records.go). Replicated batches
// (rules nil) may have been compacted upstream, so only records <=
// lastOffsetDelta+1 is demanded, and only uncompressed ones have their
// record framing walked. A produced CreateTime batch whose maxTimestamp is
// not its records' largest gets it rewritten in b (setMaxTimestamp).
func validateBatches(b []byte, maxMessageBytes int, rules *recordRules) ([]BatchHeader, error) {
	if len(b) == 0 {
		return nil, &BatchError{Reason: "no record batches", Err: ErrCorruptBatch}
	}
	n := 0
	for pos := 0; pos < len(b); n++ {
		size, err := validateOne(b[pos:], maxMessageBytes, rules)
		if err != nil {
			err.Position = pos
			if len(err.Records) > 0 {
				// Index the refused records among all records, not this batch's.
				before := 0
				for p := 0; p < pos; p += parseHeader(b[p:]).Size() {
					before += int(parseHeader(b[p:]).Records)
				}
				for i := range err.Records {
					err.Records[i].Index += before
				}
			}
			return nil, err
		}
		pos += size
	}
	headers := make([]BatchHeader, 0, n)
	for pos := 0; pos < len(b); {
		h := parseHeader(b[pos:])
		headers = append(headers, h)
		pos += h.Size()
	}
	return headers, nil
}

// validateOne validates the batch at the start of b and returns its size.
func validateOne(b []byte, maxMessageBytes int, rules *recordRules) (int, *BatchError) {
	fresh := rules != nil
	if len(b) < batchHeaderSize {
		return 0, &BatchError{Reason: fmt.Sprintf("%d trailing bytes are shorter than a batch header (%d)", len(b), batchHeaderSize), Err: ErrCorruptBatch}
	}
	h := parseHeader(b)
	if h.Magic != batchMagic {
		return 0, &BatchError{Reason: fmt.Sprintf("magic %d, only 2 is supported", h.Magic), Err: ErrUnsupportedMagic}
	}
	if h.Length < batchHeaderSize-batchLengthOverhead {
		return 0, &BatchError{Reason: fmt.Sprintf("length field %d is shorter than the header", h.Length), Err: ErrCorruptBatch}
	}
	size := h.Size()
	if size > len(b) {
		return 0, &BatchError{Reason: fmt.Sprintf("length field says %d bytes but only %d remain", size, len(b)), Err: ErrCorruptBatch}
	}
	if size > maxMessageBytes {
		return 0, &BatchError{Reason: fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", size, maxMessageBytes), Err: ErrBatchTooLarge}
	}
	if got := crc32.Checksum(b[offAttributes:size], castagnoli); got != h.CRC {
		return 0, &BatchError{Reason: fmt.Sprintf("CRC-32C is %08x, header says %08x", got, h.CRC), Err: ErrCorruptBatch}
	}
	if c := h.Compression(); c > maxCompressionCodec {
		return 0, &BatchError{Reason: fmt.Sprintf("unknown compression codec %d", c), Err: ErrInvalidRecord}
	}
	// A stored batch may hold no records: the cleaner keeps a producer's
	// last batch, emptied, so its sequence numbers survive (cleaner.go).
	// A produced one must hold at least one.
	if h.Records < 0 || (fresh && h.Records < 1) {
		return 0, &BatchError{Reason: fmt.Sprintf("record count %d, at least 1 is required", h.Records), Err: ErrInvalidRecord}
	}
	if h.LastOffsetDelta < 0 || int64(h.Records) > int64(h.LastOffsetDelta)+1 || (fresh && int64(h.Records) != int64(h.LastOffsetDelta)+1) {
		return 0, &BatchError{Reason: fmt.Sprintf("record count %d does not match lastOffsetDelta %d", h.Records, h.LastOffsetDelta), Err: ErrInvalidRecord}
	}
	body := b[batchHeaderSize:size]
	if fresh {
		maxTimestamp, err := walkProduced(h, body, rules)
		if err != nil {
			return 0, err
		}
		if rules.checkTimestamps && h.MaxTimestamp != maxTimestamp {
			setMaxTimestamp(b[:size], maxTimestamp)
		}
	} else if h.Compression() == 0 {
		if reason := checkRecordFraming(body, int(h.Records)); reason != "" {
			return 0, &BatchError{Reason: reason, Err: ErrCorruptBatch}
		}
	} else if len(body) == 0 {
		return 0, &BatchError{Reason: "compressed batch has no payload", Err: ErrCorruptBatch}
	}
	return size, nil
}

// setMaxTimestamp writes a produced CreateTime batch's largest record
// timestamp into its header, which the log's time index and retention go
// by. Kafka's LogValidator does the same rather than refuse a header that
// disagrees with its records: librdkafka, for one, writes 0 there when
// every record has timestamp -1 (NO_TIMESTAMP), where the records' largest
// is -1. maxTimestamp is covered by the CRC, which validateOne checked over
// the producer's bytes before the walk, so the CRC is computed again over
// the rewritten ones, as Kafka's DefaultRecordBatch.setMaxTimestamp does
// (it too touches the header only when the value differs). LogAppendTime
// batches are stamped at append instead (appendFreshLocked).
func setMaxTimestamp(batch []byte, maxTimestamp int64) {
	binary.BigEndian.PutUint64(batch[offMaxTimestamp:], uint64(maxTimestamp))
	binary.BigEndian.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
}

// checkRecordFraming walks the length prefixes of uncompressed replicated
// records and returns a reason if they do not tile the body exactly count
// times. (Produced batches get the full walk of validate_records.go.)
//
// The CRC only proves the bytes are the ones the producer sent; this walk
// proves the producer's record count describes them, so a batch no
// consumer could decode is refused instead of stored for good. It reads
// one or two bytes per record (the length prefix) and skips the rest, so
// its cost is a chain of dependent loads, one per record, and the common
// path through the loop makes no calls.
func checkRecordFraming(body []byte, count int) string {
	if count > len(body)/minRecordSize {
		return fmt.Sprintf("record count %d cannot fit in %d bytes", count, len(body))
	}
	pos := 0
	for i := 0; i < count; i++ {
		length, n := shortVarint(body, pos)
		if n == 0 {
			length, n = binary.Varint(body[pos:])
		}
		if n <= 0 {
			return fmt.Sprintf("record %d has a malformed length", i)
		}
		pos += n
		if length < minRecordSize-1 || length > int64(len(body)-pos) {
			return fmt.Sprintf("record %d length %d does not fit the batch", i, length)
		}
		pos += int(length)
	}
	if pos != len(body) {
		return fmt.Sprintf("%d bytes follow the last record", len(body)-pos)
	}
	return ""
}

// shortVarint decodes a one- or two-byte zigzag varint at b[pos:] as
// binary.Varint does, and returns n == 0 for anything else (a longer or
// cut-short prefix), which the caller hands to binary.Varint. Record length
// prefixes of records up to 8 KiB, nearly every record, are that short;
// shortVarint has no calls so it inlines into the framing walk.
func shortVarint(b []byte, pos int) (int64, int) {
	if uint(pos+1) >= uint(len(b)) {
		return 0, 0
	}
	u, n := uint64(b[pos]), 1
	if u >= 0x80 {
		if b[pos+1] >= 0x80 {
			return 0, 0
		}
		u, n = u&0x7f|uint64(b[pos+1])<<7, 2
	}
	return int64(u>>1) ^ -int64(u&1), n
}

// decodeRecordTimestamps calls fn with the offset delta and timestamp of each
// record of an uncompressed batch body, stopping when fn returns false.
// It returns false if the framing is malformed.
func decodeRecordTimestamps(body []byte, firstTimestamp int64, fn func(offsetDelta int64, timestamp int64) bool) bool {
	for pos := 0; pos < len(body); {
		length, n := binary.Varint(body[pos:])
		if n <= 0 || length < 1 || length > int64(len(body)-pos-n) {
			return false
		}
		rec := body[pos+n : pos+n+int(length)]
		pos += n + int(length)
		// record: attributes int8, timestampDelta varlong, offsetDelta varint, ...
		if len(rec) < 1 {
			return false
		}
		tsDelta, m := binary.Varint(rec[1:])
		if m <= 0 {
			return false
		}
		offDelta, k := binary.Varint(rec[1+m:])
		if k <= 0 {
			return false
		}
		if !fn(offDelta, firstTimestamp+tsDelta) {
			return true
		}
	}
	return true
}
