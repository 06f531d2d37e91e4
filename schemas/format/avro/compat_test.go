package avro

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"millrace/schemas/format"

	lib "github.com/twmb/avro"
)

// record is a record schema named "r" with the given field texts.
func record(fields ...string) string {
	return `{"type":"record","name":"r","fields":[` + strings.Join(fields, ",") + `]}`
}

func mustParse(t *testing.T, text string) *schema {
	t.Helper()
	s, err := Type.Parse(text, nil, format.DefaultLimits)
	if err != nil {
		t.Fatalf("Parse(%s): %v", text, err)
	}
	return s.(*schema)
}

// kindsAt is found as "KIND path" strings, for comparing with a table.
func kindsAt(found []format.Incompat) []string {
	var out []string
	for _, in := range found {
		out = append(out, in.Kind+" "+in.Path)
	}
	return out
}

// TestReadsFrom holds the reader/writer check to Avro's resolution rules as
// Confluent applies them. BACKWARD is new.ReadsFrom(old), FORWARD
// old.ReadsFrom(new). The cases follow Confluent's "Schema Evolution and
// Compatibility" page (Avro: which changes each level allows) and the cases
// of its AvroCompatibilityTest; kinds and paths are those of Avro's
// SchemaCompatibility, which Confluent's verbose messages carry.
func TestReadsFrom(t *testing.T) {
	t.Parallel()
	f1 := `{"name":"f1","type":"string"}`
	f2Default := `{"name":"f2","type":"string","default":"foo"}`
	f2 := `{"name":"f2","type":"string"}`
	enumAB := `{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}`
	enumABC := `{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}}`
	enumABDefault := `{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}}`
	inner := func(fields ...string) string {
		return `{"name":"in","type":{"type":"record","name":"Inner","fields":[` + strings.Join(fields, ",") + `]}}`
	}
	cases := []struct {
		name           string
		reader, writer string
		want           []string // "KIND path"; none when compatible
	}{
		// "Add optional fields" is BACKWARD: the new reader fills the
		// field from its default.
		{"backward: field added with a default", record(f1, f2Default), record(f1), nil},
		// A new field without a default is not BACKWARD: old data lacks it.
		{"backward: field added without a default", record(f1, f2), record(f1),
			[]string{"READER_FIELD_MISSING_DEFAULT_VALUE /fields/1"}},
		// "Delete fields" is BACKWARD: the reader skips what it lacks.
		{"backward: field deleted", record(f1), record(f1, f2), nil},
		// FORWARD, old reads new: deleting a field the old reader has no
		// default for is not FORWARD; deleting one it has a default for is.
		{"forward: field deleted, old reader has no default", record(f1, f2), record(f1),
			[]string{"READER_FIELD_MISSING_DEFAULT_VALUE /fields/1"}},
		{"forward: field deleted, old reader has a default", record(f1, f2Default), record(f1), nil},
		// "Add fields" is FORWARD: the old reader ignores them.
		{"forward: field added", record(f1), record(f1, f2), nil},
		// A field renamed with an alias to its old name reads the old data.
		{"backward: field renamed with an alias", record(`{"name":"f1_new","type":"string","aliases":["f1"]}`), record(f1), nil},
		{"backward: field renamed without an alias", record(`{"name":"f1_new","type":"string"}`), record(f1),
			[]string{"READER_FIELD_MISSING_DEFAULT_VALUE /fields/0"}},
		// Type promotions of the specification: int to long, float,
		// double; long to float, double; float to double; string and
		// bytes both ways.
		{"int promotes to long", record(`{"name":"n","type":"long"}`), record(`{"name":"n","type":"int"}`), nil},
		{"int promotes to double", record(`{"name":"n","type":"double"}`), record(`{"name":"n","type":"int"}`), nil},
		{"long promotes to float", record(`{"name":"n","type":"float"}`), record(`{"name":"n","type":"long"}`), nil},
		{"float promotes to double", record(`{"name":"n","type":"double"}`), record(`{"name":"n","type":"float"}`), nil},
		{"string reads bytes", record(`{"name":"n","type":"string"}`), record(`{"name":"n","type":"bytes"}`), nil},
		{"bytes reads string", record(`{"name":"n","type":"bytes"}`), record(`{"name":"n","type":"string"}`), nil},
		{"long does not narrow to int", record(`{"name":"n","type":"int"}`), record(`{"name":"n","type":"long"}`),
			[]string{"TYPE_MISMATCH /fields/0/type"}},
		{"double does not narrow to float", record(`{"name":"n","type":"float"}`), record(`{"name":"n","type":"double"}`),
			[]string{"TYPE_MISMATCH /fields/0/type"}},
		{"string is not int", `"int"`, `"string"`, []string{"TYPE_MISMATCH /"}},
		// Enums: a writer symbol the reader lacks needs the reader's enum
		// default. Adding a symbol is BACKWARD but not FORWARD.
		{"backward: enum symbol added", record(enumABC), record(enumAB), nil},
		{"forward: enum symbol added, old reader lacks it", record(enumAB), record(enumABC),
			[]string{"MISSING_ENUM_SYMBOLS /fields/0/type/symbols"}},
		{"forward: enum symbol added, old reader has an enum default", record(enumABDefault), record(enumABC), nil},
		// Unions: making a field a union that holds its type, or adding a
		// branch, is BACKWARD; removing a branch is not.
		{"backward: field becomes a union", record(`{"name":"f1","type":["null","string"]}`), record(f1), nil},
		{"backward: union widened", record(`{"name":"f1","type":["null","string","int"]}`), record(`{"name":"f1","type":["null","string"]}`), nil},
		{"union narrowed", record(`{"name":"f1","type":["null","string"]}`), record(`{"name":"f1","type":["null","string","int"]}`),
			[]string{"MISSING_UNION_BRANCH /fields/0/type/2"}},
		{"union narrowed to its one type", record(f1), record(`{"name":"f1","type":["null","string"]}`),
			[]string{"TYPE_MISMATCH /fields/0/type"}},
		{"union reads a promotable writer", `["null","long"]`, `"int"`, nil},
		{"union lacks the writer's type", `["null","long"]`, `"string"`, []string{"MISSING_UNION_BRANCH /"}},
		// Named types: names must match (unqualified), or a reader alias
		// must name the writer's type; fixed sizes must match.
		{"record renamed", `{"type":"record","name":"q","fields":[]}`, `{"type":"record","name":"r","fields":[]}`,
			[]string{"NAME_MISMATCH /name"}},
		{"record renamed with an alias", `{"type":"record","name":"q","aliases":["r"],"fields":[]}`, `{"type":"record","name":"r","fields":[]}`, nil},
		{"namespace changed", `{"type":"record","name":"r","namespace":"a","fields":[]}`, `{"type":"record","name":"r","namespace":"b","fields":[]}`, nil},
		{"fixed resized", record(`{"name":"x","type":{"type":"fixed","name":"F","size":4}}`), record(`{"name":"x","type":{"type":"fixed","name":"F","size":8}}`),
			[]string{"FIXED_SIZE_MISMATCH /fields/0/type/size"}},
		{"fixed renamed and resized", `{"type":"fixed","name":"G","size":4}`, `{"type":"fixed","name":"F","size":8}`,
			[]string{"NAME_MISMATCH /name", "FIXED_SIZE_MISMATCH /size"}},
		{"record is not a map", `{"type":"map","values":"int"}`, `{"type":"record","name":"r","fields":[]}`, []string{"TYPE_MISMATCH /"}},
		// Nested records, arrays and maps: the path leads to the change.
		{"nested field added without a default", record(f1, inner(`{"name":"a","type":"int"}`, `{"name":"b","type":"int"}`)),
			record(f1, inner(`{"name":"a","type":"int"}`)),
			[]string{"READER_FIELD_MISSING_DEFAULT_VALUE /fields/1/type/fields/1"}},
		{"nested field type changed", record(f1, inner(`{"name":"a","type":"boolean"}`)), record(f1, inner(`{"name":"a","type":"int"}`)),
			[]string{"TYPE_MISMATCH /fields/1/type/fields/0/type"}},
		{"array items changed", `{"type":"array","items":"int"}`, `{"type":"array","items":"long"}`, []string{"TYPE_MISMATCH /items"}},
		{"map values promoted", `{"type":"map","values":"double"}`, `{"type":"map","values":"int"}`, nil},
		// Every problem is reported, not only the first.
		{"two problems", record(`{"name":"a","type":"int"}`, `{"name":"b","type":"int"}`), record(`{"name":"a","type":"string"}`),
			[]string{"TYPE_MISMATCH /fields/0/type", "READER_FIELD_MISSING_DEFAULT_VALUE /fields/1"}},
		// Recursive types end: a pair met inside itself is compatible
		// unless shown otherwise.
		{"recursive list gains a defaulted field",
			`{"type":"record","name":"L","fields":[{"name":"v","type":"int"},{"name":"n","type":["null","L"]},{"name":"x","type":"int","default":0}]}`,
			`{"type":"record","name":"L","fields":[{"name":"v","type":"int"},{"name":"n","type":["null","L"]}]}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reader, writer := mustParse(t, tc.reader), mustParse(t, tc.writer)
			found := reader.ReadsFrom(writer)
			if got := kindsAt(found); !slices.Equal(got, tc.want) {
				t.Fatalf("ReadsFrom = %v, want %v\n%v", got, tc.want, found)
			}
			for _, in := range found {
				if in.Message == "" {
					t.Errorf("%s has no message", in)
				}
			}
			// The library's own check agrees on the verdict.
			libErr := lib.CheckCompatibility(writer.codec, reader.codec)
			if (libErr == nil) != (len(tc.want) == 0) {
				t.Errorf("the library's CheckCompatibility says %v", libErr)
			}
		})
	}
}

func TestReadsFromMessages(t *testing.T) {
	t.Parallel()
	reader := mustParse(t, record(`{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}`, `{"name":"f2","type":"string"}`))
	writer := mustParse(t, record(`{"name":"e","type":{"type":"enum","name":"E","symbols":["A","C","B"]}}`))
	got := fmt.Sprint(reader.ReadsFrom(writer))
	for _, want := range []string{
		`{errorType:'MISSING_ENUM_SYMBOLS', description:'the reader's enum "E" lacks the writer's symbols [B, C] and has no default', path:'/fields/0/type/symbols'}`,
		`{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'the reader's field "f2" of record "r" has no default and the writer's record lacks it', path:'/fields/1'}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ReadsFrom = %s\nwant it to hold %s", got, want)
		}
	}
}
