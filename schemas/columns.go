package schemas

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"millrace/schemas/format"
)

// Registry-typed events: a topic whose values are written with schemas of
// the schema registry (Avro, Protobuf, JSON Schema) lands as one column per
// top-level field of the value's schema (format.Columnar), not as one of the
// built-in schemas. The columns map onto the field types here:
//
//	bool                 -> TypeBool
//	int32, int64         -> TypeInt64 (an int32 widened)
//	float32, float64     -> TypeFloat64 (a float32 widened)
//	string               -> TypeString
//	bytes                -> TypeString, the bytes in standard base64
//	timestamp            -> TypeTimestamp
//	json                 -> TypeJSON, the value's JSON text (any JSON value)
//
// Widening int32 to int64 and float32 to float64 makes the usual compatible
// changes of a registry schema (Avro's promotions, Protobuf's int32 to
// int64) the same column. Every column is optional: a field a later schema
// version removes is null in the rows written with it.

// RecordTimeField is the column a registry-typed schema adds for the
// record's timestamp when no field of the value is its time
// (FromColumns); a value field of that name is refused as a clash.
const RecordTimeField = "_record_time"

// ColumnType is the field type a registry column lands as.
func ColumnType(k format.ColumnKind) Type {
	switch k {
	case format.KindBool:
		return TypeBool
	case format.KindInt32, format.KindInt64:
		return TypeInt64
	case format.KindFloat32, format.KindFloat64:
		return TypeFloat64
	case format.KindString, format.KindBytes:
		return TypeString
	case format.KindTimestamp:
		return TypeTimestamp
	}
	return TypeJSON
}

// ColumnField is the optional field a registry column lands as.
func ColumnField(c format.Column) Field {
	return Field{Name: c.Name, Type: ColumnType(c.Kind), Doc: "registry field (" + c.Kind.String() + ")"}
}

// FromColumns returns the schema named name with a field per column, in
// their order. timeField names the column that is the event's time, a
// timestamp; "" adds RecordTimeField, a required timestamp the caller
// sets from the record (Row.Set) and the event's time. Column names follow
// Extend's rules: unique even ignoring case, and not dt or hr (the Hive
// partition columns).
func FromColumns(name, timeField string, cols []format.Column) (*Schema, error) {
	fields := make([]Field, 0, len(cols)+1)
	for _, c := range cols {
		fields = append(fields, ColumnField(c))
	}
	if timeField == "" {
		timeField = RecordTimeField
		fields = append(fields, Field{Name: RecordTimeField, Type: TypeTimestamp, Required: true,
			Doc: "the Kafka record's timestamp"})
	}
	for i, f := range fields {
		for _, r := range reservedNames {
			if strings.EqualFold(f.Name, r) {
				return nil, fmt.Errorf("schemas: %s: field %q would hide the Hive partition column %s", name, f.Name, r)
			}
		}
		for _, g := range fields[:i] {
			if strings.EqualFold(f.Name, g.Name) {
				return nil, fmt.Errorf("schemas: %s: fields %q and %q are one column to engines that ignore case", name, g.Name, f.Name)
			}
		}
	}
	for i := range fields {
		fields[i].Since = 1
	}
	return New(name, 1, timeField, fields)
}

// SetColumns replaces the row's values with those of value, a record
// decoded by a format.Schema whose columns are cols; fields of the row
// that cols lack are null, and RecordTimeField is left for the caller. A
// column that is not nullable and absent from value holds its kind's zero
// value (false, 0, ""; null for timestamps and JSON). Each
// column must be a field of the row's schema of its type (ColumnType), and
// each value must fit it: a value that does not is a *ValidationError
// (ErrWrongType, ErrBadValue or ErrBadTimestamp), for the dead letters.
func (r *Row) SetColumns(cols []format.Column, value map[string]any) error {
	r.Reset()
	for _, c := range cols {
		i, ok := r.schema.index[c.Name]
		if !ok {
			return &ValidationError{Schema: r.schema.Name, Field: c.Name, Err: ErrWrongType,
				Detail: "the value's schema has the field and the table has no column for it"}
		}
		f := &r.schema.Fields[i]
		if want := ColumnType(c.Kind); want != f.Type {
			return r.fieldErr(i, ErrWrongType, fmt.Sprintf("the value's schema makes it %s, which lands as %s, and the table's column is %s",
				c.Kind, want, f.Type))
		}
		v, present := value[c.Name]
		if !present && !c.Nullable {
			// A field without presence that is absent holds its zero
			// value: proto3 does not send zeros.
			v = zeroValue(c.Kind)
		}
		if v == nil {
			continue
		}
		if err := r.setColumn(i, c, v); err != nil {
			return err
		}
	}
	return nil
}

