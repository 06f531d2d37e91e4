package protobuf

import (
	"errors"
	"strings"
	"testing"
	"time"

	"millrace/schemas/format"
)

// parse parses a schema the tests expect to be valid.
func parse(t *testing.T, text string, refs map[string]string) *schema {
	t.Helper()
	s, err := Type.Parse(text, refs, format.DefaultLimits)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return s.(*schema)
}

func TestParseErrorsAreSentencesWithPositions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"syntax", "syntax = \"proto3\";\nmessage A {\n  int32 a = ;\n}\n", "schema.proto:3:"},
		{"unknown type", "syntax = \"proto3\";\nmessage A {\n  Missing a = 1;\n}\n", "schema.proto:3:3"},
		{"missing import", "syntax = \"proto3\";\nimport \"other.proto\";\nmessage A {}\n", "other.proto"},
		{"duplicate number", "syntax = \"proto3\";\nmessage A {\n  int32 a = 1;\n  int32 b = 1;\n}\n", "schema.proto:4:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Type.Parse(tc.text, nil, format.DefaultLimits)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "the Protobuf schema") {
				t.Fatalf("Parse error = %v, want a sentence naming %q", err, tc.want)
			}
			if errors.Is(err, format.ErrLimit) {
				t.Fatalf("a compile error wraps ErrLimit: %v", err)
			}
		})
	}
}

// A schema importing another registered one: the import path is the
// reference's name, as in Confluent's Protobuf references.
func TestParseWithReferences(t *testing.T) {
	t.Parallel()
	common := "syntax = \"proto3\";\npackage acme.common;\nmessage Money {\n  string currency = 1;\n  int64 units = 2;\n}\n"
	order := "syntax = \"proto3\";\npackage acme;\nimport \"common.proto\";\nmessage Order {\n  acme.common.Money total = 1;\n}\n"
	s := parse(t, order, map[string]string{"common.proto": common})
	total := s.messages[0].Fields().ByName("total")
	if total == nil || total.Message().FullName() != "acme.common.Money" {
		t.Fatalf("Order.total resolved to %v, want acme.common.Money", total)
	}
	// A reference named like the schema's own file name does not clash.
	parse(t, "syntax = \"proto3\";\nimport \"schema.proto\";\nmessage B { A a = 1; }\n",
		map[string]string{"schema.proto": "syntax = \"proto3\";\nmessage A {}\n"})
}

func TestParseWellKnownTypesWithoutReferences(t *testing.T) {
	t.Parallel()
	s := parse(t, `syntax = "proto3";
import "google/protobuf/timestamp.proto";
import "google/protobuf/struct.proto";
message Event {
  google.protobuf.Timestamp at = 1;
  google.protobuf.Struct attributes = 2;
}
`, nil)
	if got := s.messages[0].Fields().ByName("at").Message().FullName(); got != "google.protobuf.Timestamp" {
		t.Fatalf("Event.at is %s", got)
	}
	// Confluent's own imports are built in too: field tags for data
	// contracts, and its decimal type.
	parse(t, `syntax = "proto3";
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
message Payment {
  string card = 1 [(confluent.field_meta).tags = "PII"];
  confluent.type.Decimal amount = 2;
}
`, nil)
}

func TestParseRefusesBeyondLimits(t *testing.T) {
	t.Parallel()
	deep := "syntax = \"proto2\";\n" + strings.Repeat("message M {\n", 100_000) + strings.Repeat("}\n", 100_000)
	// Brackets in strings and comments are not nesting.
	quoted := "syntax = \"proto3\";\n// {{{{{{{{{{\n/* [[[[[[[[[[ */\nmessage A { string a = 1 [json_name = \"{{{{{{{{{{\"]; }\n"
	limits := format.Limits{MaxBytes: 1 << 20, MaxDepth: 8}
	for _, tc := range []struct {
		name string
		text string
		refs map[string]string
		ok   bool
	}{
		{name: "deep messages", text: deep},
		{name: "deep reference", text: "syntax = \"proto3\";\nimport \"r.proto\";\n", refs: map[string]string{"r.proto": deep}},
		{name: "oversized schema", text: "syntax = \"proto3\";\n" + strings.Repeat("// padding\n", 100_000)},
		{name: "oversized references", text: "syntax = \"proto3\";\n", refs: map[string]string{
			"a.proto": strings.Repeat(" ", 600_000), "b.proto": strings.Repeat(" ", 600_000),
		}},
		{name: "brackets in strings and comments", text: quoted, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, err := Type.Parse(tc.text, tc.refs, limits)
			if tc.ok {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if !errors.Is(err, format.ErrLimit) {
				t.Fatalf("Parse error = %v, want one wrapping ErrLimit", err)
			}
			// The refusal comes from the scan, not from compiling.
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("refusing took %v", took)
			}
		})
	}
}

