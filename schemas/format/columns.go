package format

import "strconv"

// Columns: how a sink lands a schema as a table. A schema whose top level is
// a record (Avro), a message (Protobuf) or an object (JSON Schema) describes
// one row per value, and each top-level field is a column. Nested values
// (records, arrays, maps, unions of several types) have no column type every
// engine shares, so they land as their JSON text: Decode's value written
// with encoding/json.

// ColumnKind is the type of a column.
type ColumnKind int

// The column kinds.
const (
	// KindBool is a boolean column.
	KindBool ColumnKind = iota + 1
	// KindInt32 is a 32-bit integer: Avro int, Protobuf int32, sint32,
	// sfixed32.
	KindInt32
	// KindInt64 is a 64-bit integer: Avro long, Protobuf int64, sint64,
	// sfixed64, uint32 and fixed32 (which Decode gives as int64), uint64
	// and fixed64 (given as uint64), a JSON Schema integer.
	KindInt64
	// KindFloat32 is Avro float, Protobuf float.
	KindFloat32
	// KindFloat64 is Avro double, Protobuf double, a JSON Schema number.
	KindFloat64
	// KindString is text: strings, Avro enums' symbols, Protobuf enums'
	// names.
	KindString
	// KindBytes is Avro bytes and fixed, Protobuf bytes.
	KindBytes
	// KindTimestamp is an instant: Avro timestamp-millis and
	// timestamp-micros, Protobuf google.protobuf.Timestamp, a JSON Schema
	// string of format date-time. TimeUnit says how Decode gives it.
	KindTimestamp
	// KindJSON is anything nested, landed as JSON text.
	KindJSON
)

// String names the kind as errors and the documentation spell it.
func (k ColumnKind) String() string {
	switch k {
	case KindBool:
		return "bool"
	case KindInt32:
		return "int32"
	case KindInt64:
		return "int64"
	case KindFloat32:
		return "float32"
	case KindFloat64:
		return "float64"
	case KindString:
		return "string"
	case KindBytes:
		return "bytes"
	case KindTimestamp:
		return "timestamp"
	case KindJSON:
		return "json"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// TimeUnit is how Decode gives a KindTimestamp column's value.
type TimeUnit int

// The time units.
const (
	// UnitNone: the column is not a timestamp.
	UnitNone TimeUnit = iota
	// UnitMillis: an int64 of milliseconds since the epoch (Avro
	// timestamp-millis).
	UnitMillis
	// UnitMicros: an int64 of microseconds since the epoch (Avro
	// timestamp-micros).
	UnitMicros
	// UnitSecondsNanos: a map with "seconds" and "nanos" (Protobuf's
	// google.protobuf.Timestamp message).
	UnitSecondsNanos
	// UnitRFC3339: an RFC 3339 string (JSON Schema format date-time).
	UnitRFC3339
)

// Column is one top-level field of a schema as a column.
type Column struct {
	// Name is the field's name, which is the key of its value in the map
	// Decode returns.
	Name string
	// Kind is the column's type.
	Kind ColumnKind
	// Nullable is set when a value may lack the field or hold null for it
	// (an Avro union with null, a Protobuf optional or message field, a
	// JSON Schema property that is not required).
	Nullable bool
	// Unit is how a KindTimestamp value is given; UnitNone otherwise.
	Unit TimeUnit
}

// Columnar is implemented by a Schema that can describe its top-level
// columns. Columns fails, saying why, when the schema's top level is not a
// record, message or object.
type Columnar interface {
	Columns() ([]Column, error)
}
