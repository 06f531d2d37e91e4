package recordbatch

// The record walk of a produced batch, as Kafka's LogValidator does it: a
// compressed batch is decompressed (with a bound, so a decompression bomb
// is refused, not expanded) and every record of every batch is parsed, so
// a batch no consumer could decode is refused before it is acknowledged.
// The batch itself is stored verbatim (but for its header's maxTimestamp,
// set as Kafka sets it: validate.go's setMaxTimestamp); nothing decoded here
// is kept.
//
// Records inside a batch (Kafka v2), after decompression; varints are
// zigzag-encoded as in protobuf:
//
//	length         varint  bytes of the record after this field
//	attributes     int8    unused
//	timestampDelta varlong record timestamp minus the batch's firstTimestamp
//	offsetDelta    varint  record offset minus baseOffset: i for the i-th record of a produced batch
//	keyLength      varint  -1 for a null key
//	key            bytes
//	valueLength    varint  -1 for a null value
//	value          bytes
//	headerCount    varint  >= 0
//	headers        headerCount times: keyLength varint (>= 0), key,
//	               valueLength varint (>= -1), value
//
// Replicated appends (a follower copying from its leader) do not come
// through here: the leader walked the records before acknowledging them, the
// CRC proves the bytes are those bytes, and a follower cannot refuse what
// its leader has committed anyway, so decompressing again would only double
// the CPU every compressed byte costs the cluster.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

const (
	// walkWindow is the buffer a compressed batch is decoded through: a
	// record that fits is parsed in place, a larger one is read across
	// refills (parseLargeRecord), so memory stays this size however large
	// the batch decompresses.
	walkWindow = 64 << 10
	// zstdMaxWindow bounds the history a zstd frame may ask the decoder to
	// keep (it is allocated up front). franz-go asks for 64 KiB; zstd
	// levels up to 19 use at most 8 MiB (window log 23); only the ultra
	// levels 20-22 or long-distance matching on a batch above 8 MiB ask
	// for more.
	zstdMaxWindow = 8 << 20
	// snappyMaxRatio: no snappy block decodes to more than about 21.3 times
	// its size (a 3-byte copy of 64 bytes), so a block claiming more is
	// corrupt; checked before the claimed size is allocated.
	snappyMaxRatio = 22
	// snappyKeep: the largest decoded-snappy buffer a pooled walker keeps;
	// producers' batches are up to 1 MiB uncompressed by default.
	snappyKeep = 4 << 20
	// minHeaderSize: a record header is at least a key length and a value
	// length, one byte each.
	minHeaderSize = 2
)

// xerialMagic starts snappy payloads framed as the Java client's
// snappy-java stream writes them: the magic, a version and a compatible
// version (int32 each), then blocks of int32 length + raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// errDecompressedTooLarge marks a batch that decodes past the bound.
var errDecompressedTooLarge = errors.New("decompressed size exceeds the bound")

// DefaultMaxDecompressedBytes is millrace.max.decompressed.bytes' default:
// what a compressed batch may decode to (64 MiB).
const DefaultMaxDecompressedBytes = 64 << 20

// Rules is what the walk of a produced batch enforces beyond framing; the
// partition log derives them from a topic's config (its produceRules).
type Rules struct {
	// MaxDecompressed bounds what a compressed batch may decode to
	// (millrace.max.decompressed.bytes); past it the batch is refused
	// with ErrTooLarge.
	MaxDecompressed int64
	// CheckTimestamps: a CreateTime topic keeps the records' timestamps,
	// so they are checked against [MinTimestamp, MaxTimestamp] and the
	// header's maxTimestamp is set to their largest.
	CheckTimestamps bool
	// RefuseLogAppendTime: the timestamp type is the broker's to set, not
	// the producer's (Kafka refuses it too).
	RefuseLogAppendTime bool
	// MinTimestamp, MaxTimestamp: inclusive bounds for record timestamps.
	MinTimestamp, MaxTimestamp int64
	// RequireKeys: a compacted topic keeps records by key, so, as Kafka,
	// it refuses a record without one.
	RequireKeys bool
	// MaxKeyBytes, with RequireKeys: millrace.compacted.max.key.bytes.
	MaxKeyBytes int64
}

