package schemas

import (
	"bytes"
	"fmt"
	"math"
	"sync"
)

// Row is one decoded event: a typed value per schema field. A Row is reused
// across Decode calls to avoid allocating per event; it is not safe for
// concurrent use. Values read from it (String, JSON) are copies.
type Row struct {
	schema *Schema
	vals   []value
	// Unknown top-level members, in input order: unescaped keys and raw JSON
	// values, both in unknownBuf, 4 offsets per member.
	unknownBuf   []byte
	unknownSpans []int
	key          []byte // scratch for the member name being read
	// follows[i+1] is the field whose member came after field i's (after
	// none, for i = -1) when last seen, or -1; see guessKey.
	follows     []int
	catchAllBuf []byte // scratch for building the folded catch-all object
	foldNames   []byte // scratch: the folded object's member names, end to end
	foldEnds    []int  // where each of foldNames ends
}

// value holds one field's decoded value.
type value struct {
	set   bool
	buf   []byte  // string contents, JSON text, or map keys and values
	num   int64   // TypeInt64; TypeTimestamp as microseconds since the epoch
	float float64 // TypeFloat64
	bool  bool    // TypeBool
	spans []int   // TypeStringMap: 4 offsets into buf per entry (key start/end, value start/end)
}

// NewRow returns an empty row for the schema.
func (s *Schema) NewRow() *Row {
	r := &Row{schema: s, vals: make([]value, len(s.Fields)), follows: make([]int, len(s.Fields)+1)}
	for i := range r.follows {
		r.follows[i] = -1
	}
	return r
}

// Schema returns the row's schema.
func (r *Row) Schema() *Schema { return r.schema }

// Reset clears every value.
func (r *Row) Reset() {
	for i := range r.vals {
		v := &r.vals[i]
		v.set = false
		v.buf = v.buf[:0]
		v.spans = v.spans[:0]
	}
	r.unknownBuf = r.unknownBuf[:0]
	r.unknownSpans = r.unknownSpans[:0]
}

// Decode replaces the row's contents with the event in data, a JSON object. On
// failure it returns a *ValidationError and the row's contents are undefined.
func (r *Row) Decode(data []byte) error {
	r.Reset()
	s := scanner{data: data}
	if err := s.expect('{'); err != nil {
		return r.malformed(err, &s)
	}
	if s.peek() == '}' {
		s.pos++
	} else {
		prev := -1 // the last known field read, -1 before the first
		for {
			if s.peek() != '"' {
				return r.malformed(errSyntax, &s)
			}
			i, ok := r.guessKey(&s, prev)
			if !ok {
				var err error
				r.key, err = s.readString(r.key[:0])
				if err != nil {
					return r.malformed(err, &s)
				}
				if i, ok = r.schema.lookup(r.key); ok && r.schema.plainName[i] {
					r.follows[prev+1] = i
				}
			}
			if err := s.expect(':'); err != nil {
				return r.malformed(err, &s)
			}
			s.skipWS()
			if ok {
				if err := r.decodeField(i, &s); err != nil {
					return err
				}
				prev = i
			} else {
				raw, err := s.skipValue(1)
				if err != nil {
					return r.malformed(err, &s)
				}
				r.addUnknown(r.key, raw)
			}
			c := s.peek()
			s.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				return r.malformed(errSyntax, &s)
			}
		}
	}
	if s.peek() != 0 {
		return &ValidationError{Schema: r.schema.Name, Err: ErrMalformed, Detail: "data after the object"}
	}
	return r.finish()
}

// guessKey consumes the member name at the cursor (on its opening quote) if
// it is, byte for byte, the name of the field that followed field prev in an
// earlier event, and returns that field. Events from one producer repeat one
// key order, so this usually replaces unescaping the name and looking it up.
// Only names without quotes, backslashes or control characters are guessed:
// for them the raw bytes are the name.
func (r *Row) guessKey(s *scanner, prev int) (int, bool) {
	i := r.follows[prev+1]
	if i < 0 {
		return 0, false
	}
	name := r.schema.Fields[i].Name
	end := s.pos + 1 + len(name)
	if end >= len(s.data) || s.data[end] != '"' || string(s.data[s.pos+1:end]) != name {
		return 0, false
	}
	s.pos = end + 1
	return i, true
}

func (r *Row) malformed(err error, s *scanner) error {
	return &ValidationError{Schema: r.schema.Name, Err: ErrMalformed,
		Detail: err.Error() + " at byte " + itoa(s.pos)}
}

