package protobuf

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"millrace/schemas/format"
)

const codecSchema = `syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  int64 units = 2;
  int32 qty = 3;
  uint64 big = 4;
  double price = 5;
  float ratio = 6;
  bool paid = 7;
  bytes blob = 8;
  Status status = 9;
  repeated string tags = 10;
  map<string, int32> counts = 11;
  map<int64, Line> lines = 12;
  Line first = 13;
  google.protobuf.Timestamp at = 14;
  oneof pay { string card = 15; sint32 cash = 16; }
  message Line {
    string sku = 1;
    message Note { string text = 1; }
  }
}
enum Status { UNKNOWN = 0; DONE = 1; }
message Refund {
  map<string, string> reasons = 1;
  message Item { fixed32 n = 1; }
  message Batch { repeated Item items = 1; }
}
`

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	s := parse(t, codecSchema, nil)
	// json.Number keeps 64-bit integers exact, as `millrace produce`
	// should decode its JSON lines.
	decoder := json.NewDecoder(strings.NewReader(`{
		"id": "o-1", "units": 9007199254740993, "qty": -3, "big": "18446744073709551615",
		"price": 2.5, "ratio": 0.5, "paid": true, "blob": "AQID", "status": "DONE",
		"tags": ["a", "b"], "counts": {"x": 1}, "lines": {"7": {"sku": "s"}},
		"first": {"sku": "f"}, "at": "2026-12-04T10:00:00Z", "cash": -2
	}`))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		t.Fatal(err)
	}
	encoded, err := s.Encode(value)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if encoded[0] != 0 {
		t.Fatalf("the first message's indexes are % x, want the single byte 0", encoded[:1])
	}
	decoded, err := s.Decode(encoded)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := map[string]any{
		"id": "o-1", "units": int64(9007199254740993), "qty": int32(-3), "big": uint64(18446744073709551615),
		"price": 2.5, "ratio": float32(0.5), "paid": true, "blob": []byte{1, 2, 3}, "status": "DONE",
		"tags": []any{"a", "b"}, "counts": map[string]any{"x": int32(1)},
		"lines": map[string]any{"7": map[string]any{"sku": "s"}},
		"first": map[string]any{"sku": "f"},
		"at":    map[string]any{"seconds": int64(1796378400)},
		"cash":  int32(-2),
	}
	if !reflect.DeepEqual(decoded, want) {
		t.Fatalf("Decode =\n%#v\nwant\n%#v", decoded, want)
	}
}

func TestEncodeRefusesValuesThatDoNotFit(t *testing.T) {
	t.Parallel()
	s := parse(t, codecSchema, nil)
	for _, value := range []any{
		map[string]any{"nope": 1.0},
		map[string]any{"qty": "many"},
		map[string]any{"status": "LOST"},
		[]any{1.0},
	} {
		if _, err := s.Encode(value); err == nil || !strings.Contains(err.Error(), "acme.Order") {
			t.Errorf("Encode(%v) error = %v, want one naming acme.Order", value, err)
		}
	}
	empty := parse(t, "syntax = \"proto3\";\nenum E { Z = 0; }\n", nil)
	if _, err := empty.Encode(map[string]any{}); err == nil {
		t.Error("Encode with a schema of no message succeeded")
	}
}

// Message indexes select nested messages: [1, 1] is the second nested
// message (Batch) of the file's second message (Refund), map entries not
// counted.
func TestDecodeSelectsMessageByIndexes(t *testing.T) {
	t.Parallel()
	s := parse(t, codecSchema, nil)
	for _, tc := range []struct {
		indexes []int
		want    string
	}{
		{[]int{0}, "acme.Order"},
		{[]int{1}, "acme.Refund"},
		{[]int{0, 0}, "acme.Order.Line"},
		{[]int{0, 0, 0}, "acme.Order.Line.Note"},
		{[]int{1, 0}, "acme.Refund.Item"},
		{[]int{1, 1}, "acme.Refund.Batch"},
	} {
		data := appendMessageIndexes(nil, tc.indexes)
		m, n, err := s.messageAt(data)
		if err != nil || n != len(data) || m.FullName() != protoName(tc.want) {
			t.Errorf("indexes %v (% x): %v after %d bytes, %v; want %s", tc.indexes, data, m, n, err, tc.want)
		}
	}
	// A Batch with two items, written as a producer would.
	batch := dynamicpb.NewMessage(s.messages[1].Messages().ByName("Batch"))
	items := batch.Mutable(batch.Descriptor().Fields().ByName("items")).List()
	for _, n := range []uint32{5, 6} {
		item := items.NewElement()
		item.Message().Set(item.Message().Descriptor().Fields().ByName("n"), protoValueOfUint32(n))
		items.Append(item)
	}
	payload, err := proto.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := s.Decode(append(appendMessageIndexes(nil, []int{1, 1}), payload...))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := map[string]any{"items": []any{map[string]any{"n": int64(5)}, map[string]any{"n": int64(6)}}}
	if !reflect.DeepEqual(decoded, want) {
		t.Fatalf("Decode = %#v, want %#v", decoded, want)
	}
}