// recordStream yields a batch's decoded record bytes: either a slice held
// whole (uncompressed or snappy) or a decompressor read through a window.
type recordStream struct {
	src      io.Reader // nil when buf holds everything
	buf      []byte    // buf[pos:end] is decoded and not yet parsed
	pos, end int
	decoded  int64 // bytes read from src so far
	limit    int64 // more than this from src is errDecompressedTooLarge
	srcErr   error // sticky: io.EOF once src is exhausted, or why it failed
}

func (s *recordStream) resetBytes(b []byte) {
	*s = recordStream{buf: b, end: len(b), srcErr: io.EOF}
}

func (s *recordStream) reset(src io.Reader, window []byte, limit int64) {
	*s = recordStream{src: src, buf: window, limit: limit}
}

// fill tries to have n bytes (n <= len(buf)) buffered and returns how many
// are. Fewer means the source ended or failed (srcErr says which).
func (s *recordStream) fill(n int) int {
	if s.end-s.pos >= n || s.srcErr != nil {
		return s.end - s.pos // inlined: the common case costs no call
	}
	return s.refill(n)
}

// refill moves the unparsed bytes to the front of the window and reads
// from the source until n bytes are buffered or it ends.
func (s *recordStream) refill(n int) int {
	s.end = copy(s.buf, s.buf[s.pos:s.end])
	s.pos = 0
	for zero := 0; s.end < n && s.srcErr == nil; {
		room := s.buf[s.end:]
		// Reading one byte past the limit is how exceeding it shows.
		if left := s.limit - s.decoded; int64(len(room)) > left {
			room = room[:left+1]
		}
		m, err := s.src.Read(room)
		s.end += m
		s.decoded += int64(m)
		switch {
		case s.decoded > s.limit:
			s.srcErr = errDecompressedTooLarge
		case err != nil:
			s.srcErr = err
		case m == 0:
			if zero++; zero > 100 {
				s.srcErr = io.ErrNoProgress
			}
		}
	}
	return s.end - s.pos
}

// shortReason turns a stream that ran dry inside a record into the reason.
func (s *recordStream) shortReason(i int) *Error {
	switch {
	case s.srcErr == errDecompressedTooLarge:
		return tooLarge(s.limit)
	case s.srcErr != nil && s.srcErr != io.EOF:
		return &Error{Reason: fmt.Sprintf("cannot decompress record %d: %v", i, s.srcErr), Err: ErrCorrupt}
	}
	return &Error{Reason: fmt.Sprintf("record %d is cut short", i), Err: ErrCorrupt}
}

