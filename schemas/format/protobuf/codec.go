package protobuf

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// A Protobuf value as Confluent's serializers write it, after the magic
// byte and the 4-byte schema ID:
//
//	count    zigzag varint: how many message indexes follow
//	index... zigzag varints: the message's position among the file's
//	         messages, then among that message's nested messages, and so on
//	payload  the message in Protobuf's binary encoding
//
// The common case, the file's first message, is written as the single byte
// 0 (a count of zero stands for the indexes [0]). Nested messages are
// counted as Confluent's registry counts them in the schema as registered:
// for .proto text, as the text declares them, without the entry messages
// the compiler makes for map fields; for a serialized descriptor, as the
// descriptor lists them, map entries included (they are declared messages
// there, and the serializers that register descriptors count them).

// decodeRecursionLimit bounds how deeply a value's messages may nest (only
// a recursive message type nests without the schema's bound); it keeps the
// decoder's and the conversion's recursion short of the stack's limits.
const decodeRecursionLimit = 1000

// Decode reads the message indexes, then the message they select, and
// returns it as map[string]any keyed by field name. Only fields present on
// the wire appear (proto3's zero values are not sent, so they do not), which
// keeps the result proportional to the input whatever the schema's size.
// Values are int32 (int32, sint32, sfixed32), int64 (int64, sint64,
// sfixed64, uint32, fixed32), uint64 (uint64, fixed64: no listed type holds
// them), float32, float64, bool, string, []byte, an enum's value name (its
// number as int32 when the schema does not name it), []any for repeated
// fields, map[string]any for maps (keys in decimal for integers) and for
// messages. Unknown fields are dropped.
func (s *schema) Decode(data []byte) (any, error) {
	message, n, err := s.messageAt(data)
	if err == nil {
		value := dynamicpb.NewMessage(message)
		if err = unmarshal(data[n:], value); err == nil {
			return messageValue(value), nil
		}
		err = fmt.Errorf("the value is not a valid %s message: %v", message.FullName(), err)
	}
	if v, ok := s.decodeWithoutIndexes(data); ok {
		return v, nil
	}
	return nil, err
}

// FirstMessage reports whether Decode reads data as the file's first
// message: its indexes select that one, or they select none that decodes
// and data is the first message without indexes. The lake's columns are
// the first message's fields, so the sink lands only those.
func (s *schema) FirstMessage(data []byte) bool {
	if len(s.messages) == 0 {
		return false
	}
	message, n, err := s.messageAt(data)
	if err == nil {
		if message == s.messages[0] {
			return true
		}
		if unmarshal(data[n:], dynamicpb.NewMessage(message)) == nil {
			return false
		}
	}
	_, ok := s.decodeWithoutIndexes(data)
	return ok
}

// decodeWithoutIndexes reads data as the file's first message with no
// message indexes before it, as @kafkajs/confluent-schema-registry (4.1.0)
// writes Protobuf values. Decode tries it only when the indexes do not
// select a message that decodes, and takes it only when every field of
// the payload is one of the message's: no Protobuf payload starts with the
// zero byte of Confluent's usual indexes ([0]), and a payload read as
// indexes by mistake names impossible ones, so the two framings are told
// apart without guessing on values either one would write.
func (s *schema) decodeWithoutIndexes(data []byte) (any, bool) {
	if len(s.messages) == 0 {
		return nil, false
	}
	value := dynamicpb.NewMessage(s.messages[0])
	if err := unmarshalStrict(data, value); err != nil || len(value.GetUnknown()) > 0 {
		return nil, false
	}
	return messageValue(value), true
}

// unmarshal decodes a payload into a dynamic message. protobuf-go's
// reflective decoder, the one dynamic messages use, panics on some
// malformed map entries (v1.36.12: an entry whose key is repeated with a
// wrong wire type, found by FuzzDecode); that panic is a malformed value,
// so it is returned as one.
func unmarshal(payload []byte, value *dynamicpb.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed encoding (%v)", p)
		}
	}()
	return proto.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: decodeRecursionLimit}.Unmarshal(payload, value)
}

// unmarshalStrict is unmarshal keeping unknown fields, so a caller can
// refuse a payload that is not of the message.
func unmarshalStrict(payload []byte, value *dynamicpb.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed encoding (%v)", p)
		}
	}()
	return proto.UnmarshalOptions{RecursionLimit: decodeRecursionLimit}.Unmarshal(payload, value)
}

