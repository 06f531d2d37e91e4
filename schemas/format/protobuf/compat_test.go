package protobuf

import (
	"fmt"
	"millrace/schemas/format"

	"slices"
	"strings"
	"testing"
)

// The cases follow Confluent's Protobuf compatibility rules: its schema diff
// (io.confluent.kafka.schemaregistry.protobuf.diff, Difference.Type and
// SchemaDiff.COMPATIBLE_CHANGES) and the "Protobuf" compatibility section of
// its schema-evolution docs, which take the wire-compatible scalar groups
// from protobuf's "Updating A Message Type". writer is the older schema and
// reader the newer, so want is what BACKWARD reports; wantForward is what
// FORWARD (the older schema reading the newer) reports.
func TestReadsFrom(t *testing.T) {
	t.Parallel()
	const p3 = "syntax = \"proto3\";\n"
	const p2 = "syntax = \"proto2\";\n"
	for _, tc := range []struct {
		name           string
		writer, reader string
		refsW, refsR   map[string]string
		want           []string
		wantForward    []string
	}{
		// FIELD_ADDED and FIELD_REMOVED are compatible: proto3 fields are
		// optional and unknown fields are skipped.
		{name: "field added", writer: p3 + "message A { int32 a = 1; }", reader: p3 + "message A { int32 a = 1; string b = 2; }"},
		{name: "field removed", writer: p3 + "message A { int32 a = 1; string b = 2; }", reader: p3 + "message A { int32 a = 1; }"},
		// FIELD_NAME_CHANGED is compatible: the wire carries numbers.
		{name: "field renamed", writer: p3 + "message A { int32 a = 1; }", reader: p3 + "message A { int32 count = 1; }"},
		// Scalar groups (Confluent's ScalarKind): int32, int64, uint32,
		// uint64, bool and enums are one varint group; sint32/sint64,
		// fixed32/sfixed32, fixed64/sfixed64 and string/bytes are others.
		{name: "int32 to int64", writer: p3 + "message A { int32 a = 1; }", reader: p3 + "message A { int64 a = 1; }"},
		{name: "uint64 to bool", writer: p3 + "message A { uint64 a = 1; }", reader: p3 + "message A { bool a = 1; }"},
		{name: "enum to int32", writer: p3 + "message A { E a = 1; } enum E { Z = 0; }", reader: p3 + "message A { int32 a = 1; } enum E { Z = 0; }"},
		{name: "string to bytes", writer: p3 + "message A { string a = 1; }", reader: p3 + "message A { bytes a = 1; }"},
		{name: "fixed32 to sfixed32", writer: p3 + "message A { fixed32 a = 1; }", reader: p3 + "message A { sfixed32 a = 1; }"},
		{name: "sint32 to sint64", writer: p3 + "message A { sint32 a = 1; }", reader: p3 + "message A { sint64 a = 1; }"},
		// FIELD_SCALAR_KIND_CHANGED: across groups the wire type or its
		// meaning differs.
		{
			name: "int32 to string", writer: p3 + "message A { int32 a = 1; }", reader: p3 + "message A { string a = 1; }",
			want: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"}, wantForward: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"},
		},
		{
			name: "int32 to sint32", writer: p3 + "message A { int32 a = 1; }", reader: p3 + "message A { sint32 a = 1; }",
			want: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"}, wantForward: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"},
		},
		{
			name: "float to double", writer: p3 + "message A { float a = 1; }", reader: p3 + "message A { double a = 1; }",
			want: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"}, wantForward: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"},
		},
		// FIELD_KIND_CHANGED: scalar, message and map are different kinds.
		{
			name: "scalar to message", writer: p3 + "message A { int32 a = 1; } message B {}", reader: p3 + "message A { B a = 1; } message B {}",
			want: []string{"FIELD_KIND_CHANGED #/A/1"}, wantForward: []string{"FIELD_KIND_CHANGED #/A/1"},
		},
		{
			name: "map value changed", writer: p3 + "message A { map<string, int32> m = 1; }", reader: p3 + "message A { map<string, string> m = 1; }",
			want: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"}, wantForward: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1"},
		},
		// A renumbered field is the old number removed and a new one
		// added (both compatible) unless another field takes the old
		// number with another kind.
		{name: "field renumbered", writer: p3 + "message A { int32 a = 1; }", reader: p3 + "message A { int32 a = 2; }"},
		{
			name:   "fields swapped numbers",
			writer: p3 + "message A { int32 a = 1; string b = 2; }", reader: p3 + "message A { string b = 1; int32 a = 2; }",
			want:        []string{"FIELD_SCALAR_KIND_CHANGED #/A/1", "FIELD_SCALAR_KIND_CHANGED #/A/2"},
			wantForward: []string{"FIELD_SCALAR_KIND_CHANGED #/A/1", "FIELD_SCALAR_KIND_CHANGED #/A/2"},
		},
		// MESSAGE_REMOVED is incompatible, MESSAGE_ADDED and MESSAGE_MOVED
		// are not (message indexes are read against the writer's schema).
		{
			name: "message removed", writer: p3 + "message A {} message B {}", reader: p3 + "message A {}",
			want: []string{"MESSAGE_REMOVED #/B"},
		},
		{
			name: "nested message removed", writer: p3 + "message A { message Inner {} }", reader: p3 + "message A {}",
			want: []string{"MESSAGE_REMOVED #/A/Inner"},
		},
		{name: "messages reordered", writer: p3 + "message A {} message B {}", reader: p3 + "message B {} message A {}"},
		// PACKAGE_CHANGED is incompatible (current Confluent; it was once
		// in the compatible set).
		{
			name: "package changed", writer: p3 + "package a;\nmessage A {}", reader: p3 + "package b;\nmessage A {}",
			want: []string{"PACKAGE_CHANGED #/"}, wantForward: []string{"PACKAGE_CHANGED #/"},
		},
		// FIELD_NAMED_TYPE_CHANGED: a message field of another type.
		{
			name: "message type changed", writer: p3 + "message A { B b = 1; } message B {} message C {}", reader: p3 + "message A { C b = 1; } message B {} message C {}",
			want: []string{"FIELD_NAMED_TYPE_CHANGED #/A/1"}, wantForward: []string{"FIELD_NAMED_TYPE_CHANGED #/A/1"},
		},
		// An imported type is compared where it is used; an incompatible
		// change in it is reported at its path and as the field's
		// FIELD_NAMED_TYPE_CHANGED.
		{
			name:   "imported type changed",
			writer: p3 + "import \"common.proto\";\nmessage A { Money m = 1; }", refsW: map[string]string{"common.proto": p3 + "message Money { int64 units = 1; }"},
			reader: p3 + "import \"common.proto\";\nmessage A { Money m = 1; }", refsR: map[string]string{"common.proto": p3 + "message Money { string units = 1; }"},
			want:        []string{"FIELD_SCALAR_KIND_CHANGED #/Money/1", "FIELD_NAMED_TYPE_CHANGED #/A/1"},
			wantForward: []string{"FIELD_SCALAR_KIND_CHANGED #/Money/1", "FIELD_NAMED_TYPE_CHANGED #/A/1"},
		},
		// FIELD_NUMERIC_LABEL_CHANGED is incompatible (packed and unpacked
		// encodings, one value or many); FIELD_STRING_OR_BYTES_LABEL_CHANGED
		// is compatible (the wire is the same length-delimited records).
		{
			name: "numeric label changed", writer: p2 + "message A { optional int32 a = 1; }", reader: p2 + "message A { repeated int32 a = 1; }",
			want: []string{"FIELD_NUMERIC_LABEL_CHANGED #/A/1"}, wantForward: []string{"FIELD_NUMERIC_LABEL_CHANGED #/A/1"},
		},
		{name: "string label changed", writer: p2 + "message A { optional string a = 1; }", reader: p2 + "message A { repeated string a = 1; }"},
		// REQUIRED_FIELD_ADDED / REQUIRED_FIELD_REMOVED (proto2): a reader
		// requiring what the writer lacks fails; Confluent also refuses
		// the removal, so the other direction is refused too.
		{
			name: "proto2 required added", writer: p2 + "message A { optional int32 a = 1; }", reader: p2 + "message A { optional int32 a = 1; required string b = 2; }",
			want: []string{"REQUIRED_FIELD_ADDED #/A/2"}, wantForward: []string{"REQUIRED_FIELD_REMOVED #/A/2"},
		},
		// Oneofs: ONEOF_ADDED, ONEOF_REMOVED and ONEOF_FIELD_ADDED are
		// compatible; ONEOF_FIELD_REMOVED, MULTIPLE_FIELDS_MOVED_TO_ONEOF and
		// FIELD_MOVED_TO_EXISTING_ONEOF are not.
		{
			name:   "oneof field removed",
			writer: p3 + "message A { oneof choice { int32 a = 1; string b = 2; } }", reader: p3 + "message A { oneof choice { int32 a = 1; } }",
			want: []string{"ONEOF_FIELD_REMOVED #/A/choice/2"},
		},
		{
			name:   "one field moved into a new oneof",
			writer: p3 + "message A { int32 a = 1; }", reader: p3 + "message A { oneof choice { int32 a = 1; } }",
		},
		{
			name:   "fields moved into a oneof",
			writer: p3 + "message A { int32 a = 1; string b = 2; }", reader: p3 + "message A { oneof choice { int32 a = 1; string b = 2; } }",
			want: []string{"MULTIPLE_FIELDS_MOVED_TO_ONEOF #/A/choice"},
		},
		{
			name:   "field moved into an existing oneof",
			writer: p3 + "message A { int32 a = 1; oneof choice { string b = 2; } }", reader: p3 + "message A { oneof choice { int32 a = 1; string b = 2; } }",
			want: []string{"FIELD_MOVED_TO_EXISTING_ONEOF #/A/choice"}, wantForward: []string{"ONEOF_FIELD_REMOVED #/A/choice/1"},
		},
		// A recursive type is compared once.
		{
			name:   "recursive message",
			writer: p3 + "message Node { repeated Node children = 1; int32 v = 2; }", reader: p3 + "message Node { repeated Node children = 1; string v = 2; }",
			want: []string{"FIELD_SCALAR_KIND_CHANGED #/Node/2"}, wantForward: []string{"FIELD_SCALAR_KIND_CHANGED #/Node/2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			writer, reader := parse(t, tc.writer, tc.refsW), parse(t, tc.reader, tc.refsR)
			if got := kinds(reader.ReadsFrom(writer)); !slices.Equal(got, tc.want) {
				t.Errorf("BACKWARD (reader reads writer) = %q, want %q", got, tc.want)
			}
			if got := kinds(writer.ReadsFrom(reader)); !slices.Equal(got, tc.wantForward) {
				t.Errorf("FORWARD (writer reads reader) = %q, want %q", got, tc.wantForward)
			}
		})
	}
}

