package protobuf

import (
	"encoding/base64"
	"errors"
	"reflect"
	"testing"

	"github.com/bufbuild/protocompile/protoutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"millrace/schemas/format"
)

// serialize is what Confluent's Python serializer registers for a schema:
// its FileDescriptorProto, as protoc writes it (every field's JSON name
// set), base64-encoded.
func serialize(t testing.TB, s *schema) string {
	t.Helper()
	fd := proto.Clone(protoutil.ProtoFromFileDescriptor(s.file)).(*descriptorpb.FileDescriptorProto)
	var setJSONNames func([]*descriptorpb.DescriptorProto)
	setJSONNames = func(messages []*descriptorpb.DescriptorProto) {
		for _, m := range messages {
			for _, f := range m.Field {
				f.JsonName = proto.String(defaultJSONName(f.GetName()))
			}
			setJSONNames(m.NestedType)
		}
	}
	setJSONNames(fd.MessageType)
	encoded, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(encoded)
}

func TestParseSerializedDescriptor(t *testing.T) {
	t.Parallel()
	fromText := parse(t, codecSchema, nil)
	fromDescriptor := parse(t, serialize(t, fromText), nil)
	if fromDescriptor.Canonical(false) != fromText.Canonical(false) || fromDescriptor.Canonical(true) != fromText.Canonical(true) {
		t.Fatal("a schema registered as a serialized descriptor is another schema than its text")
	}
	encoded, err := fromText.Encode(map[string]any{"id": "x", "tags": []any{"a"}, "status": "DONE"})
	if err != nil {
		t.Fatal(err)
	}
	a, errA := fromText.Decode(encoded)
	b, errB := fromDescriptor.Decode(encoded)
	if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("the two forms decode differently: %v (%v), %v (%v)", a, errA, b, errB)
	}
	if found := fromDescriptor.ReadsFrom(fromText); len(found) != 0 {
		t.Fatalf("ReadsFrom between the two forms = %v", found)
	}

	// A reference may be serialized too.
	common := parse(t, "syntax = \"proto3\";\npackage acme.common;\nmessage Money { int64 units = 1; }\n", nil)
	parse(t, "syntax = \"proto3\";\nimport \"common.proto\";\nmessage Order { acme.common.Money total = 1; }\n",
		map[string]string{"common.proto": serialize(t, common)})
}

func TestParseSerializedDescriptorBeyondDepth(t *testing.T) {
	t.Parallel()
	deepest := &descriptorpb.DescriptorProto{Name: proto.String("M")}
	for range 100 {
		deepest = &descriptorpb.DescriptorProto{Name: proto.String("M"), NestedType: []*descriptorpb.DescriptorProto{deepest}}
	}
	fd := &descriptorpb.FileDescriptorProto{Syntax: proto.String("proto3"), MessageType: []*descriptorpb.DescriptorProto{deepest}}
	encoded, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Type.Parse(base64.StdEncoding.EncodeToString(encoded), nil, format.DefaultLimits)
	if !errors.Is(err, format.ErrLimit) {
		t.Fatalf("Parse error = %v, want one wrapping ErrLimit", err)
	}
}

// In a schema registered as a serialized descriptor, map entries are
// nested messages like any other and message indexes count them: Refund's
// ReasonsEntry is its first nested message, so [1, 1] is Item.
func TestSerializedDescriptorIndexesCountMapEntries(t *testing.T) {
	t.Parallel()
	fromText := parse(t, codecSchema, nil)
	fromDescriptor := parse(t, serialize(t, fromText), nil)
	for _, tc := range []struct {
		s    *schema
		want protoreflect.FullName
	}{
		{fromText, "acme.Refund.Batch"},
		{fromDescriptor, "acme.Refund.Item"},
	} {
		m, _, err := tc.s.messageAt(appendMessageIndexes(nil, []int{1, 1}))
		if err != nil || m.FullName() != tc.want {
			t.Errorf("[1, 1] selects %v (%v), want %s", m, err, tc.want)
		}
	}
}