// Formatting, comments, option order and relative type names do not make a
// different schema; with normalize neither does declaration order of
// fields, enums or imports. A different field number does.
func TestCanonical(t *testing.T) {
	t.Parallel()
	base := parse(t, `syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
option java_package = "com.acme";
option go_package = "acme/pb";
message Order {
  string id = 1 [deprecated = true, json_name = "ident"];
  google.protobuf.Timestamp at = 2;
  Status status = 3;
  google.protobuf.Duration took = 4;
}
enum Status { UNKNOWN = 0; DONE = 1; }
enum Color { NONE = 0; RED = 1; }
`, nil)
	formatted := parse(t, `// Orders.
syntax="proto3"; package acme;
import "google/protobuf/timestamp.proto"; import "google/protobuf/duration.proto";
option go_package="acme/pb"; option java_package="com.acme";
message Order { /* the ID */ string id=1 [json_name="ident",deprecated=true];
  .google.protobuf.Timestamp at=2; .acme.Status status=3; google.protobuf.Duration took = 4; }
enum Status{UNKNOWN=0;DONE=1;}
enum Color{NONE=0;RED=1;}
`, nil)
	reordered := parse(t, `syntax = "proto3";
package acme;
import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";
option java_package = "com.acme";
option go_package = "acme/pb";
enum Color { NONE = 0; RED = 1; }
message Order {
  google.protobuf.Duration took = 4;
  Status status = 3;
  google.protobuf.Timestamp at = 2;
  string id = 1 [deprecated = true, json_name = "ident"];
}
enum Status { UNKNOWN = 0; DONE = 1; }
`, nil)
	renumbered := parse(t, strings.Replace(base.Text(), "took = 4", "took = 5", 1), nil)

	if base.Canonical(false) != formatted.Canonical(false) || base.Canonical(true) != formatted.Canonical(true) {
		t.Error("formatting changed the canonical form")
	}
	if base.Canonical(false) == reordered.Canonical(false) {
		t.Error("declaration order is ignored without normalize")
	}
	if base.Canonical(true) != reordered.Canonical(true) {
		t.Error("declaration order changed the normalized form")
	}
	if base.Canonical(true) == renumbered.Canonical(true) || base.Canonical(false) == renumbered.Canonical(false) {
		t.Error("a renumbered field kept the canonical form")
	}
	// Messages keep their order even normalized: message indexes address them.
	ab := parse(t, "syntax = \"proto3\";\nmessage A {}\nmessage B {}\n", nil)
	ba := parse(t, "syntax = \"proto3\";\nmessage B {}\nmessage A {}\n", nil)
	if ab.Canonical(true) == ba.Canonical(true) {
		t.Error("message order is ignored by normalize")
	}
}

// FuzzParse: any text is refused with an error or parsed into a schema
// with one canonical form, compatible with itself.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		codecSchema,
		"syntax = \"proto2\";\nmessage A { required int32 a = 1; optional group G = 2 { optional string s = 3; } extensions 100 to 200; }\n",
		"syntax = \"proto3\";\nimport \"confluent/meta.proto\";\nmessage A { string a = 1 [(confluent.field_meta) = { tags: [\"PII\"] params: { key: \"k\" value: \"v\" } }]; }\n",
		"edition = \"2023\";\nmessage A { int32 a = 1 [features.field_presence = IMPLICIT]; }\n",
		"syntax = \"proto3\";\nservice S { rpc Get(A) returns (A); }\nmessage A { oneof o { int32 x = 1; } map<int32, A> m = 2; }\n",
	} {
		f.Add(seed)
	}
	codec, err := Type.Parse(codecSchema, nil, format.DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(serialize(f, codec.(*schema)))
	limits := format.Limits{MaxBytes: 1 << 16, MaxDepth: 16}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Type.Parse(text, nil, limits)
		if err != nil {
			return
		}
		again, err := Type.Parse(text, nil, limits)
		if err != nil || again.Canonical(false) != s.Canonical(false) || again.Canonical(true) != s.Canonical(true) {
			t.Fatalf("parsing again gave another canonical form (%v)", err)
		}
		if found := s.ReadsFrom(s); len(found) != 0 {
			t.Fatalf("a schema does not read its own values: %v", found)
		}
	})
}
