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
	"errors"
	"hash/crc32"

	"millrace/internal/recordbatch"
)

// The log stores Kafka v2 record batches verbatim; their format, header
// parsing and validation are internal/recordbatch's. These are the log's
// names for the header positions and bits it rewrites on append (base
// offset, leader epoch, LogAppendTime, CRC) and reads while scanning.
const (
	offBaseOffset       = recordbatch.PosBaseOffset
	offLength           = recordbatch.PosLength
	offLeaderEpoch      = recordbatch.PosLeaderEpoch
	offMagic            = recordbatch.PosMagic
	offCRC              = recordbatch.PosCRC
	offAttributes       = recordbatch.PosAttributes
	offLastOffsetDelta  = recordbatch.PosLastOffsetDelta
	offFirstTimestamp   = recordbatch.PosFirstTimestamp
	offMaxTimestamp     = recordbatch.PosMaxTimestamp
	offProducerID       = recordbatch.PosProducerID
	offProducerEpoch    = recordbatch.PosProducerEpoch
	offBaseSequence     = recordbatch.PosBaseSequence
	offRecordCount      = recordbatch.PosRecordCount
	batchHeaderSize     = recordbatch.HeaderSize
	batchLengthOverhead = recordbatch.LengthOverhead
	batchMagic          = recordbatch.Magic
	attrCompressionMask = recordbatch.AttrCompressionMask
	attrLogAppendTime   = recordbatch.AttrLogAppendTime
	attrTransactional   = recordbatch.AttrTransactional
	attrControl         = recordbatch.AttrControl
	codecNone           = recordbatch.CodecNone
	codecGzip           = recordbatch.CodecGzip
	codecSnappy         = recordbatch.CodecSnappy
	codecLZ4            = recordbatch.CodecLZ4
	codecZstd           = recordbatch.CodecZstd
)

// castagnoli is the CRC-32C table used by record batches.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader holds the header fields of one v2 record batch.
type BatchHeader = recordbatch.Header

// BatchError reports why a batch was rejected and where it starts in the
// buffer passed to Append or ValidateProduce.
type BatchError = recordbatch.Error

// RecordError is one record a produced batch was refused for (KIP-467).
type RecordError = recordbatch.RecordError

// Sentinel errors. Storage errors are wrapped (test with errors.Is); batch
// validation failures come as *BatchError wrapping one of the batch
// sentinels, which are recordbatch's. Suggested Kafka error codes for the
// wire side are in brackets.
var (
	// ErrCorruptBatch: a batch is truncated, fails its CRC or has an
	// inconsistent header [CORRUPT_MESSAGE, 2].
	ErrCorruptBatch = recordbatch.ErrCorrupt
	// ErrInvalidRecord: the batch is intact but its contents are not acceptable,
	// e.g. a record count that disagrees with lastOffsetDelta [INVALID_RECORD, 87].
	ErrInvalidRecord = recordbatch.ErrInvalidRecord
	// ErrUnsupportedMagic: the batch is not record format v2
	// [UNSUPPORTED_FOR_MESSAGE_FORMAT, 43].
	ErrUnsupportedMagic = recordbatch.ErrUnsupportedMagic
	// ErrBatchTooLarge: a batch exceeds max.message.bytes or segment.bytes
	// [MESSAGE_TOO_LARGE, 10].
	ErrBatchTooLarge = recordbatch.ErrTooLarge
	// ErrInvalidTimestamp: a produced record's timestamp is outside
	// message.timestamp.before.max.ms / after.max.ms, or a producer set the
	// LogAppendTime timestamp type [INVALID_TIMESTAMP, 32].
	ErrInvalidTimestamp = recordbatch.ErrInvalidTimestamp
	// ErrOffsetOutOfRange: a read or truncation outside [StartOffset, EndOffset]
	// [OFFSET_OUT_OF_RANGE, 1].
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrOffsetMismatch: a replicated append starts before the log end offset.
	ErrOffsetMismatch = errors.New("log: replicated batch starts before the log end offset")
	// ErrClosed: the log or manager was closed.
	ErrClosed = errors.New("log: closed")
)
