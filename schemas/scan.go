package schemas

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a small JSON tokenizer over one value. It allocates nothing: string
// contents are unescaped into caller-owned buffers and everything else is
// returned as spans of the input. It is strict (RFC 8259): the decoder must
// reject what DuckDB or a later reader would choke on, not repair it, except
// that invalid UTF-8 inside strings is replaced by U+FFFD as encoding/json does.
type scanner struct {
	data []byte
	pos  int
}

// maxDepth bounds nesting inside free-form values so a hostile body of a million
// '[' cannot grow the stack without limit.
const maxDepth = 256

var (
	errSyntax  = errors.New("syntax error")
	errTooDeep = errors.New("nesting deeper than 256")
	errEOF     = errors.New("unexpected end of input")
	errControl = errors.New("control character in string")
	errBadEsc  = errors.New("invalid escape in string")
)

func (s *scanner) skipWS() {
	// Fast path: compact JSON has no whitespace between tokens, and no byte
	// above the space character is whitespace.
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the end.
func (s *scanner) peek() byte {
	s.skipWS()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.pos >= len(s.data) {
			return errEOF
		}
		return errSyntax
	}
	s.pos++
	return nil
}

// readString consumes a string (the cursor is on its opening quote) and appends
// its unescaped contents to dst.
func (s *scanner) readString(dst []byte) ([]byte, error) {
	s.pos++ // opening quote
	start := len(dst)
	// ascii stays true while every raw byte copied is below 0x80; such a
	// string needs no UTF-8 check. Escapes only ever append valid UTF-8.
	ascii := true
	for {
		// Copy the run of plain bytes in one go: the common case has no
		// escapes. Eight bytes are checked at a time until one of them ends
		// the run.
		d := s.data
		i := s.pos
		for i < len(d) {
			if i+8 <= len(d) {
				w := binary.LittleEndian.Uint64(d[i:])
				ascii = ascii && w&highBits == 0
				stop := runEnd(w)
				if stop == 0 {
					i += 8
					continue
				}
				// The lowest flagged byte is a true match (a false flag can
				// only sit above one), so this is the run's exact end.
				i += bits.TrailingZeros64(stop) / 8
				break
			}
			c := d[i]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			ascii = ascii && c < utf8.RuneSelf
			i++
		}
		dst = append(dst, d[s.pos:i]...)
		s.pos = i
		if s.pos >= len(s.data) {
			return dst, errEOF
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !ascii && !utf8.Valid(dst[start:]) {
				fixed := []byte(string([]rune(string(dst[start:]))))
				dst = append(dst[:start], fixed...)
			}
			return dst, nil
		case c < 0x20:
			return dst, errControl
		}
		// Backslash escape.
		if s.pos+1 >= len(s.data) {
			return dst, errEOF
		}
		e := s.data[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return dst, errBadEsc
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by \u and a low one; a lone
				// surrogate becomes U+FFFD, as in encoding/json.
				r2 := rune(-1)
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					save := s.pos
					s.pos += 2
					if v, ok := s.hex4(); ok {
						r2 = v
					} else {
						return dst, errBadEsc
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						s.pos = save // the second escape stands on its own
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, errBadEsc
		}
	}
}

// Word-at-a-time byte tests (eight bytes in a uint64, little-endian). For
// each byte, hasZero sets its high bit if the byte is zero and hasLess if it
// is below n (n <= 0x80); a borrow can also flag a byte above a true match,
// never below one, so the lowest flagged byte is always exact.
const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

func hasZero(w uint64) uint64 { return (w - lowBits) & ^w & highBits }

func hasLess(w uint64, n byte) uint64 { return (w - lowBits*uint64(n)) & ^w & highBits }

// runEnd flags the bytes of w that end a run of plain string bytes: a quote,
// a backslash or a control character.
func runEnd(w uint64) uint64 {
	return hasZero(w^(lowBits*'"')) | hasZero(w^(lowBits*'\\')) | hasLess(w, 0x20)
}

// plain8 reports whether none of the 8 bytes of w ends a run of plain
// string bytes or is non-ASCII. Only the answer for the whole word is
// needed, so it skips runEnd's masks by ^w, which only keep a borrow from
// flagging a byte above a true match (with runEnd, AppendJSONString took
// a third longer).
func plain8(w uint64) bool {
	quote, backslash := w^(lowBits*'"'), w^(lowBits*'\\')
	return (w|(w-lowBits*0x20)|(quote-lowBits)|(backslash-lowBits))&highBits == 0
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[s.pos : s.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.pos += 4
	return r, true
}

// skipString consumes a string without keeping it, checking escapes.
func (s *scanner) skipString() error {
	s.pos++
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return nil
		case c < 0x20:
			return errControl
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return errEOF
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				s.pos += 2
				if _, ok := s.hex4(); !ok {
					return errBadEsc
				}
			default:
				return errBadEsc
			}
		default:
			s.pos++
		}
	}
	return errEOF
}

// readNumber consumes a JSON number and returns its text and whether it is
// written as an integer (no fraction, no exponent).
func (s *scanner) readNumber() (raw []byte, integer bool, err error) {
	start := s.pos
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return nil, false, errSyntax
	}
	integer = true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, false, errSyntax
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return nil, false, errSyntax
		}
	}
	s.pos = i
	return d[start:i], integer, nil
}

// literal consumes the literal word (true, false, null) at the cursor.
func (s *scanner) literal(word string) bool {
	if len(s.data)-s.pos >= len(word) && string(s.data[s.pos:s.pos+len(word)]) == word {
		s.pos += len(word)
		return true
	}
	return false
}

// skipValue consumes any JSON value, checking its syntax, and returns its text.
func (s *scanner) skipValue(depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	c := s.peek()
	start := s.pos
	var err error
	switch c {
	case 0:
		return nil, errEOF
	case '"':
		err = s.skipString()
	case '{':
		s.pos++
		if s.peek() == '}' {
			s.pos++
			break
		}
		for {
			if s.peek() != '"' {
				return nil, errSyntax
			}
			if err = s.skipString(); err != nil {
				return nil, err
			}
			if err = s.expect(':'); err != nil {
				return nil, err
			}
			if _, err = s.skipValue(depth + 1); err != nil {
				return nil, err
			}
			c := s.peek()
			s.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				return nil, errSyntax
			}
		}
	case '[':
		s.pos++
		if s.peek() == ']' {
			s.pos++
			break
		}
		for {
			if _, err = s.skipValue(depth + 1); err != nil {
				return nil, err
			}
			c := s.peek()
			s.pos++
			if c == ']' {
				break
			}
			if c != ',' {
				return nil, errSyntax
			}
		}
	case 't':
		if !s.literal("true") {
			err = errSyntax
		}
	case 'f':
		if !s.literal("false") {
			err = errSyntax
		}
	case 'n':
		if !s.literal("null") {
			err = errSyntax
		}
	default:
		_, _, err = s.readNumber()
	}
	if err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// parseInt parses a decimal integer without allocating.
func parseInt(raw []byte) (int64, bool) {
	neg := false
	if len(raw) > 0 && raw[0] == '-' {
		neg = true
		raw = raw[1:]
	}
	if len(raw) == 0 || len(raw) > 19 { // 19 digits cannot overflow a uint64
		return 0, false
	}
	var n uint64
	for _, c := range raw {
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// parseFloat parses a JSON number as float64.
func parseFloat(raw []byte) (float64, error) {
	return strconv.ParseFloat(string(raw), 64)
}
