package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// ValidateStored checks one or more concatenated batches as the log
// stores them or a follower copies them from its leader (see validate),
// and returns their headers. It decompresses nothing, so it needs no
// Decoder. It never modifies b.
func ValidateStored(b []byte, maxMessageBytes int) ([]Header, error) {
	return validate(nil, b, maxMessageBytes, nil)
}

// Validate checks one or more concatenated batches under rules (see
// validate) and returns their headers: with rules, as a producer sends
// them, every record walked and compressed ones decompressed through d;
// with nil rules, as ValidateStored. A batch refused for some of its
// records lists them in the *Error's Records.
func (d *Decoder) Validate(b []byte, maxMessageBytes int, rules *Rules) ([]Header, error) {
	return validate(d, b, maxMessageBytes, rules)
}

// validate checks each batch: its length field against the buffer,
// magic 2, the minimum size, max.message.bytes, the compression codec, the
// CRC-32C, and the record count. Each header is parsed once and returned.
//
// rules is non-nil for batches from a producer: they must satisfy
// records == lastOffsetDelta+1, and their records are walked under rules,
// compressed ones decompressed by d (records.go). Replicated batches
// (rules nil) may have been compacted upstream, so only records <=
// lastOffsetDelta+1 is demanded, and only uncompressed ones have their
// record framing walked. A produced CreateTime batch whose maxTimestamp is
// not its records' largest gets it rewritten in b (setMaxTimestamp).
func validate(d *Decoder, b []byte, maxMessageBytes int, rules *Rules) ([]Header, error) {
	if len(b) == 0 {
		return nil, &Error{Reason: "no record batches", Err: ErrCorrupt}
	}
	// Nearly every call validates one batch (a produce carries one per
	// partition).
	headers := make([]Header, 0, 1)
	for pos := 0; pos < len(b); {
		h, err := validateOne(d, b[pos:], maxMessageBytes, rules)
		if err != nil {
			err.Position = pos
			if len(err.Records) > 0 {
				// Index the refused records among all records, not this batch's.
				before := 0
				for _, h := range headers {
					before += int(h.Records)
				}
				for i := range err.Records {
					err.Records[i].Index += before
				}
			}
			return nil, err
		}
		headers = append(headers, h)
		pos += h.Size()
	}
	return headers, nil
}

// validateOne validates the batch at the start of b and returns its
// header, as it is once validateOne is done (setMaxTimestamp).
func validateOne(d *Decoder, b []byte, maxMessageBytes int, rules *Rules) (Header, *Error) {
	fresh := rules != nil
	if len(b) < HeaderSize {
		return Header{}, &Error{Reason: fmt.Sprintf("%d trailing bytes are shorter than a batch header (%d)", len(b), HeaderSize), Err: ErrCorrupt}
	}
	h := HeaderAt(b)
	if h.Magic != Magic {
		return Header{}, &Error{Reason: fmt.Sprintf("magic %d, only 2 is supported", h.Magic), Err: ErrUnsupportedMagic}
	}
	if h.Length < HeaderSize-LengthOverhead {
		return Header{}, &Error{Reason: fmt.Sprintf("length field %d is shorter than the header", h.Length), Err: ErrCorrupt}
	}
	size := h.Size()
	if size > len(b) {
		return Header{}, &Error{Reason: fmt.Sprintf("length field says %d bytes but only %d remain", size, len(b)), Err: ErrCorrupt}
	}
	if size > maxMessageBytes {
		return Header{}, &Error{Reason: fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", size, maxMessageBytes), Err: ErrTooLarge}
	}
	if got := crc32.Checksum(b[PosAttributes:size], castagnoli); got != h.CRC {
		return Header{}, &Error{Reason: fmt.Sprintf("CRC-32C is %08x, header says %08x", got, h.CRC), Err: ErrCorrupt}
	}
	if c := h.Compression(); c > MaxCodec {
		return Header{}, &Error{Reason: fmt.Sprintf("unknown compression codec %d", c), Err: ErrInvalidRecord}
	}
	// A stored batch may hold no records: the cleaner keeps a producer's
	// last batch, emptied, so its sequence numbers survive (the log's cleaner.go).
	// A produced one must hold at least one.
	if h.Records < 0 || (fresh && h.Records < 1) {
		return Header{}, &Error{Reason: fmt.Sprintf("record count %d, at least 1 is required", h.Records), Err: ErrInvalidRecord}
	}
	if h.LastOffsetDelta < 0 || int64(h.Records) > int64(h.LastOffsetDelta)+1 || (fresh && int64(h.Records) != int64(h.LastOffsetDelta)+1) {
		return Header{}, &Error{Reason: fmt.Sprintf("record count %d does not match lastOffsetDelta %d", h.Records, h.LastOffsetDelta), Err: ErrInvalidRecord}
	}
	body := b[HeaderSize:size]
	if fresh {
		maxTimestamp, err := d.walkProduced(h, body, rules)
		if err != nil {
			return Header{}, err
		}
		if rules.CheckTimestamps && h.MaxTimestamp != maxTimestamp {
			setMaxTimestamp(b[:size], &h, maxTimestamp)
		}
	} else if h.Compression() == 0 {
		if reason := checkRecordFraming(body, int(h.Records)); reason != "" {
			return Header{}, &Error{Reason: reason, Err: ErrCorrupt}
		}
	} else if len(body) == 0 {
		return Header{}, &Error{Reason: "compressed batch has no payload", Err: ErrCorrupt}
	}
	return h, nil
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
// batches are stamped at append instead (the log's appendFreshLocked).
// h, the batch's header, is updated to match.
func setMaxTimestamp(batch []byte, h *Header, maxTimestamp int64) {
	h.MaxTimestamp = maxTimestamp
	binary.BigEndian.PutUint64(batch[PosMaxTimestamp:], uint64(maxTimestamp))
	h.CRC = crc32.Checksum(batch[PosAttributes:], castagnoli)
	binary.BigEndian.PutUint32(batch[PosCRC:], h.CRC)
}

// checkRecordFraming walks the length prefixes of uncompressed replicated
// records and returns a reason if they do not tile the body exactly count
// times. (Produced batches get the full walk of records.go.)
//
// The CRC only proves the bytes are the ones the producer sent; this walk
// proves the producer's record count describes them, so a batch no
// consumer could decode is refused instead of stored for good. It reads
// one or two bytes per record (the length prefix) and skips the rest, so
// its cost is a chain of dependent loads, one per record, and the common
// path through the loop makes no calls.
func checkRecordFraming(body []byte, count int) string {
	if count > len(body)/MinRecordSize {
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
		if length < MinRecordSize-1 || length > int64(len(body)-pos) {
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

// RecordTimestamps calls fn with the offset delta and timestamp of each
// record of an uncompressed batch body, stopping when fn returns false.
// It returns false if the framing is malformed.
func RecordTimestamps(body []byte, firstTimestamp int64, fn func(offsetDelta int64, timestamp int64) bool) bool {
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