// TestDecodeWithoutIndexes: values written as
// @kafkajs/confluent-schema-registry writes them, without Confluent's
// message indexes, decode as the file's first message; a payload with a
// field the message does not have is not taken for one.
func TestDecodeWithoutIndexes(t *testing.T) {
	t.Parallel()
	s := parse(t, codecSchema, nil)
	framed, err := s.Encode(map[string]any{"id": "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	if framed[0] != 0 {
		t.Fatalf("Encode wrote indexes % x, want the single zero byte", framed[:1])
	}
	want, err := s.Decode(framed)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(framed[1:])
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Decode without indexes = %#v, %v; want %#v", got, err, want)
	}
	first := format.Schema(s).(interface{ FirstMessage([]byte) bool })
	if !first.FirstMessage(framed) || !first.FirstMessage(framed[1:]) {
		t.Error("FirstMessage is false for the first message, with or without indexes")
	}
	if first.FirstMessage(appendMessageIndexes(nil, []int{1})) {
		t.Error("FirstMessage is true for indexes [1], the second message")
	}
	// An empty payload is the first message with every field unset.
	if got, err := s.Decode(nil); err != nil || !reflect.DeepEqual(got, map[string]any{}) {
		t.Errorf("Decode(empty) = %#v, %v; want an empty message", got, err)
	}
	// Field 15 (a varint), which the message lacks, after indexes that
	// select nothing: refused.
	if _, err := s.Decode([]byte{0x78, 0x01}); err == nil {
		t.Error("a payload of an unknown field decoded")
	}
}

func TestDecodeRefusesMalformedValues(t *testing.T) {
	t.Parallel()
	s := parse(t, codecSchema, nil)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated indexes", []byte{0x04, 0x02}, "ends inside"},
		{"index out of range", []byte{0x02, 0x04}, "outside the 2 messages"},
		{"negative index", []byte{0x02, 0x01}, "outside"},
		{"nested index out of range", []byte{0x04, 0x00, 0x08}, "outside the 1 messages"},
		{"negative count", []byte{0x01}, "message indexes"},
		{"count beyond the depth limit", appendMessageIndexes(nil, make([]int, format.DefaultLimits.MaxDepth+1)), "at most 64"},
		{"bad payload", []byte{0x00, 0x0a, 0xff}, "not a valid acme.Order"},
		{"invalid UTF-8 string", []byte{0x00, 0x0a, 0x01, 0xff}, "not a valid acme.Order"},
	} {
		if _, err := s.Decode(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode(% x) error = %v, want one saying %q", tc.name, tc.data, err, tc.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	s, err := Type.Parse(codecSchema, nil, format.DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	for _, value := range []string{
		`{}`,
		`{"id": "x", "tags": ["a"], "counts": {"k": 2}, "lines": {"1": {"sku": "s"}}, "at": "2026-01-01T00:00:00Z", "card": "c"}`,
		`{"units": -1, "big": "1", "price": 1e300, "blob": "AAEC", "status": 7, "first": {}}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			f.Fatal(err)
		}
		encoded, err := s.Encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(encoded)
	}
	f.Add(appendMessageIndexes(nil, []int{1, 1}))
	f.Add([]byte{0x04, 0x02, 0x02, 0x0a, 0x02, 0x0d, 0x05})
	f.Fuzz(func(t *testing.T, data []byte) {
		value, err := s.Decode(data)
		if err != nil {
			return
		}
		if _, ok := value.(map[string]any); !ok {
			t.Fatalf("Decode returned %T", value)
		}
	})
}

func protoName(s string) protoreflect.FullName { return protoreflect.FullName(s) }

func protoValueOfUint32(n uint32) protoreflect.Value { return protoreflect.ValueOfUint32(n) }

// FuzzEncode: whatever JSON a producer's line holds, Encode answers with
// bytes that decode, or an error; never a panic.
func FuzzEncode(f *testing.F) {
	s, err := Type.Parse(codecSchema, nil, format.DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{}`, `null`, `[1]`, `{"id": "x", "units": "12", "big": 1, "lines": {"-3": {"sku": "s"}}}`,
		`{"at": "2026-01-01T00:00:00.5Z", "status": 1, "counts": {"a": 1.0}, "card": "c", "cash": 1}`,
		`{"first": {"first": 1}, "blob": "!!", "ratio": "NaN", "price": "Infinity"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		decoder := json.NewDecoder(strings.NewReader(line))
		decoder.UseNumber()
		var value any
		if decoder.Decode(&value) != nil {
			return
		}
		encoded, err := s.Encode(value)
		if err != nil {
			return
		}
		if _, err := s.Decode(encoded); err != nil {
			t.Fatalf("Encode(%s) = % x, which does not decode: %v", line, encoded, err)
		}
	})
}
