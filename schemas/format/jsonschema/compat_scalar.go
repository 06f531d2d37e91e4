package jsonschema

import (
	"bytes"
	"encoding/json"
	"math/big"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// bound compares one optional bound (Confluent's *_ADDED, *_REMOVED,
// *_INCREASED, *_DECREASED), prefix being the Kind's start, e.g.
// MAX_LENGTH. wSet and rSet say whether each side has the keyword; order
// is cmp-like, negative when the writer's bound is the smaller.
func bound(prefix, keyword string, wSet, rSet bool, order int) []difference {
	switch {
	case !wSet && !rSet:
		return nil
	case !wSet:
		return []difference{change(prefix+"_ADDED", "/"+keyword, "the reader adds %s", keyword)}
	case !rSet:
		return []difference{change(prefix+"_REMOVED", "/"+keyword, "the reader removes %s", keyword)}
	case order < 0:
		return []difference{change(prefix+"_INCREASED", "/"+keyword, "the reader increases %s", keyword)}
	case order > 0:
		return []difference{change(prefix+"_DECREASED", "/"+keyword, "the reader decreases %s", keyword)}
	}
	return nil
}

// intBound is bound for integer keywords.
func intBound(prefix, keyword string, w, r *int) []difference {
	order := 0
	if w != nil && r != nil {
		order = compareInts(*w, *r)
	}
	return bound(prefix, keyword, w != nil, r != nil, order)
}

// ratBound is bound for numeric keywords.
func ratBound(prefix, keyword string, w, r *big.Rat) []difference {
	order := 0
	if w != nil && r != nil {
		order = w.Cmp(r)
	}
	return bound(prefix, keyword, w != nil, r != nil, order)
}

// compareInts is cmp.Compare for ints.
func compareInts(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareString is Confluent's StringSchemaDiff: lengths may widen, a
// pattern may only be removed.
func compareString(writer, reader *santhosh.Schema) []difference {
	diffs := intBound("MAX_LENGTH", "maxLength", writer.MaxLength, reader.MaxLength)
	diffs = append(diffs, intBound("MIN_LENGTH", "minLength", writer.MinLength, reader.MinLength)...)
	switch {
	case writer.Pattern == nil && reader.Pattern != nil:
		diffs = append(diffs, change("PATTERN_ADDED", "/pattern", "the reader adds the pattern %q", reader.Pattern.String()))
	case writer.Pattern != nil && reader.Pattern == nil:
		diffs = append(diffs, change("PATTERN_REMOVED", "/pattern", "the reader removes the pattern %q", writer.Pattern.String()))
	case writer.Pattern != nil && writer.Pattern.String() != reader.Pattern.String():
		diffs = append(diffs, change("PATTERN_CHANGED", "/pattern", "the reader changes the pattern from %q to %q", writer.Pattern.String(), reader.Pattern.String()))
	}
	return diffs
}

// compareNumber is Confluent's NumberSchemaDiff (integer against number is
// a type change, compared by typesOf): bounds may widen, multipleOf may
// only become a divisor of the writer's.
func compareNumber(writer, reader *santhosh.Schema) []difference {
	diffs := ratBound("MAXIMUM", "maximum", writer.Maximum, reader.Maximum)
	diffs = append(diffs, ratBound("MINIMUM", "minimum", writer.Minimum, reader.Minimum)...)
	diffs = append(diffs, ratBound("EXCLUSIVE_MAXIMUM", "exclusiveMaximum", writer.ExclusiveMaximum, reader.ExclusiveMaximum)...)
	diffs = append(diffs, ratBound("EXCLUSIVE_MINIMUM", "exclusiveMinimum", writer.ExclusiveMinimum, reader.ExclusiveMinimum)...)
	w, r := writer.MultipleOf, reader.MultipleOf
	switch {
	case w == nil && r == nil:
	case w == nil:
		diffs = append(diffs, change("MULTIPLE_OF_ADDED", "/multipleOf", "the reader adds multipleOf %s", r.RatString()))
	case r == nil:
		diffs = append(diffs, change("MULTIPLE_OF_REMOVED", "/multipleOf", "the reader removes multipleOf %s", w.RatString()))
	case w.Cmp(r) == 0:
	case multipleOf(r, w):
		diffs = append(diffs, change("MULTIPLE_OF_EXPANDED", "/multipleOf", "the reader's multipleOf %s is a multiple of the writer's %s", r.RatString(), w.RatString()))
	case multipleOf(w, r):
		diffs = append(diffs, change("MULTIPLE_OF_REDUCED", "/multipleOf", "the reader's multipleOf %s divides the writer's %s", r.RatString(), w.RatString()))
	default:
		diffs = append(diffs, change("MULTIPLE_OF_CHANGED", "/multipleOf", "the reader's multipleOf %s neither divides nor is a multiple of the writer's %s", r.RatString(), w.RatString()))
	}
	return diffs
}

// multipleOf reports whether x is an integer multiple of y (y > 0, as the
// metaschema requires).
func multipleOf(x, y *big.Rat) bool {
	return new(big.Rat).Quo(x, y).IsInt()
}

// compareEnum is Confluent's EnumSchemaDiff, with const as a one-value
// enum: the reader may accept more values, not fewer. An enum added by the
// reader narrows what it accepts; one removed widens it.
func compareEnum(writer, reader *santhosh.Schema) []difference {
	w, r := enumValues(writer), enumValues(reader)
	switch {
	case w == nil && r == nil:
		return nil
	case w == nil:
		return []difference{change("ENUM_ARRAY_NARROWED", "/enum", "the reader adds an enum of %d values", len(r))}
	case r == nil:
		return []difference{change("ENUM_ARRAY_EXTENDED", "/enum", "the reader removes the writer's enum")}
	}
	wHasAll, rHasAll := containsAll(w, r), containsAll(r, w)
	switch {
	case wHasAll && rHasAll:
		return nil
	case rHasAll:
		return []difference{change("ENUM_ARRAY_EXTENDED", "/enum", "the reader's enum has every value of the writer's, and more")}
	case wHasAll:
		return []difference{change("ENUM_ARRAY_NARROWED", "/enum", "the reader's enum lacks values of the writer's")}
	}
	return []difference{change("ENUM_ARRAY_CHANGED", "/enum", "the reader's enum lacks values of the writer's and has others")}
}

// containsAll reports whether every value of sub is in set, values compared
// as their JSON encodings (maps encode with sorted keys).
func containsAll(set, sub []any) bool {
	have := make(map[string]bool, len(set))
	for _, v := range set {
		have[encodeValue(v)] = true
	}
	for _, v := range sub {
		if !have[encodeValue(v)] {
			return false
		}
	}
	return true
}

// encodeValue is v's JSON encoding, the key enum values are compared by.
// Numbers compare by value: 1.0 and 1 are the same enum value.
func encodeValue(v any) string {
	if n, ok := v.(json.Number); ok {
		if r, ok := new(big.Rat).SetString(string(n)); ok {
			return r.RatString()
		}
	}
	var out bytes.Buffer
	if err := json.NewEncoder(&out).Encode(v); err != nil {
		// Values from a JSON document always encode.
		return ""
	}
	return out.String()
}
