package jsonschema

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"millrace/schemas/format"
)

// mustParse parses a schema with no references under the default limits.
func mustParse(t testing.TB, text string) format.Schema {
	t.Helper()
	s, err := Type.Parse(text, nil, format.DefaultLimits)
	if err != nil {
		t.Fatalf("Parse(%s): %v", text, err)
	}
	return s
}

// Objects used by the content-model cases: open (nothing said of other
// members), closed (additionalProperties false).
const (
	openA   = `{"type":"object","properties":{"a":{"type":"string"}}}`
	closedA = `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`
)

// TestReadsFrom checks the reader (Confluent's "update") against the writer
// ("original") as Confluent's BACKWARD check does. Cases are Confluent's
// rules: SchemaDiff.COMPATIBLE_CHANGES_STRICT and the Difference types of
// io.confluent.kafka.schemaregistry.json.diff (ObjectSchemaDiff's content
// models, NumberSchemaDiff, StringSchemaDiff, EnumSchemaDiff,
// ArraySchemaDiff, CombinedSchemaDiff, NotSchemaDiff), the behaviour its
// diff-schema-examples test data pins down (run against this package once,
// outside the repository: all 263 examples get Confluent's verdict except
// the deviations compat.go lists), and the open/closed content model rules
// of Confluent's JSON Schema compatibility docs (serdes-json). want lists
// the incompatible kinds with their paths, "KIND@path"; none means
// compatible.
func TestReadsFrom(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, writer, reader string
		want                 []string
	}{
		// Anything can change to the empty schema; false reads nothing.
		{"to empty schema", openA, `{}`, nil},
		{"to true", openA, `true`, nil},
		{"from false", `false`, openA, nil},
		{"from empty schema", `{}`, openA, []string{"TYPE_CHANGED@#/"}},
		{"identical", closedA, closedA, nil},

		// Open content model: the writer may have written any member, so
		// the reader may not constrain a new one; removing one is fine.
		{"property added to open model", openA,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}`,
			[]string{"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL@#/properties/b"}},
		{"property with empty schema added to open model", openA,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{}}}`, nil},
		{"property removed from open model", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}`,
			openA, nil},

		// Closed content model: the writer never wrote other members, so
		// an optional one may be added; a removed one is refused.
		{"optional property added to closed model", closedA,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}`, nil},
		{"required property added to closed model", closedA,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}`,
			[]string{"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL@#/properties/b"}},
		{"required property with default added to closed model", closedA,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string","default":"x"}},"required":["b"],"additionalProperties":false}`, nil},
		{"property removed from closed model",
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}`, closedA,
			[]string{"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL@#/properties/b"}},
		{"property with false removed from closed model",
			`{"type":"object","properties":{"a":{"type":"string"},"b":false},"additionalProperties":false}`, closedA, nil},

		// Partially open models: patternProperties or a schema for
		// additionalProperties decides whether the member is covered.
		{"property removed, covered by patternProperties",
			`{"type":"object","properties":{"a":{"type":"string"},"x_1":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string"}},"patternProperties":{"^x_":{"type":"string"}},"additionalProperties":false}`, nil},
		{"property removed, not covered by patternProperties",
			`{"type":"object","properties":{"a":{"type":"string"},"x_1":{"type":"string"}},"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string"}},"patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":false}`,
			[]string{"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL@#/properties/x_1", "TYPE_CHANGED@#/properties/x_1"}},
		{"property added, covered by additionalProperties",
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string","maxLength":9}},"additionalProperties":{"type":"string"}}`,
			[]string{"MAX_LENGTH_ADDED@#/properties/b/maxLength", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL@#/properties/b"}},
		{"property added, same as additionalProperties",
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":{"type":"string"}}`, nil},

		// additionalProperties itself.
		{"additional properties removed", openA, closedA,
			[]string{"ADDITIONAL_PROPERTIES_REMOVED@#/additionalProperties"}},
		{"additional properties added", closedA, openA, nil},
		{"additional properties narrowed", openA,
			`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}`,
			[]string{"ADDITIONAL_PROPERTIES_NARROWED@#/additionalProperties"}},

		// required.
		{"required attribute added", openA,
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
			[]string{"REQUIRED_ATTRIBUTE_ADDED@#/required/a"}},
		{"required attribute with default added", openA,
			`{"type":"object","properties":{"a":{"type":"string","default":""}},"required":["a"]}`, nil},
		{"required attribute removed", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, openA, nil},

		// Types: integer is within number; a subset is narrowed.
		{"type changed", `{"type":"string"}`, `{"type":"integer"}`, []string{"TYPE_CHANGED@#/"}},
		{"type extended integer to number", `{"type":"integer"}`, `{"type":"number"}`, nil},
		{"type narrowed number to integer", `{"type":"number"}`, `{"type":"integer"}`, []string{"TYPE_NARROWED@#/"}},
		{"type extended with null", `{"type":"string"}`, `{"type":["string","null"]}`, nil},
		{"type narrowed without null", `{"type":["string","null"]}`, `{"type":"string"}`, []string{"TYPE_NARROWED@#/"}},
		{"nested type changed", openA, `{"type":"object","properties":{"a":{"type":"boolean"}}}`,
			[]string{"TYPE_CHANGED@#/properties/a"}},

		// Numeric bounds may only widen.
		{"maximum decreased", `{"type":"number","maximum":10}`, `{"type":"number","maximum":5}`, []string{"MAXIMUM_DECREASED@#/maximum"}},
		{"maximum increased", `{"type":"number","maximum":10}`, `{"type":"number","maximum":50}`, nil},
		{"maximum added", `{"type":"number"}`, `{"type":"number","maximum":5}`, []string{"MAXIMUM_ADDED@#/maximum"}},
		{"maximum removed", `{"type":"number","maximum":5}`, `{"type":"number"}`, nil},
		{"minimum increased", `{"type":"integer","minimum":0}`, `{"type":"integer","minimum":1}`, []string{"MINIMUM_INCREASED@#/minimum"}},
		{"minimum decreased", `{"type":"integer","minimum":0}`, `{"type":"integer","minimum":-1}`, nil},
		{"exclusive minimum increased", `{"type":"number","exclusiveMinimum":0}`, `{"type":"number","exclusiveMinimum":0.5}`,
			[]string{"EXCLUSIVE_MINIMUM_INCREASED@#/exclusiveMinimum"}},
		{"multipleOf expanded", `{"type":"integer","multipleOf":2}`, `{"type":"integer","multipleOf":4}`, []string{"MULTIPLE_OF_EXPANDED@#/multipleOf"}},
		{"multipleOf reduced", `{"type":"integer","multipleOf":4}`, `{"type":"integer","multipleOf":2}`, nil},
		{"multipleOf changed", `{"type":"number","multipleOf":0.3}`, `{"type":"number","multipleOf":0.5}`, []string{"MULTIPLE_OF_CHANGED@#/multipleOf"}},

		// String length and pattern.
		{"max length decreased", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, []string{"MAX_LENGTH_DECREASED@#/maxLength"}},
		{"max length added", `{"type":"string"}`, `{"type":"string","maxLength":5}`, []string{"MAX_LENGTH_ADDED@#/maxLength"}},
		{"max length increased", `{"type":"string","maxLength":5}`, `{"type":"string","maxLength":10}`, nil},
		{"min length increased", `{"type":"string","minLength":1}`, `{"type":"string","minLength":2}`, []string{"MIN_LENGTH_INCREASED@#/minLength"}},
		{"pattern added", `{"type":"string"}`, `{"type":"string","pattern":"^a"}`, []string{"PATTERN_ADDED@#/pattern"}},
		{"pattern removed", `{"type":"string","pattern":"^a"}`, `{"type":"string"}`, nil},

		// Enums may only gain values; const is a one-value enum.
		{"enum narrowed", `{"enum":["a","b"]}`, `{"enum":["a"]}`, []string{"ENUM_ARRAY_NARROWED@#/enum"}},
		{"enum extended", `{"enum":["a"]}`, `{"enum":["a","b"]}`, nil},
		{"enum changed", `{"enum":["a","b"]}`, `{"enum":["a","c"]}`, []string{"ENUM_ARRAY_CHANGED@#/enum"}},
		{"const changed", `{"const":1}`, `{"const":2}`, []string{"ENUM_ARRAY_CHANGED@#/enum"}},

		// Items and tuples.
		{"items type changed", `{"type":"array","items":{"type":"string"}}`, `{"type":"array","items":{"type":"integer"}}`,
			[]string{"TYPE_CHANGED@#/items"}},
		{"items added", `{"type":"array"}`, `{"type":"array","items":{"type":"integer"}}`, []string{"SCHEMA_ADDED@#/items"}},
		{"items removed", `{"type":"array","items":{"type":"integer"}}`, `{"type":"array"}`, nil},
		{"max items decreased", `{"type":"array","maxItems":3}`, `{"type":"array","maxItems":2}`, []string{"MAX_ITEMS_DECREASED@#/maxItems"}},
		{"unique items added", `{"type":"array"}`, `{"type":"array","uniqueItems":true}`, []string{"UNIQUE_ITEMS_ADDED@#/uniqueItems"}},
		{"minContains increased", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","contains":{"type":"string"},"minContains":1}`, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","contains":{"type":"string"},"minContains":2}`,
			[]string{"MIN_CONTAINS_INCREASED@#/minContains"}},
		{"maxContains increased", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","contains":{"type":"string"},"maxContains":1}`, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","contains":{"type":"string"},"maxContains":2}`, nil},
		{"item added to closed tuple", `{"type":"array","items":[{"type":"string"}],"additionalItems":false}`,
			`{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}`, nil},
		{"item added to open tuple", `{"type":"array","items":[{"type":"string"}]}`,
			`{"type":"array","items":[{"type":"string"},{"type":"integer"}]}`,
			[]string{"ITEM_ADDED_TO_OPEN_CONTENT_MODEL@#/items/1"}},
		{"item removed from closed tuple", `{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}`,
			`{"type":"array","items":[{"type":"string"}],"additionalItems":false}`,
			[]string{"ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL@#/items/1"}},
		{"prefixItems item removed from closed tuple",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`,
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"string"}],"items":false}`,
			[]string{"ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL@#/items/1"}},

		// Combinations.
		{"sum type extended from a plain type", `{"type":"string"}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, nil},
		{"sum type narrowed", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"}]}`,
			[]string{"SUM_TYPE_NARROWED@#/"}},
		{"sum type extended", `{"anyOf":[{"type":"string"}]}`, `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, nil},
		{"oneOf to anyOf", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, nil},
		{"anyOf to oneOf", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`,
			[]string{"COMBINED_TYPE_CHANGED@#/"}},
		{"subschemas changed", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"},{"type":"boolean"}]}`,
			[]string{"COMBINED_TYPE_SUBSCHEMAS_CHANGED@#/oneOf"}},
		{"property made nullable with oneOf", openA, `{"type":"object","properties":{"a":{"oneOf":[{"type":"null"},{"type":"string"}]}}}`, nil},
		{"nullable property made plain", `{"type":"object","properties":{"a":{"oneOf":[{"type":"null"},{"type":"string"}]}}}`, openA,
			[]string{"TYPE_CHANGED@#/properties/a"}},
		{"union to plain type", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"type":"string"}`, []string{"TYPE_CHANGED@#/"}},
		{"product type narrowed", `{"allOf":[{"type":"number"},{"minimum":0}]}`, `{"allOf":[{"type":"number"}]}`, nil},
		{"repeated branch counts once", `{"allOf":[{"type":"string"}]}`, `{"allOf":[{"type":"string"},{"type":"string"}]}`, nil},
		{"allOf to a smaller anyOf", `{"allOf":[{"type":"number"},{"type":"string"}]}`, `{"anyOf":[{"type":"string"}]}`, nil},
		{"allOf to a single-branch oneOf", `{"allOf":[{"type":"number"},{"type":"string"}]}`, `{"oneOf":[{"type":"string"}]}`, nil},
		{"not added", `{"type":"string"}`, `{"type":"string","not":{"const":""}}`, []string{"NOT_TYPE_EXTENDED@#/not"}},
		{"not narrowed", `{"not":{"type":["string","integer"]}}`, `{"not":{"type":"string"}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := kinds(mustParse(t, tc.reader).ReadsFrom(mustParse(t, tc.writer)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("reader %s reading writer %s:\n got  %v\n want %v", tc.reader, tc.writer, got, tc.want)
			}
		})
	}
}

// kinds renders incompatibilities as sorted "KIND@path".
func kinds(incompats []format.Incompat) []string {
	var out []string
	for _, i := range incompats {
		if i.Message == "" || !strings.HasPrefix(i.Path, "#/") {
			out = append(out, "malformed "+i.String())
			continue
		}
		out = append(out, i.Kind+"@"+i.Path)
	}
	slices.Sort(out)
	return out
}

// TestReadsFromRecursive checks that a schema referring to itself is
// compared without looping, and that a change deep inside is still found.
func TestReadsFromRecursive(t *testing.T) {
	t.Parallel()
	tree := func(leaf string) string {
		return `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"` + leaf + `"},` +
			`"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`
	}
	same := mustParse(t, tree("integer")).ReadsFrom(mustParse(t, tree("integer")))
	if len(same) != 0 {
		t.Errorf("a recursive schema does not read itself: %v", same)
	}
	got := kinds(mustParse(t, tree("integer")).ReadsFrom(mustParse(t, tree("number"))))
	if want := []string{"TYPE_NARROWED@#/properties/value"}; !slices.Equal(got, want) {
		t.Errorf("integer leaves reading number leaves: got %v, want %v", got, want)
	}
}

// TestReadsFromBounded checks that combinations too large to compare
// branch by branch are refused with tooComplex instead of taking minutes.
func TestReadsFromBounded(t *testing.T) {
	t.Parallel()
	union := func(prefix string) string {
		branches := make([]string, 600)
		for i := range branches {
			branches[i] = fmt.Sprintf(`{"type":"object","properties":{"%s%d":{"type":"string"}},"required":["%s%d"]}`, prefix, i, prefix, i)
		}
		return `{"oneOf":[` + strings.Join(branches, ",") + `]}`
	}
	got := mustParse(t, union("r")).ReadsFrom(mustParse(t, union("w")))
	if !slices.ContainsFunc(got, func(i format.Incompat) bool { return i.Kind == tooComplex }) {
		t.Errorf("got %d incompatibilities, none %s", len(got), tooComplex)
	}
}
