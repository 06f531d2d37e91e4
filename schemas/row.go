package schemas

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// foldUnknown rewrites the catch-all value as one JSON object holding its own
// members followed by the unknown top-level members. A folded name that is
// already taken gets leading underscores until it is unique. The names in
// use are kept end to end in the row's scratch, so folding allocates nothing
// once the row has seen an event like it.
func (r *Row) foldUnknown() {
	ca := &r.vals[r.schema.catchAll]
	out := append(r.catchAllBuf[:0], '{')
	names, ends := r.foldNames[:0], r.foldEnds[:0]
	if ca.set {
		inner := bytes.TrimSpace(ca.buf)
		inner = bytes.TrimSpace(inner[1 : len(inner)-1])
		out = append(out, inner...)
		names, ends = appendObjectKeys(names, ends, ca.buf)
	}
	for j := 0; j < len(r.unknownSpans); j += 4 {
		sp := r.unknownSpans[j : j+4]
		key := r.unknownBuf[sp[0]:sp[1]]
		under := 0
		for nameTaken(names, ends, under, key) {
			under++
		}
		start := len(names)
		for range under {
			names = append(names, '_')
		}
		names = append(names, key...)
		ends = append(ends, len(names))
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendQuoted(out, names[start:])
		out = append(out, ':')
		out = append(out, r.unknownBuf[sp[2]:sp[3]]...)
	}
	out = append(out, '}')
	r.foldNames, r.foldEnds = names, ends
	r.catchAllBuf = ca.buf[:0]
	ca.buf = out
	ca.set = true
}

// appendObjectKeys appends the member names of a JSON object already checked
// by the scanner to names, unescaped, and each one's end to ends.
func appendObjectKeys(names []byte, ends []int, obj []byte) ([]byte, []int) {
	s := scanner{data: obj}
	if s.expect('{') != nil || s.peek() == '}' {
		return names, ends
	}
	for s.peek() == '"' {
		var err error
		if names, err = s.readString(names); err != nil || s.expect(':') != nil {
			return names[:lastEnd(ends)], ends
		}
		ends = append(ends, len(names))
		if _, err := s.skipValue(1); err != nil || s.peek() != ',' {
			return names, ends
		}
		s.pos++
	}
	return names, ends
}

func lastEnd(ends []int) int {
	if len(ends) == 0 {
		return 0
	}
	return ends[len(ends)-1]
}

// nameTaken reports whether under underscores followed by key is one of the
// names (kept end to end in names, ending at ends).
func nameTaken(names []byte, ends []int, under int, key []byte) bool {
	start := 0
	for _, end := range ends {
		n := names[start:end]
		start = end
		if len(n) != under+len(key) || !bytes.Equal(n[under:], key) {
			continue
		}
		if bytes.Count(n[:under], []byte{'_'}) == under {
			return true
		}
	}
	return false
}

// Has reports whether the field at column index i has a (non-null) value.
func (r *Row) Has(i int) bool { return r.vals[i].set }

// Time returns the event time (the schema's TimeField), if present.
func (r *Row) Time() (time.Time, bool) {
	v := &r.vals[r.schema.time]
	if !v.set {
		return time.Time{}, false
	}
	return time.UnixMicro(v.num).UTC(), true
}

// TimeOr returns the event time, or fallback (the record time) when the event has none.
func (r *Row) TimeOr(fallback time.Time) time.Time {
	if t, ok := r.Time(); ok {
		return t
	}
	return fallback
}

// StringBytes returns the bytes of the string field name as decoded, or
// nil when the field is unset or not a string. They are the row's own and
// valid until the next Decode or Reset: for comparing a field across rows
// without the copy Get makes.
func (r *Row) StringBytes(name string) []byte {
	i, ok := r.schema.index[name]
	if !ok || !r.vals[i].set || r.schema.Fields[i].Type != TypeString {
		return nil
	}
	return r.vals[i].buf
}