// setColumn sets field i, of column c, to v (not nil).
func (r *Row) setColumn(i int, c format.Column, v any) error {
	val := &r.vals[i]
	bad := func() error {
		return r.fieldErr(i, ErrWrongType, fmt.Sprintf("want %s, got Go %T", c.Kind, v))
	}
	switch c.Kind {
	case format.KindBool:
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		val.bool = b
	case format.KindInt32, format.KindInt64:
		n, ok, fits := integer(v)
		if !ok {
			return bad()
		}
		if !fits {
			return r.fieldErr(i, ErrBadValue, fmt.Sprintf("%v does not fit a 64-bit integer", v))
		}
		val.num = n
	case format.KindFloat32, format.KindFloat64:
		switch x := v.(type) {
		case float32:
			val.float = float64(x)
		case float64:
			val.float = x
		case json.Number:
			f, err := x.Float64()
			if err != nil {
				return r.fieldErr(i, ErrBadValue, "number out of range: "+x.String())
			}
			val.float = f
		default:
			n, ok, _ := integer(v)
			if !ok {
				return bad()
			}
			val.float = float64(n)
		}
	case format.KindString:
		s, ok := v.(string)
		if !ok {
			return bad()
		}
		val.buf = append(val.buf[:0], s...)
		if !utf8.ValidString(s) {
			val.buf = []byte(strings.ToValidUTF8(s, "\uFFFD"))
		}
	case format.KindBytes:
		b, ok := v.([]byte)
		if !ok {
			return bad()
		}
		val.buf = base64.StdEncoding.AppendEncode(val.buf[:0], b)
	case format.KindTimestamp:
		t, err := columnTime(c.Unit, v)
		if err != nil {
			return r.fieldErr(i, ErrBadTimestamp, err.Error())
		}
		val.num = t.UnixMicro()
	default:
		text, err := json.Marshal(v)
		if err != nil {
			return r.fieldErr(i, ErrBadValue, "no JSON text: "+err.Error())
		}
		val.buf = append(val.buf[:0], text...)
	}
	val.set = true
	return nil
}

// zeroValue is the value an absent field of kind k holds when it has no
// presence; nil where there is no natural zero.
func zeroValue(k format.ColumnKind) any {
	switch k {
	case format.KindBool:
		return false
	case format.KindInt32, format.KindInt64:
		return int64(0)
	case format.KindFloat32, format.KindFloat64:
		return float64(0)
	case format.KindString:
		return ""
	case format.KindBytes:
		return []byte{}
	}
	return nil
}

// integer reads a decoded integer: ok is false for another type, fits
// false for an unsigned one past int64.
func integer(v any) (n int64, ok, fits bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true, true
	case int64:
		return x, true, true
	case int:
		return int64(x), true, true
	case uint32:
		return int64(x), true, true
	case uint64:
		return int64(x), true, x <= math.MaxInt64
	case json.Number:
		n, err := x.Int64()
		return n, err == nil, err == nil
	}
	return 0, false, false
}

// minTime and maxTime bound a timestamp column: microseconds since the
// epoch in an int64, and years a timestamp can name in RFC 3339.
var (
	minTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// columnTime reads a timestamp given as unit says.
func columnTime(unit format.TimeUnit, v any) (time.Time, error) {
	var t time.Time
	switch unit {
	case format.UnitMillis, format.UnitMicros:
		n, ok, _ := integer(v)
		if !ok {
			return t, fmt.Errorf("want an integer, got Go %T", v)
		}
		if unit == format.UnitMillis {
			t = time.UnixMilli(n)
		} else {
			t = time.UnixMicro(n)
		}
	case format.UnitSecondsNanos:
		m, ok := v.(map[string]any)
		if !ok {
			return t, fmt.Errorf("want a google.protobuf.Timestamp, got Go %T", v)
		}
		var seconds, nanos int64
		if s, present := m["seconds"]; present {
			if seconds, ok, _ = integer(s); !ok {
				return t, fmt.Errorf("seconds: want an integer, got Go %T", s)
			}
		}
		if ns, present := m["nanos"]; present {
			if nanos, ok, _ = integer(ns); !ok || nanos < 0 || nanos > 999_999_999 {
				return t, fmt.Errorf("nanos %v: want 0 to 999,999,999", ns)
			}
		}
		t = time.Unix(seconds, nanos)
	case format.UnitRFC3339:
		s, ok := v.(string)
		if !ok {
			return t, fmt.Errorf("want an RFC 3339 string, got Go %T", v)
		}
		var err error
		if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return t, fmt.Errorf("%s is not RFC 3339", quoteDetail([]byte(s)))
		}
	default:
		return t, fmt.Errorf("the column has no time unit")
	}
	if t.Before(minTime) || t.After(maxTime) {
		return t, fmt.Errorf("%v is out of range (years 0 to 9999)", v)
	}
	return t.UTC(), nil
}