// walk parses the batch's records: exactly h.Records of them, nothing
// after the last one, and returns their largest timestamp, from -1
// (Kafka's NO_TIMESTAMP) up, as Kafka's LogValidator computes it: the
// caller writes it into the header (validateOne).
//
// A record that is well framed but not acceptable (offset delta not its
// index, no key or too long a key on a compacted topic, a timestamp out of
// bounds on a CreateTime topic) does not stop the walk: every such record
// is listed in the Error's Records, as Kafka's per-record errors
// (KIP-467) list them, so a client can fail those and send the rest again.
// A framing fault stops it: past it nothing can be read.
func (s *recordStream) walk(h Header, rules *Rules) (int64, *Error) {
	// A count larger than the records (2^31-1 claimed, one sent) ends at
	// the end of the bytes: the loop runs at most once per 7 bytes.
	count := int(h.Records)
	maxTimestamp := int64(NoTimestamp)
	var refused recordFaults
	for i := 0; i < count; i++ {
		avail := s.fill(binary.MaxVarintLen32)
		if avail == 0 && s.srcErr == io.EOF {
			return 0, &Error{Reason: fmt.Sprintf("record count %d but the batch holds %d records", count, i), Err: ErrCorrupt}
		}
		length, n := shortVarint(s.buf[:s.end], s.pos)
		if n == 0 {
			length, n = binary.Varint(s.buf[s.pos:s.end])
		}
		switch {
		case n == 0 && avail < binary.MaxVarintLen32:
			return 0, s.shortReason(i) // the stream ended inside the length
		case n <= 0:
			return 0, &Error{Reason: fmt.Sprintf("record %d has a malformed length", i), Err: ErrCorrupt}
		}
		if length < MinRecordSize-1 || length > math.MaxInt32 {
			return 0, &Error{Reason: fmt.Sprintf("record %d has length %d", i, length), Err: ErrCorrupt}
		}
		var tsDelta, offsetDelta, keyLength int64
		var reason string
		if total := n + int(length); total <= len(s.buf) {
			if s.fill(total) < total {
				return 0, s.shortReason(i)
			}
			rec := s.buf[s.pos+n : s.pos+total]
			var plain bool
			if tsDelta, offsetDelta, keyLength, plain = parsePlainRecord(rec); !plain {
				tsDelta, offsetDelta, keyLength, reason = parseRecord(rec)
			}
			s.pos += total
		} else {
			s.pos += n
			var short bool
			tsDelta, offsetDelta, keyLength, reason, short = s.parseLargeRecord(length)
			if short {
				return 0, s.shortReason(i)
			}
		}
		if reason != "" {
			return 0, &Error{Reason: fmt.Sprintf("record %d: %s", i, reason), Err: ErrCorrupt}
		}
		ts := h.FirstTimestamp + tsDelta
		maxTimestamp = max(maxTimestamp, ts)
		if offsetDelta != int64(i) || (rules.RequireKeys && (keyLength < 0 || keyLength > rules.MaxKeyBytes)) ||
			(rules.CheckTimestamps && ts != NoTimestamp && (ts < rules.MinTimestamp || ts > rules.MaxTimestamp)) {
			refused.add(i, offsetDelta, keyLength, ts, rules)
		}
	}
	if s.fill(1) > 0 {
		return 0, &Error{Reason: fmt.Sprintf("data follows the last of %d records", count), Err: ErrCorrupt}
	}
	if s.srcErr != io.EOF {
		// Includes a checksum that fails at the end of the stream.
		return 0, s.shortReason(count)
	}
	if refused.total > 0 {
		return 0, refused.batchError()
	}
	return maxTimestamp, nil
}

// parseRecord checks that the fields of one record (the bytes after its
// length) tile rec exactly and returns its timestamp and offset deltas and
// its key's length (-1 for none), or a reason. It reads a few bytes per field and skips keys and values.
//
// The fields are decoded in one loop with one varint site, whose one- and
// two-byte cases (nearly every field: deltas and lengths below 8 Ki) are
// decoded inline; per-field helpers cost a call each, which made the walk
// of 100-byte records several times slower.
func parseRecord(rec []byte) (tsDelta, offsetDelta, keyLength int64, reason string) {
	p := 1 // attributes
	fields := 5
	for i := 0; i < fields; i++ {
		var v int64
		switch {
		case p < len(rec) && rec[p] < 0x80:
			u := int64(rec[p])
			v = u>>1 ^ -(u & 1)
			p++
		case p+1 < len(rec) && rec[p+1] < 0x80: // rec[p] >= 0x80: two bytes
			u := int64(rec[p]&0x7f) | int64(rec[p+1])<<7
			v = u>>1 ^ -(u & 1)
			p += 2
		default:
			n := 0
			if p < len(rec) {
				v, n = binary.Varint(rec[p:])
			}
			if n <= 0 {
				return 0, 0, 0, fmt.Sprintf("malformed %s", fieldName(i))
			}
			p += n
		}
		switch {
		case i == 0:
			tsDelta = v
		case i == 1:
			offsetDelta = v
		case i == 4:
			if v < 0 || v > int64(len(rec)-p)/minHeaderSize {
				return 0, 0, 0, fmt.Sprintf("header count %d does not fit the record", v)
			}
			fields += 2 * int(v)
		default:
			// A length: key (2), value (3), then header key and value
			// lengths alternating. Only header keys may not be null.
			minLength := int64(-1)
			if i > 4 && i%2 == 1 {
				minLength = 0
			}
			if v < minLength || v > int64(len(rec)-p) {
				return 0, 0, 0, fmt.Sprintf("%s %d does not fit the record", fieldName(i), v)
			}
			if i == 2 {
				keyLength = v
			}
			if v > 0 {
				p += int(v)
			}
		}
	}
	if p != len(rec) {
		return 0, 0, 0, fmt.Sprintf("%d bytes follow the record's fields", len(rec)-p)
	}
	return tsDelta, offsetDelta, keyLength, ""
}

