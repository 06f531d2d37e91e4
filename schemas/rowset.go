package schemas

import (
	"time"
	"unicode/utf8"
)

// Setters by column index, for rows built from something other than JSON
// (the OTLP schemas' rows, filled from pdata by schemas/otel). Unlike Set
// they neither look a name up nor box the value, and a string map keeps
// its entries in the order they are added, so a row built twice from the
// same input is the same row, entry for entry. The caller picks the
// setter of the field's type (FieldIndex gives the index); they check
// nothing else: no enum, no MaxBytes, so they are for schemas whose fields
// have neither.

// SetStringAt sets the string (or JSON text) field at column i; invalid
// UTF-8 becomes U+FFFD, as Set does.
func (r *Row) SetStringAt(i int, s string) {
	v := &r.vals[i]
	v.buf = appendValidUTF8(v.buf[:0], s)
	v.set = true
}

// SetInt64At sets the integer field at column i.
func (r *Row) SetInt64At(i int, n int64) {
	r.vals[i].num, r.vals[i].set = n, true
}

// SetFloat64At sets the number field at column i.
func (r *Row) SetFloat64At(i int, x float64) {
	r.vals[i].float, r.vals[i].set = x, true
}

// SetBoolAt sets the boolean field at column i.
func (r *Row) SetBoolAt(i int, b bool) {
	r.vals[i].bool, r.vals[i].set = b, true
}

// SetTimeAt sets the timestamp field at column i (microseconds are kept).
func (r *Row) SetTimeAt(i int, t time.Time) {
	r.vals[i].num, r.vals[i].set = t.UnixMicro(), true
}

// ClearAt makes the field at column i null.
func (r *Row) ClearAt(i int) {
	v := &r.vals[i]
	v.set = false
	v.buf, v.spans = v.buf[:0], v.spans[:0]
}

// StartMapAt makes the string map field at column i an empty map, to be
// filled by AddMapEntryAt.
func (r *Row) StartMapAt(i int) {
	v := &r.vals[i]
	v.buf, v.spans = v.buf[:0], v.spans[:0]
	v.set = true
}

// AddMapEntryAt appends the entry key: val to the string map at column i,
// after StartMapAt. The caller keeps keys unique.
func (r *Row) AddMapEntryAt(i int, key, val string) {
	v := &r.vals[i]
	k0 := len(v.buf)
	v.buf = appendValidUTF8(v.buf, key)
	k1 := len(v.buf)
	v.buf = appendValidUTF8(v.buf, val)
	v.spans = append(v.spans, k0, k1, k1, len(v.buf))
}

// appendValidUTF8 appends s with every invalid byte sequence replaced by
// U+FFFD, without the copy strings.ToValidUTF8 makes of valid text.
func appendValidUTF8(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return append(dst, s...)
	}
	for _, c := range s { // ranging yields U+FFFD for each invalid byte
		dst = utf8.AppendRune(dst, c)
	}
	return dst
}
