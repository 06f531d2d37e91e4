package lake

import (
	"bytes"
	"encoding/binary"
	"unsafe"

	"millrace/schemas"
)

// Event ids: the two shapes dedup recognises (the tailer's and UUIDs),
// read from a record's value in place or from its decoded row.

// idKind is the shape of an event id.
type idKind uint8

const (
	idNone idKind = iota // no id, or one of another shape: passes, counted
	idTail               // 32 hex digits: 16 of file prefix, 16 of byte offset
	idUUID               // 8-4-4-4-12 hex digits
)

// parseEventID classifies id and packs it into 16 bytes: the UUID's bytes,
// or the tail id's prefix then its offset, both big-endian. A tail id is
// lower case: the tailer writes it so, and "ABC…" and "abc…" must not be
// two spellings of one id that one worker could treat as equal and another
// not. A UUID may be either case (RFC 9562).
//
// The digits are decoded eight at a time in a 64-bit word (hex8): a lookup
// per digit was most of the 40 ns a click's id took to read.
func parseEventID(id string) (idKind, [16]byte) {
	var out [16]byte
	var seen uint64 // or of hex8's verdicts
	switch len(id) {
	case 32:
		for i := 0; i < 4; i++ {
			seen |= hex8(out[4*i:], le64(id[8*i:]))
		}
		if seen != hexLower {
			return idNone, out
		}
		return idTail, out
	case 36:
		if id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
			return idNone, out
		}
		// 8-4-4-4-12 digits as four words of eight.
		seen = hex8(out[0:], le64(id[0:])) |
			hex8(out[4:], le32(id[9:])|le32(id[14:])<<32) |
			hex8(out[8:], le32(id[19:])|le32(id[24:])<<32) |
			hex8(out[12:], le64(id[28:]))
		if seen > hexUpper {
			return idNone, out
		}
		return idUUID, out
	}
	return idNone, out
}

// hex8's verdicts; or-ed together they give the worst.
const (
	hexLower   = 0 // only 0-9 and a-f
	hexUpper   = 1 // A-F as well
	hexInvalid = 2 // something else
)

func le64(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// Bytes of a word, for hex8.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hex8 decodes the eight hex digits of x (ASCII, the first in the low
// byte) into dst[0:4] and says which digits it saw (dst is garbage when
// hexInvalid). Each byte is classified by adding to it so that its high
// bit ends up set exactly at and above a bound; a byte is below 0x80 (as
// checked first), so no addition carries into the next byte.
func hex8(dst []byte, x uint64) uint64 {
	if x&highs != 0 {
		return hexInvalid
	}
	digit := (x + (0x80-'0')*ones) &^ (x + (0x80-'9'-1)*ones) & highs
	folded := x | 0x20*ones // 'A'-'F' to 'a'-'f'
	letter := (folded + (0x80-'a')*ones) &^ (folded + (0x80-'f'-1)*ones) & highs
	if digit|letter != highs {
		return hexInvalid
	}
	nibbles := x&(0x0f*ones) + letter>>7*9 // '0'-'9' to 0-9, letters to 10-15
	// Pair the digits (the first is the high nibble), then close the gaps.
	v := (nibbles<<4 | nibbles>>8) & 0x00ff00ff00ff00ff
	v = (v | v>>8) & 0x0000ffff0000ffff
	v = v | v>>16
	binary.LittleEndian.PutUint32(dst, uint32(v))
	// An upper-case letter is a letter without 0x20 (bit 5, moved to bit 7).
	if letter&^(x<<2) != 0 {
		return hexUpper
	}
	return hexLower
}

// idPrefix is how the beacon and the tailer begin every event they write.
const idPrefix = `{"event_id":"`

// rowEventID is the id of the event decoded into row from value. The
// beacon and the tailer write event_id first, so the id is read from the
// value in place when it starts so: decoding it again from the row (Get)
// allocates a string per record, a tenth of what landing a click costs.
// A JSON string without a backslash is its own contents, so this is the
// decoded value, except for an event that repeats the key (the decoder
// keeps the last; the beacon and the tailer never write one): it is judged
// by its first id, the same way by every worker.
//
// field names the id's field ("" or event_id for the built-in schemas; a
// registry-typed sink's Config.EventIDField, whose binary values never
// begin with idPrefix).
func rowEventID(row *schemas.Row, value []byte, field string) (idKind, [16]byte) {
	if kind, id, ok := valueEventID(value); ok {
		return kind, id
	}
	if field == "" {
		field = "event_id"
	}
	if s, ok := row.Get(field).(string); ok {
		return parseEventID(s)
	}
	return idNone, [16]byte{}
}

// valueEventID is rowEventID's reading in place: ok is false when value
// does not begin with the id, and the row must be asked.
func valueEventID(value []byte) (idKind, [16]byte, bool) {
	if len(value) > len(idPrefix)+36 && string(value[:len(idPrefix)]) == idPrefix {
		rest := value[len(idPrefix):]
		for _, n := range [...]int{36, 32} {
			if rest[n] == '"' && bytes.IndexByte(rest[:n], '\\') < 0 {
				kind, id := parseEventID(unsafe.String(&rest[0], n))
				return kind, id, true
			}
		}
	}
	return idNone, [16]byte{}, false
}

// dedupHistory reads what a partition's dedup state is rebuilt from; the
// kgo implementation is below, tests without a broker leave it nil (every
