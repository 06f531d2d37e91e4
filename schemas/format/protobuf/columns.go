package protobuf

import (
	"errors"

	"google.golang.org/protobuf/reflect/protoreflect"

	"millrace/schemas/format"
)

// Columns describes the fields of the file's first message — the one a
// value without message indexes (Confluent's [0]) is, and the one
// Confluent's serializers write unless told otherwise — as columns
// (format.Columnar): each scalar as its kind (uint32 and fixed32 as int64,
// as Decode gives them; uint64 and fixed64 as int64 too, a value past
// 2^63-1 refused when landed), an enum as its value's name,
// google.protobuf.Timestamp as a timestamp, and other messages, repeated
// fields and maps as JSON. A field is nullable when it has presence
// (proto2 optional, proto3 optional, a oneof member, a message); a proto3
// scalar without it reads as its zero value when absent, which the wire
// does not carry.
func (s *schema) Columns() ([]format.Column, error) {
	if len(s.messages) == 0 {
		return nil, errors.New("protobuf: the schema declares no message: only a message's fields can be columns")
	}
	fields := s.messages[0].Fields()
	cols := make([]format.Column, 0, fields.Len())
	for i := range fields.Len() {
		f := fields.Get(i)
		c := format.Column{Name: string(f.Name()), Kind: format.KindJSON}
		if !f.IsList() && !f.IsMap() {
			c.Kind, c.Unit = columnKind(f)
			c.Nullable = f.HasPresence()
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// columnKind is the column kind of a singular field.
func columnKind(f protoreflect.FieldDescriptor) (format.ColumnKind, format.TimeUnit) {
	switch f.Kind() {
	case protoreflect.BoolKind:
		return format.KindBool, format.UnitNone
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return format.KindInt32, format.UnitNone
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return format.KindInt64, format.UnitNone
	case protoreflect.FloatKind:
		return format.KindFloat32, format.UnitNone
	case protoreflect.DoubleKind:
		return format.KindFloat64, format.UnitNone
	case protoreflect.StringKind, protoreflect.EnumKind:
		return format.KindString, format.UnitNone
	case protoreflect.BytesKind:
		return format.KindBytes, format.UnitNone
	case protoreflect.MessageKind:
		if f.Message().FullName() == "google.protobuf.Timestamp" {
			return format.KindTimestamp, format.UnitSecondsNanos
		}
	}
	return format.KindJSON, format.UnitNone
}
