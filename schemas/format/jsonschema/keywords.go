package jsonschema

import (
	"encoding/json"
	"math/big"
	"strings"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// typeSet is a set of JSON Schema types; integer is within number, so a set
// with number always has integer.
type typeSet uint8

// The types of JSON Schema.
const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeObject
	typeArray
	typeNumber
	typeInteger
	typeString

	anyType = typeNull | typeBoolean | typeObject | typeArray | typeNumber | typeInteger | typeString
)

// typeNames spells the types of a set, in typeSet's order.
var typeNames = []string{"null", "boolean", "object", "array", "number", "integer", "string"}

// String lists the set's types, e.g. [string null].
func (t typeSet) String() string {
	if t == anyType {
		return "[any]"
	}
	var names []string
	for i, name := range typeNames {
		// integer is implied by number: name it only when alone.
		if t&(1<<i) != 0 && !(name == "integer" && t&typeNumber != 0) {
			names = append(names, name)
		}
	}
	return "[" + strings.Join(names, " ") + "]"
}

// typeByName maps a "type" keyword's value to its set.
func typeByName(name string) typeSet {
	for i, n := range typeNames {
		if n == name {
			if name == "number" {
				return typeNumber | typeInteger
			}
			return 1 << i
		}
	}
	return 0
}

// typesOf is the types a schema accepts as Confluent's loader reads it: its
// "type", else the types of its enum or const values, else the types its
// keywords apply to, else any.
func typesOf(s *santhosh.Schema) typeSet {
	var t typeSet
	if s.Types != nil && !s.Types.IsEmpty() {
		for _, name := range s.Types.ToStrings() {
			t |= typeByName(name)
		}
		return t
	}
	if values := enumValues(s); values != nil {
		for _, v := range values {
			t |= typeOfValue(v)
		}
		return t
	}
	if stringKeywords(s) {
		t |= typeString
	}
	if numberKeywords(s) {
		t |= typeNumber | typeInteger
	}
	if objectKeywords(s) {
		t |= typeObject
	}
	if arrayKeywords(s) {
		t |= typeArray
	}
	if t == 0 {
		return anyType
	}
	return t
}

// typeOfValue is the type of one decoded JSON value.
func typeOfValue(v any) typeSet {
	switch v := v.(type) {
	case nil:
		return typeNull
	case bool:
		return typeBoolean
	case string:
		return typeString
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(v)); ok && r.IsInt() {
			return typeInteger
		}
		return typeNumber | typeInteger
	case map[string]any:
		return typeObject
	case []any:
		return typeArray
	}
	return anyType
}

// stringKeywords reports whether s has keywords that apply to strings.
func stringKeywords(s *santhosh.Schema) bool {
	return s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil
}

// numberKeywords reports whether s has keywords that apply to numbers.
func numberKeywords(s *santhosh.Schema) bool {
	return s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil ||
		s.ExclusiveMaximum != nil || s.MultipleOf != nil
}

// objectKeywords reports whether s has keywords that apply to objects.
func objectKeywords(s *santhosh.Schema) bool {
	return s.MinProperties != nil || s.MaxProperties != nil || len(s.Required) > 0 ||
		s.PropertyNames != nil || len(s.Properties) > 0 || len(s.PatternProperties) > 0 ||
		s.AdditionalProperties != nil || len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 ||
		len(s.DependentSchemas) > 0 || s.UnevaluatedProperties != nil
}

// arrayKeywords reports whether s has keywords that apply to arrays.
func arrayKeywords(s *santhosh.Schema) bool {
	return s.MinItems != nil || s.MaxItems != nil || s.UniqueItems || s.Contains != nil ||
		s.Items != nil || s.AdditionalItems != nil || len(s.PrefixItems) > 0 ||
		s.Items2020 != nil || s.UnevaluatedItems != nil
}

// constrains reports whether s refuses any value: false, or any assertion
// the comparison looks at. {} and true accept everything.
func constrains(s *santhosh.Schema) bool {
	if s.Bool != nil {
		return !*s.Bool
	}
	return s.Ref != nil || constrainsBesidesRef(s)
}

// constrainsBesidesRef is constrains without $ref.
func constrainsBesidesRef(s *santhosh.Schema) bool {
	return (s.Types != nil && !s.Types.IsEmpty()) || s.Enum != nil || s.Const != nil ||
		s.Not != nil || len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 ||
		stringKeywords(s) || numberKeywords(s) || objectKeywords(s) || arrayKeywords(s)
}

// isFalse reports whether s is the schema false.
func isFalse(s *santhosh.Schema) bool {
	return s != nil && s.Bool != nil && !*s.Bool
}

// subschemas returns s's branches under criterion (allOf, anyOf, oneOf).
func subschemas(s *santhosh.Schema, criterion string) []*santhosh.Schema {
	switch criterion {
	case "allOf":
		return s.AllOf
	case "anyOf":
		return s.AnyOf
	}
	return s.OneOf
}

// pureCombined returns the criterion and branches of a schema that is only
// a combination, one of allOf, anyOf, oneOf and nothing else compared
// (Confluent's CombinedSchema); "" and nil otherwise.
func pureCombined(s *santhosh.Schema) (string, []*santhosh.Schema) {
	var criterion string
	for _, c := range []string{"allOf", "anyOf", "oneOf"} {
		if len(subschemas(s, c)) > 0 {
			if criterion != "" {
				return "", nil
			}
			criterion = c
		}
	}
	if criterion == "" || (s.Types != nil && !s.Types.IsEmpty()) || s.Enum != nil || s.Const != nil ||
		s.Not != nil || stringKeywords(s) || numberKeywords(s) || objectKeywords(s) || arrayKeywords(s) {
		return "", nil
	}
	return criterion, subschemas(s, criterion)
}

// enumValues is s's enum, or its const as a one-value enum, or nil.
func enumValues(s *santhosh.Schema) []any {
	if s.Enum != nil {
		return s.Enum.Values
	}
	if s.Const != nil {
		return []any{*s.Const}
	}
	return nil
}
