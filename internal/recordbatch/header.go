// Package recordbatch is the Kafka record batch v2 codec ("magic 2"):
// header parsing, the CRC-32C check, the walk of a batch's record framing,
// the rules a produced batch must pass (Kafka's LogValidator), and
// decompression under limits, plus the recompression and payload coding
// the partition log's append and cleaner use.
//
// It holds code, not state: what decoding may cost at once (the
// decompression slots and the pooled decoders) belongs to a Decoder, which
// each owner makes for itself. A broker's partition logs share the
// broker's; a sink worker has its own.
package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Kafka v2 record batch header ("magic 2"), stored verbatim on disk and on the
// wire. All integers are big-endian. Offsets below are byte positions in the batch.
const (
	// PosBaseOffset: int64, offset of the first record. Assigned by the leader;
	// not covered by the CRC, so it is rewritten in place.
	PosBaseOffset = 0
	// PosLength: int32, number of bytes after this field (whole batch = length+12).
	PosLength = 8
	// PosLeaderEpoch: int32, partitionLeaderEpoch, set by the leader; not covered by the CRC.
	PosLeaderEpoch = 12
	// PosMagic: int8, record format version; millrace accepts 2 only.
	PosMagic = 16
	// PosCRC: uint32, CRC-32C (Castagnoli) of bytes [PosAttributes, end).
	PosCRC = 17
	// PosAttributes: int16; bits 0-2 compression (0 none, 1 gzip, 2 snappy,
	// 3 lz4, 4 zstd), bit 3 timestamp type (1 = LogAppendTime), bit 4
	// transactional, bit 5 control batch, bit 6 has delete horizon.
	PosAttributes = 21
	// PosLastOffsetDelta: int32, last record's offset minus baseOffset.
	PosLastOffsetDelta = 23
	// PosFirstTimestamp: int64, timestamp of the first record (ms).
	PosFirstTimestamp = 27
	// PosMaxTimestamp: int64, largest record timestamp (ms); for LogAppendTime
	// batches the broker's append time.
	PosMaxTimestamp = 35
	// PosProducerID: int64, idempotent/transactional producer id, -1 if none.
	PosProducerID = 43
	// PosProducerEpoch: int16, producer epoch, -1 if none.
	PosProducerEpoch = 51
	// PosBaseSequence: int32, sequence number of the first record, -1 if none.
	PosBaseSequence = 53
	// PosRecordCount: int32, number of records that follow.
	PosRecordCount = 57
	// HeaderSize: bytes before the first record; the smallest valid batch.
	HeaderSize = 61
	// LengthOverhead: bytes not counted by the length field (baseOffset + length).
	LengthOverhead = 12
	// Magic: the only record format version stored.
	Magic = 2

	// AttrCompressionMask: compression codec bits of the attributes.
	AttrCompressionMask = 0x07
	// AttrLogAppendTime: timestamp-type bit; set when the broker stamped maxTimestamp.
	AttrLogAppendTime = 0x08
	// AttrTransactional: the batch was written inside a transaction.
	AttrTransactional = 0x10
	// AttrControl: a control batch (a transaction marker).
	AttrControl = 0x20
	// MaxCodec: zstd, the highest codec Kafka defines.
	MaxCodec = 4
	// MinRecordSize: smallest encoded record: length, attributes, timestampDelta,
	// offsetDelta, keyLength, valueLength, headerCount, one byte each.
	MinRecordSize = 7
)

// castagnoli is the CRC-32C table used by record batches.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec numbers of the attributes' compression bits.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP: a record produced
// without a timestamp (librdkafka's C API allows it). It is exempt from
// the timestamp bounds, as in Kafka.
const NoTimestamp = -1

// Sentinel errors: validation failures come as *Error wrapping one of
// them. Suggested Kafka error codes for the wire side are in brackets.
// Their texts are the ones clients have always seen in Produce error
// messages, from when this code was part of the partition log.
var (
	// ErrCorrupt: a batch is truncated, fails its CRC or has an
	// inconsistent header [CORRUPT_MESSAGE, 2].
	ErrCorrupt = errors.New("log: corrupt record batch")
	// ErrInvalidRecord: the batch is intact but its contents are not acceptable,
	// e.g. a record count that disagrees with lastOffsetDelta [INVALID_RECORD, 87].
	ErrInvalidRecord = errors.New("log: invalid record batch")
	// ErrUnsupportedMagic: the batch is not record format v2
	// [UNSUPPORTED_FOR_MESSAGE_FORMAT, 43].
	ErrUnsupportedMagic = errors.New("log: unsupported record batch magic")
	// ErrTooLarge: a batch exceeds max.message.bytes or segment.bytes
	// [MESSAGE_TOO_LARGE, 10].
	ErrTooLarge = errors.New("log: record batch too large")
	// ErrInvalidTimestamp: a produced record's timestamp is outside
	// message.timestamp.before.max.ms / after.max.ms, or a producer set the
	// LogAppendTime timestamp type [INVALID_TIMESTAMP, 32].
	ErrInvalidTimestamp = errors.New("log: record timestamp out of range")
)

// Error reports why a batch was rejected and where it starts in the
// buffer that was validated.
type Error struct {
	Position int    // byte position of the batch in the input
	Reason   string // what is wrong, in words
	Err      error  // sentinel: ErrCorrupt, ErrInvalidRecord, ErrUnsupportedMagic, ErrTooLarge or ErrInvalidTimestamp
	// Records lists the records a produced batch was refused for, when
	// it was refused for what they hold rather than for its framing
	// (record_errors.go); nil otherwise.
	Records []RecordError
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v at byte %d: %s", e.Err, e.Position, e.Reason)
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

// Header holds the header fields of one v2 record batch.
type Header struct {
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
func (h Header) Size() int { return int(h.Length) + LengthOverhead }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the codec number (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h Header) Compression() int { return int(h.Attributes) & AttrCompressionMask }

// LogAppendTime reports whether the batch's timestamp type is LogAppendTime.
func (h Header) LogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// Transactional reports whether the batch was written inside a transaction.
func (h Header) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports whether the batch is a control batch.
func (h Header) Control() bool { return h.Attributes&AttrControl != 0 }

// IsTransactional reports whether b starts with a whole header whose
// attributes mark a transactional batch; it reads the attributes alone,
// for a caller that must know before the batch is validated.
func IsTransactional(b []byte) bool {
	return len(b) >= HeaderSize && binary.BigEndian.Uint16(b[PosAttributes:])&AttrTransactional != 0
}

// ParseHeader decodes the 61-byte header at the start of b. It checks
// only that b holds a whole header, not that the batch is valid.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &Error{Reason: fmt.Sprintf("%d bytes is shorter than a batch header (%d)", len(b), HeaderSize), Err: ErrCorrupt}
	}
	return HeaderAt(b), nil
}

// HeaderAt decodes the header at the start of b, which must hold at least
// HeaderSize bytes (it panics otherwise); it checks nothing.
func HeaderAt(b []byte) Header {
	_ = b[HeaderSize-1]
	be := binary.BigEndian
	return Header{
		BaseOffset:           int64(be.Uint64(b[PosBaseOffset:])),
		Length:               int32(be.Uint32(b[PosLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[PosLeaderEpoch:])),
		Magic:                int8(b[PosMagic]),
		CRC:                  be.Uint32(b[PosCRC:]),
		Attributes:           int16(be.Uint16(b[PosAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[PosLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[PosFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[PosMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[PosProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[PosProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[PosBaseSequence:])),
		Records:              int32(be.Uint32(b[PosRecordCount:])),
	}
}