func (r *Row) fieldErr(i int, class error, detail string) error {
	return &ValidationError{Schema: r.schema.Name, Field: r.schema.Fields[i].Name, Err: class, Detail: detail}
}

// jsonKind names the JSON type starting with c, for error details.
func jsonKind(c byte) string {
	switch c {
	case '"':
		return "got a string"
	case '{':
		return "got an object"
	case '[':
		return "got an array"
	case 't', 'f':
		return "got a boolean"
	case 'n':
		return "got null"
	}
	return "got a number"
}

func (r *Row) decodeField(i int, s *scanner) error {
	f := &r.schema.Fields[i]
	v := &r.vals[i]
	v.set = false
	v.buf = v.buf[:0]
	v.spans = v.spans[:0]
	c := s.peek()
	if c == 'n' {
		// null is the same as absent: optional columns get a null, required
		// fields fail the missing check in finish.
		if !s.literal("null") {
			return r.malformed(errSyntax, s)
		}
		return nil
	}
	wrong := func() error {
		if _, err := s.skipValue(1); err != nil {
			return r.malformed(err, s)
		}
		return r.fieldErr(i, ErrWrongType, "want "+f.Type.String()+", "+jsonKind(c))
	}
	switch f.Type {
	case TypeString:
		if c != '"' {
			return wrong()
		}
		var err error
		if v.buf, err = s.readString(v.buf); err != nil {
			return r.malformed(err, s)
		}
	case TypeBool:
		switch {
		case s.literal("true"):
			v.bool = true
		case s.literal("false"):
			v.bool = false
		default:
			return wrong()
		}
	case TypeInt64:
		if c != '-' && (c < '0' || c > '9') {
			return wrong()
		}
		raw, integer, err := s.readNumber()
		if err != nil {
			return r.malformed(err, s)
		}
		n, ok := parseInt(raw)
		if !integer || !ok {
			// 1e3 or 12.0 are integers written oddly (JavaScript does that);
			// anything with a real fraction or beyond 2^53 is refused.
			f, err := parseFloat(raw)
			if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return r.fieldErr(i, ErrWrongType, "want an integer, got "+string(raw))
			}
			n = int64(f)
		}
		v.num = n
	case TypeFloat64:
		switch {
		case c == '"':
			// JSON has no NaN or infinities; Prometheus samples do.
			var err error
			if v.buf, err = s.readString(v.buf); err != nil {
				return r.malformed(err, s)
			}
			switch string(v.buf) {
			case "NaN":
				v.float = math.NaN()
			case "+Inf", "Inf":
				v.float = math.Inf(1)
			case "-Inf":
				v.float = math.Inf(-1)
			default:
				return r.fieldErr(i, ErrWrongType, "want a number, got the string "+quoteDetail(v.buf))
			}
			v.buf = v.buf[:0]
		case c == '-' || (c >= '0' && c <= '9'):
			raw, _, err := s.readNumber()
			if err != nil {
				return r.malformed(err, s)
			}
			if v.float, err = parseFloat(raw); err != nil {
				return r.fieldErr(i, ErrBadValue, "number out of range: "+string(raw))
			}
		default:
			return wrong()
		}
	case TypeTimestamp:
		if err := r.decodeTime(i, s, c); err != nil {
			return err
		}
	case TypeStringMap:
		if c != '{' {
			return wrong()
		}
		if err := r.decodeStringMap(i, s); err != nil {
			return err
		}
	case TypeJSON:
		if c != '{' {
			return wrong()
		}
		raw, err := s.skipValue(1)
		if err != nil {
			return r.malformed(err, s)
		}
		v.buf = append(v.buf, raw...)
		if !utf8Valid(v.buf) {
			v.buf = bytes.ToValidUTF8(v.buf, []byte("\uFFFD"))
		}
	}
	v.set = true
	return nil
}