func kinds(found []format.Incompat) []string {
	var out []string
	for _, f := range found {
		if f.Message == "" || !strings.HasSuffix(f.Message, ".") {
			out = append(out, "no sentence: "+f.String())
		}
		out = append(out, f.Kind+" "+f.Path)
	}
	return out
}

// otherLanguage is a schema of another type, as the registry would never
// pass but a caller could.
type otherLanguage struct{ format.Schema }

type otherType struct{ format.Type }

func (otherLanguage) Type() format.Type { return otherType{} }
func (otherType) Name() string          { return format.Avro }

// Imported types that use each other many times over are compared once
// per pair: 40 levels of two fields each would be 2^40 paths. Each
// field using a changed type is reported once, each level at its path.
func TestReadsFromComparesImportedTypesOnce(t *testing.T) {
	t.Parallel()
	chain := func(last string) string {
		var b strings.Builder
		b.WriteString("syntax = \"proto3\";\npackage lib;\n")
		for i := range 40 {
			fmt.Fprintf(&b, "message M%d { M%d a = 1; M%d b = 2; }\n", i, i+1, i+1)
		}
		fmt.Fprintf(&b, "message M40 { %s v = 1; }\n", last)
		return b.String()
	}
	const root = "syntax = \"proto3\";\nimport \"lib.proto\";\nmessage Top { lib.M0 m = 1; }\n"
	writer := parse(t, root, map[string]string{"lib.proto": chain("int32")})
	reader := parse(t, root, map[string]string{"lib.proto": chain("string")})
	got := kinds(reader.ReadsFrom(writer))
	if len(got) != 82 || got[0] != "FIELD_SCALAR_KIND_CHANGED #/M40/1" || got[81] != "FIELD_NAMED_TYPE_CHANGED #/Top/1" {
		t.Fatalf("ReadsFrom = %q", got)
	}
}

func TestReadsFromAnotherLanguage(t *testing.T) {
	t.Parallel()
	s := parse(t, "syntax = \"proto3\";\nmessage A {}\n", nil)
	found := s.ReadsFrom(otherLanguage{})
	if len(found) != 1 || !strings.Contains(found[0].Message, "AVRO") {
		t.Fatalf("ReadsFrom(an Avro schema) = %v", found)
	}
}