// parsePlainRecord is parseRecord for the shape nearly every produced record
// has: no headers, and deltas and key and value lengths below 8 Ki (one- or
// two-byte varints). It is straight-line code, about twice as fast as
// parseRecord's field loop on 100-byte records, and the validation of a
// produce's small records is most of what the broker spends on them beyond
// the copies in and out. plain false means the record is another shape, or
// is malformed: parseRecord decides which and gives the reason.
func parsePlainRecord(rec []byte) (tsDelta, offsetDelta, keyLength int64, plain bool) {
	p := 1 // attributes
	var n int
	if tsDelta, n = shortVarint(rec, p); n == 0 {
		return 0, 0, 0, false
	}
	p += n
	if offsetDelta, n = shortVarint(rec, p); n == 0 {
		return 0, 0, 0, false
	}
	p += n
	if keyLength, n = shortVarint(rec, p); n == 0 || keyLength < -1 || keyLength > int64(len(rec)-p-n) {
		return 0, 0, 0, false
	}
	p += n + max(int(keyLength), 0)
	valueLength, n := shortVarint(rec, p)
	if n == 0 || valueLength < -1 || valueLength > int64(len(rec)-p-n) {
		return 0, 0, 0, false
	}
	p += n + max(int(valueLength), 0)
	// The header count, zero, is the record's last byte.
	if p != len(rec)-1 || rec[p] != 0 {
		return 0, 0, 0, false
	}
	return tsDelta, offsetDelta, keyLength, true
}

// fieldName names the i-th varint field of a record, for reasons.
func fieldName(i int) string {
	switch {
	case i < 5:
		return [...]string{"timestamp delta", "offset delta", "key length", "value length", "header count"}[i]
	case i%2 == 1:
		return "header key length"
	}
	return "header value length"
}

// parseLargeRecord is parseRecord for a record longer than the window:
// the same checks, reading through the stream. short reports that the
// stream ended or failed inside the record.
func (s *recordStream) parseLargeRecord(length int64) (tsDelta, offsetDelta, keyLength int64, reason string, short bool) {
	left := length // bytes of the record not yet consumed
	varint := func() (int64, bool) {
		s.fill(binary.MaxVarintLen64)
		v, n := binary.Varint(s.buf[s.pos:s.end])
		if n <= 0 || int64(n) > left {
			return 0, false
		}
		s.pos += n
		left -= int64(n)
		return v, true
	}
	// skip consumes n bytes of the record; false if the stream ran dry.
	skip := func(n int64) bool {
		left -= n
		for n > 0 {
			avail := s.fill(1)
			if avail == 0 {
				return false
			}
			step := int(min(n, int64(avail)))
			s.pos += step
			n -= int64(step)
		}
		return true
	}
	field := func(minLength int64, what string) (int64, string) {
		n, ok := varint()
		if !ok || n < minLength || n > left {
			return n, fmt.Sprintf("%s length %d does not fit the record", what, n)
		}
		if n > 0 && !skip(n) {
			short = true
		}
		return n, ""
	}
	if !skip(1) { // attributes
		return 0, 0, 0, "", true
	}
	var ok bool
	if tsDelta, ok = varint(); !ok {
		return 0, 0, 0, "malformed timestamp delta", s.fill(1) == 0
	}
	if offsetDelta, ok = varint(); !ok {
		return 0, 0, 0, "malformed offset delta", s.fill(1) == 0
	}
	if keyLength, reason = field(-1, "key"); reason != "" || short {
		return 0, 0, 0, reason, short
	}
	if _, reason = field(-1, "value"); reason != "" || short {
		return 0, 0, 0, reason, short
	}
	headers, ok := varint()
	if !ok || headers < 0 || headers > left/minHeaderSize {
		return 0, 0, 0, fmt.Sprintf("header count %d does not fit the record", headers), false
	}
	for range headers {
		if _, reason = field(0, "header key"); reason != "" || short {
			return 0, 0, 0, reason, short
		}
		if _, reason = field(-1, "header value"); reason != "" || short {
			return 0, 0, 0, reason, short
		}
	}
	if left != 0 {
		return 0, 0, 0, fmt.Sprintf("%d bytes follow the record's fields", left), false
	}
	return tsDelta, offsetDelta, keyLength, "", false
}