func (r *Row) decodeTime(i int, s *scanner, c byte) error {
	v := &r.vals[i]
	switch {
	case c == '"':
		var err error
		if v.buf, err = s.readString(v.buf); err != nil {
			return r.malformed(err, s)
		}
		us, ok := parseTimestamp(v.buf)
		if !ok {
			return r.fieldErr(i, ErrBadTimestamp, "want RFC 3339 or epoch milliseconds, got "+quoteDetail(v.buf))
		}
		v.buf = v.buf[:0]
		v.num = us
	case c == '-' || (c >= '0' && c <= '9'):
		raw, integer, err := s.readNumber()
		if err != nil {
			return r.malformed(err, s)
		}
		// Epoch milliseconds, as JavaScript's Date.now() gives them.
		ms, ok := parseInt(raw)
		if integer && ok && ms > -maxEpochMillis && ms < maxEpochMillis {
			v.num = ms * 1000
			break
		}
		f, err := parseFloat(raw)
		if err != nil || math.IsNaN(f) || f <= -maxEpochMillis || f >= maxEpochMillis {
			return r.fieldErr(i, ErrBadTimestamp, "epoch milliseconds out of range: "+string(raw))
		}
		v.num = int64(math.Round(f * 1000))
	default:
		if _, err := s.skipValue(1); err != nil {
			return r.malformed(err, s)
		}
		return r.fieldErr(i, ErrBadTimestamp, "want RFC 3339 or epoch milliseconds, "+jsonKind(c))
	}
	return nil
}

// maxEpochMillis keeps epoch-millisecond input within years 0000–9999, the range
// RFC 3339 can write back.
const maxEpochMillis = 253402300800000

func (r *Row) decodeStringMap(i int, s *scanner) error {
	v := &r.vals[i]
	s.pos++ // '{'
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.peek() != '"' {
			return r.malformed(errSyntax, s)
		}
		var err error
		kStart := len(v.buf)
		if v.buf, err = s.readString(v.buf); err != nil {
			return r.malformed(err, s)
		}
		kEnd := len(v.buf)
		if err := s.expect(':'); err != nil {
			return r.malformed(err, s)
		}
		c := s.peek()
		if c != '"' {
			if _, err := s.skipValue(1); err != nil {
				return r.malformed(err, s)
			}
			return r.fieldErr(i, ErrWrongType, "value of "+quoteDetail(v.buf[kStart:kEnd])+": want a string, "+jsonKind(c))
		}
		if v.buf, err = s.readString(v.buf); err != nil {
			return r.malformed(err, s)
		}
		v.spans = append(v.spans, kStart, kEnd, kEnd, len(v.buf))
		c = s.peek()
		s.pos++
		if c == '}' {
			return nil
		}
		if c != ',' {
			return r.malformed(errSyntax, s)
		}
	}
}

func (r *Row) addUnknown(key, raw []byte) {
	kStart := len(r.unknownBuf)
	r.unknownBuf = append(r.unknownBuf, key...)
	vStart := len(r.unknownBuf)
	r.unknownBuf = append(r.unknownBuf, raw...)
	r.unknownSpans = append(r.unknownSpans, kStart, vStart, vStart, len(r.unknownBuf))
}

// finish checks required fields and enums and folds unknown members into the
// catch-all column.
func (r *Row) finish() error {
	for _, i := range r.schema.checked {
		f := &r.schema.Fields[i]
		v := &r.vals[i]
		if f.Required && !v.set {
			return r.fieldErr(i, ErrMissingField, "absent or null")
		}
		if v.set && len(f.Enum) > 0 && !inEnum(f.Enum, v.buf) {
			return r.fieldErr(i, ErrBadValue, quoteDetail(v.buf)+" is not one of "+joinEnum(f.Enum))
		}
		if v.set && f.MaxBytes > 0 && len(v.buf) > f.MaxBytes {
			return r.fieldErr(i, ErrBadValue, tooLong(f, len(v.buf)))
		}
	}
	if len(r.unknownSpans) > 0 && r.schema.catchAll >= 0 {
		r.foldUnknown()
	}
	return nil
}

// tooLong says that a value of n bytes is past f's MaxBytes.
func tooLong(f *Field, n int) string {
	return fmt.Sprintf("%d bytes, more than the %d this field takes", n, f.MaxBytes)
}

func inEnum(enum []string, b []byte) bool {
	for _, e := range enum {
		if e == string(b) {
			return true
		}
	}
	return false
}

// rowPools hold one pool of rows per schema for Validate.
var rowPools sync.Map // *Schema -> *sync.Pool

// Validate decodes data against the schema and returns nil or a
// *ValidationError. Use a Row directly when the decoded values are needed.
func Validate(s *Schema, data []byte) error {
	p, _ := rowPools.LoadOrStore(s, &sync.Pool{New: func() any { return s.NewRow() }})
	pool := p.(*sync.Pool)
	row := pool.Get().(*Row)
	err := row.Decode(data)
	pool.Put(row)
	return err
}

// ValidateClick validates a click event, as the beacon does before producing it.
func ValidateClick(data []byte) error { return Validate(Click, data) }