// messageAt reads the message indexes at the start of data and returns the
// message they select and how many bytes they took.
func (s *schema) messageAt(data []byte) (protoreflect.MessageDescriptor, int, error) {
	count, n := consumeZigZag(data)
	if n < 0 {
		return nil, 0, errors.New("the value is too short to hold Protobuf message indexes")
	}
	if count == 0 {
		if len(s.messages) == 0 {
			return nil, 0, errors.New("the value's schema declares no message")
		}
		return s.messages[0], n, nil
	}
	if count < 0 || count > int64(s.limits.MaxDepth) {
		return nil, 0, fmt.Errorf("the value names %d message indexes; a schema nests at most %d deep", count, s.limits.MaxDepth)
	}
	scope := s.messages
	var message protoreflect.MessageDescriptor
	for i := int64(0); i < count; i++ {
		index, m := consumeZigZag(data[n:])
		if m < 0 {
			return nil, 0, errors.New("the value ends inside its Protobuf message indexes")
		}
		n += m
		if index < 0 || index >= int64(len(scope)) {
			return nil, 0, fmt.Errorf("message index %d of the value is outside the %d messages its schema declares there", index, len(scope))
		}
		message = scope[index]
		scope = declared(message.Messages(), s.serialized)
	}
	return message, n, nil
}

func consumeZigZag(data []byte) (int64, int) {
	v, n := protowire.ConsumeVarint(data)
	if n < 0 {
		return 0, n
	}
	return protowire.DecodeZigZag(v), n
}

// appendMessageIndexes writes indexes as Confluent does, [0] as one byte.
func appendMessageIndexes(b []byte, indexes []int) []byte {
	if len(indexes) == 1 && indexes[0] == 0 {
		return append(b, 0)
	}
	b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(len(indexes))))
	for _, index := range indexes {
		b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(index)))
	}
	return b
}

// topLevelMessages are a file's messages as message indexes count them.
func topLevelMessages(file protoreflect.FileDescriptor) []protoreflect.MessageDescriptor {
	return declared(file.Messages(), false)
}

// nestedMessages are a message's nested messages as a .proto text declares
// them: without map entries.
func nestedMessages(m protoreflect.MessageDescriptor) []protoreflect.MessageDescriptor {
	return declared(m.Messages(), false)
}

func declared(all protoreflect.MessageDescriptors, mapEntries bool) []protoreflect.MessageDescriptor {
	messages := make([]protoreflect.MessageDescriptor, 0, all.Len())
	for i := 0; i < all.Len(); i++ {
		if m := all.Get(i); mapEntries || !m.IsMapEntry() {
			messages = append(messages, m)
		}
	}
	return messages
}

func messageValue(m protoreflect.Message) map[string]any {
	out := make(map[string]any)
	m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out[string(f.Name())] = fieldValue(f, v)
		return true
	})
	return out
}

func fieldValue(f protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case f.IsList():
		list := v.List()
		out := make([]any, list.Len())
		for i := range out {
			out[i] = singularValue(f, list.Get(i))
		}
		return out
	case f.IsMap():
		out := make(map[string]any, v.Map().Len())
		v.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			out[mapKey(f.MapKey(), k)] = singularValue(f.MapValue(), v)
			return true
		})
		return out
	default:
		return singularValue(f, v)
	}
}

func mapKey(f protoreflect.FieldDescriptor, k protoreflect.MapKey) string {
	switch f.Kind() {
	case protoreflect.StringKind:
		return k.String()
	case protoreflect.BoolKind:
		return strconv.FormatBool(k.Bool())
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(k.Uint(), 10)
	default:
		return strconv.FormatInt(k.Int(), 10)
	}
}

func singularValue(f protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch f.Kind() {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return int32(v.Int())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return int64(v.Uint())
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return v.Uint()
	case protoreflect.FloatKind:
		return float32(v.Float())
	case protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return append([]byte(nil), v.Bytes()...)
	case protoreflect.EnumKind:
		if value := f.Enum().Values().ByNumber(v.Enum()); value != nil {
			return string(value.Name())
		}
		return int32(v.Enum())
	default:
		return messageValue(v.Message())
	}
}

// Encode writes value as the file's first message, value shaped as
// encoding/json decodes JSON: it is read as Protobuf's JSON mapping reads
// JSON (field names or their lowerCamelCase JSON names; 64-bit integers as
// numbers or strings; bytes as base64; enums by name or number; well-known
// types in their JSON forms, e.g. a Timestamp as RFC 3339 text). The output
// is the message index byte 0 and the message's binary encoding.
func (s *schema) Encode(value any) ([]byte, error) {
	if len(s.messages) == 0 {
		return nil, errors.New("the schema declares no message to encode the value as")
	}
	message := s.messages[0]
	text, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("the value cannot be written as JSON, so not as a %s message: %v", message.FullName(), err)
	}
	m := dynamicpb.NewMessage(message)
	if err := (protojson.UnmarshalOptions{RecursionLimit: decodeRecursionLimit}).Unmarshal(text, m); err != nil {
		return nil, fmt.Errorf("the value does not fit message %s: %v", message.FullName(), err)
	}
	out := appendMessageIndexes(nil, []int{0})
	return proto.MarshalOptions{Deterministic: true}.MarshalAppend(out, m)
}