// Get returns the value of the named field as a Go value: string (also for
// JSON columns, as JSON text), int64, float64, bool, time.Time (UTC),
// map[string]string, or nil when absent. It allocates; it is for tests, the
// beacon and tools, not for the sink's hot path.
func (r *Row) Get(name string) any {
	i, ok := r.schema.index[name]
	if !ok || !r.vals[i].set {
		return nil
	}
	v := &r.vals[i]
	switch r.schema.Fields[i].Type {
	case TypeInt64:
		return v.num
	case TypeFloat64:
		return v.float
	case TypeBool:
		return v.bool
	case TypeTimestamp:
		return time.UnixMicro(v.num).UTC()
	case TypeStringMap:
		m := make(map[string]string, len(v.spans)/4)
		for j := 0; j < len(v.spans); j += 4 {
			m[string(v.buf[v.spans[j]:v.spans[j+1]])] = string(v.buf[v.spans[j+2]:v.spans[j+3]])
		}
		return m
	default:
		return string(v.buf)
	}
}

// Set stores a value in the named field, as the beacon does when it adds
// event_id, received_at, ip and user_agent. The Go type must match the field:
// string (a JSON object's text for JSON fields), int64, float64, bool,
// time.Time or map[string]string; nil clears an optional field.
func (r *Row) Set(name string, val any) error {
	i, ok := r.schema.index[name]
	if !ok {
		return fmt.Errorf("schemas: %s has no field %q", r.schema.Name, name)
	}
	f := &r.schema.Fields[i]
	v := &r.vals[i]
	if val == nil {
		if f.Required {
			return r.fieldErr(i, ErrMissingField, "cannot clear a required field")
		}
		v.set = false
		return nil
	}
	bad := func() error {
		return r.fieldErr(i, ErrWrongType, fmt.Sprintf("want %s, got Go %T", f.Type, val))
	}
	v.buf, v.spans = v.buf[:0], v.spans[:0]
	switch f.Type {
	case TypeString:
		s, ok := val.(string)
		if !ok {
			return bad()
		}
		if len(f.Enum) > 0 && !inEnum(f.Enum, []byte(s)) {
			return r.fieldErr(i, ErrBadValue, strconv.Quote(s)+" is not one of "+joinEnum(f.Enum))
		}
		v.buf = append(v.buf, strings.ToValidUTF8(s, "\uFFFD")...)
	case TypeJSON:
		s, ok := val.(string)
		if !ok {
			return bad()
		}
		sc := scanner{data: []byte(s)}
		if sc.peek() != '{' {
			return r.fieldErr(i, ErrWrongType, "want a JSON object")
		}
		if _, err := sc.skipValue(1); err != nil || sc.peek() != 0 {
			return r.fieldErr(i, ErrMalformed, "not a single JSON object")
		}
		v.buf = append(v.buf, strings.ToValidUTF8(s, "\uFFFD")...)
	case TypeInt64:
		n, ok := val.(int64)
		if !ok {
			return bad()
		}
		v.num = n
	case TypeFloat64:
		x, ok := val.(float64)
		if !ok {
			return bad()
		}
		v.float = x
	case TypeBool:
		b, ok := val.(bool)
		if !ok {
			return bad()
		}
		v.bool = b
	case TypeTimestamp:
		t, ok := val.(time.Time)
		if !ok {
			return bad()
		}
		v.num = t.UnixMicro()
	case TypeStringMap:
		m, ok := val.(map[string]string)
		if !ok {
			return bad()
		}
		// In key order, so that a row's JSON is the same bytes every time.
		for _, k := range slices.Sorted(maps.Keys(m)) {
			s := m[k]
			k0 := len(v.buf)
			v.buf = append(v.buf, strings.ToValidUTF8(k, "\uFFFD")...)
			k1 := len(v.buf)
			v.buf = append(v.buf, strings.ToValidUTF8(s, "\uFFFD")...)
			v.spans = append(v.spans, k0, k1, k1, len(v.buf))
		}
	}
	if f.MaxBytes > 0 && len(v.buf) > f.MaxBytes {
		v.set = false
		return r.fieldErr(i, ErrBadValue, tooLong(f, len(v.buf)))
	}
	v.set = true
	return nil
}

// AppendJSON appends the row as one JSON object in canonical form: fields in
// schema order, absent ones omitted, timestamps as RFC 3339 UTC with
// nanoseconds, unknown members already folded into the catch-all object.
// Decoding the output gives the same row. Non-finite floats are written as the
// strings "NaN", "+Inf" and "-Inf", which Decode accepts back.
func (r *Row) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	first := true
	for i := range r.schema.Fields {
		v := &r.vals[i]
		if !v.set {
			continue
		}
		f := &r.schema.Fields[i]
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendQuoted(dst, []byte(f.Name))
		dst = append(dst, ':')
		switch f.Type {
		case TypeString:
			dst = appendQuoted(dst, v.buf)
		case TypeJSON:
			dst = append(dst, v.buf...)
		case TypeInt64:
			dst = strconv.AppendInt(dst, v.num, 10)
		case TypeFloat64:
			switch {
			case math.IsNaN(v.float):
				dst = append(dst, `"NaN"`...)
			case math.IsInf(v.float, 1):
				dst = append(dst, `"+Inf"`...)
			case math.IsInf(v.float, -1):
				dst = append(dst, `"-Inf"`...)
			default:
				dst = strconv.AppendFloat(dst, v.float, 'g', -1, 64)
			}
		case TypeBool:
			dst = strconv.AppendBool(dst, v.bool)
		case TypeTimestamp:
			dst = append(dst, '"')
			dst = time.UnixMicro(v.num).UTC().AppendFormat(dst, time.RFC3339Nano)
			dst = append(dst, '"')
		case TypeStringMap:
			dst = append(dst, '{')
			for j := 0; j < len(v.spans); j += 4 {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = appendQuoted(dst, v.buf[v.spans[j]:v.spans[j+1]])
				dst = append(dst, ':')
				dst = appendQuoted(dst, v.buf[v.spans[j+2]:v.spans[j+3]])
			}
			dst = append(dst, '}')
		}
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as a JSON string. s is valid UTF-8 (the decoder and
// Set guarantee it).
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, c)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscape appends the JSON escape of an ASCII byte that cannot stand
// in a JSON string as it is: a quote, a backslash or a control character.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	default:
		return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
	}
}

// le64 reads the first 8 bytes of s as one little-endian word.
func le64(s string) uint64 {
	_ = s[7] // one bounds check, then a single load
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func itoa(n int) string { return strconv.Itoa(n) }

// quoteDetail quotes user input for an error message, cut to a readable length.
func quoteDetail(b []byte) string {
	const max = 64
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "…"
	}
	return strconv.Quote(string(b))
}

func joinEnum(enum []string) string { return strings.Join(enum, ", ") }

func utf8Valid(b []byte) bool { return utf8.Valid(b) }

// AppendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, so the output is always valid JSON and valid UTF-8; U+2028 and
// U+2029 are escaped for JavaScript readers. Agents encode events with it.
func AppendJSONString(dst []byte, s string) []byte {
	dst, _ = AppendJSONStringValid(dst, s)
	return dst
}

// AppendJSONStringValid is AppendJSONString that also reports whether s
// was valid UTF-8 (nothing replaced), saving a caller that flags invalid
// input a second pass over it.
func AppendJSONStringValid(dst []byte, s string) ([]byte, bool) {
	valid := true
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Most of a log line needs no escaping: skip it 8 bytes at a time.
		if i+8 <= len(s) && plain8(le64(s[i:])) {
			i += 8
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			valid = false
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript readers.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), valid
}
