package jsonschema

import (
	"fmt"
	"slices"
	"strings"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// Content models, in Confluent's words: an object is open when it says
// nothing of members its properties do not name (no additionalProperties,
// or true, and no patternProperties), closed when additionalProperties is
// false, and partially open when patternProperties or a schema for
// additionalProperties decides. Whether adding or removing a property is
// compatible depends on it: a writer with an open model may have written a
// member of any value under a name the reader now constrains; a reader
// with a closed model refuses a member the writer had and it dropped.
// Arrays with tuple items ("items": [...] or prefixItems) follow the same
// rules with additionalItems.

// anything is the schema that accepts every value, for a member an open
// model lets through.
var anything = &santhosh.Schema{}

// pointerEscaper escapes one JSON Pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// openness reads additionalProperties, additionalItems or their unevaluated
// counterparts: whether more members are permitted and the schema they
// must match (nil: any value).
func openness(v any) (permitted bool, schema *santhosh.Schema) {
	switch v := v.(type) {
	case bool:
		return v, nil
	case *santhosh.Schema:
		if v == nil || !constrains(v) {
			return true, nil
		}
		if isFalse(v) {
			return false, nil
		}
		return true, v
	}
	return true, nil
}

// additionalProperties is openness of an object's other members.
func additionalProperties(s *santhosh.Schema) (bool, *santhosh.Schema) {
	if s.AdditionalProperties == nil && s.UnevaluatedProperties != nil {
		return openness(s.UnevaluatedProperties)
	}
	return openness(s.AdditionalProperties)
}

// openObject reports whether s is an open content model.
func openObject(s *santhosh.Schema) bool {
	permitted, schema := additionalProperties(s)
	return permitted && schema == nil && len(s.PatternProperties) == 0
}

// memberSchema is what a content model that is not open says of a member
// named name: the first patternProperties schema matching it, else the
// additionalProperties schema (anything when only patterns close it), nil
// when the member is refused.
func memberSchema(s *santhosh.Schema, name string) *santhosh.Schema {
	patterns := make([]santhosh.Regexp, 0, len(s.PatternProperties))
	for pattern := range s.PatternProperties {
		patterns = append(patterns, pattern)
	}
	slices.SortFunc(patterns, func(a, b santhosh.Regexp) int { return strings.Compare(a.String(), b.String()) })
	for _, pattern := range patterns {
		if pattern.MatchString(name) {
			return s.PatternProperties[pattern]
		}
	}
	permitted, schema := additionalProperties(s)
	switch {
	case !permitted:
		return nil
	case schema == nil:
		return anything
	}
	return schema
}

// compareObject is Confluent's ObjectSchemaDiff.
func (c *comparer) compareObject(writer, reader *santhosh.Schema) []difference {
	diffs := compareRequired(writer, reader)
	diffs = append(diffs, c.compareProperties(writer, reader)...)
	diffs = append(diffs, c.compareDependencies(writer, reader)...)
	diffs = append(diffs, c.compareAdditional("PROPERTIES", "/additionalProperties", writer, reader, additionalProperties)...)
	diffs = append(diffs, intBound("MAX_PROPERTIES", "maxProperties", writer.MaxProperties, reader.MaxProperties)...)
	return append(diffs, intBound("MIN_PROPERTIES", "minProperties", writer.MinProperties, reader.MinProperties)...)
}

// compareRequired reports names the reader requires and the writer did not
// (incompatible unless the reader's property has a default) and names it
// no longer requires. A required property the reader adds to a content
// model that is not open is compareProperties' to report, as in Confluent;
// unlike Confluent, a required name added to an open model, or without a
// property, is reported too: the writer's values may lack it.
func compareRequired(writer, reader *santhosh.Schema) []difference {
	var diffs []difference
	for _, name := range sortedUnique(reader.Required) {
		if slices.Contains(writer.Required, name) {
			continue
		}
		property, inReader := reader.Properties[name]
		if _, inWriter := writer.Properties[name]; inReader && !inWriter && !openObject(writer) {
			continue
		}
		path := "/required/" + pointerEscaper.Replace(name)
		if inReader && resolve(property).Default != nil {
			diffs = append(diffs, change("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", path, "the reader requires %q, which has a default", name))
		} else {
			diffs = append(diffs, change("REQUIRED_ATTRIBUTE_ADDED", path, "the reader requires %q, which the writer's values may lack", name))
		}
	}
	for _, name := range sortedUnique(writer.Required) {
		if !slices.Contains(reader.Required, name) {
			diffs = append(diffs, change("REQUIRED_ATTRIBUTE_REMOVED", "/required/"+pointerEscaper.Replace(name), "the reader no longer requires %q", name))
		}
	}
	return diffs
}

// compareProperties compares the properties both name, and applies the
// content-model rules to those only one names.
func (c *comparer) compareProperties(writer, reader *santhosh.Schema) []difference {
	var names []string
	for name := range writer.Properties {
		names = append(names, name)
	}
	for name := range reader.Properties {
		if _, ok := writer.Properties[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	c.comparisons += len(names)
	var diffs []difference
	for _, name := range names {
		path := "/properties/" + pointerEscaper.Replace(name)
		w, r := writer.Properties[name], reader.Properties[name]
		switch {
		case r == nil:
			diffs = append(diffs, c.propertyRemoved(path, name, w, reader)...)
		case w == nil:
			diffs = append(diffs, c.propertyAdded(path, name, writer, r, reader)...)
		default:
			diffs = append(diffs, under(path, c.compare(w, r))...)
		}
	}
	return diffs
}

// propertyRemoved judges a property the reader no longer names by the
// reader's content model.
func (c *comparer) propertyRemoved(path, name string, w, reader *santhosh.Schema) []difference {
	if openObject(reader) {
		return []difference{change("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", path, "the reader removes %q from an open content model", name)}
	}
	if covering := memberSchema(reader, name); covering != nil {
		sub := under(path, c.compare(w, covering))
		if compatible(sub) {
			return append(sub, change("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader removes %q, which its patternProperties or additionalProperties still accept", name))
		}
		return append(sub, change("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader removes %q and its patternProperties or additionalProperties do not accept the writer's values for it", name))
	}
	if isFalse(resolve(w)) {
		return []difference{change("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", path, "the reader removes %q, which the writer forbade", name)}
	}
	return []difference{change("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", path, "the reader removes %q from a closed content model, so it refuses the writer's values that have it", name)}
}

// propertyAdded judges a property the reader names and the writer did not
// by the writer's content model.
func (c *comparer) propertyAdded(path, name string, writer, r, reader *santhosh.Schema) []difference {
	if openObject(writer) {
		if !constrains(resolve(r)) {
			return []difference{change("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", path, "the reader adds %q with an empty schema", name)}
		}
		return []difference{change("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", path, "the reader adds %q, which the writer's open content model let have any value", name)}
	}
	var diffs []difference
	if covering := memberSchema(writer, name); covering != nil {
		sub := under(path, c.compare(covering, r))
		diffs = append(diffs, sub...)
		if compatible(sub) {
			diffs = append(diffs, change("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader adds %q and reads what the writer's patternProperties or additionalProperties let it be", name))
		} else {
			diffs = append(diffs, change("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", path, "the reader adds %q and refuses values the writer's patternProperties or additionalProperties let it have", name))
		}
	}
	switch {
	case !slices.Contains(reader.Required, name):
		diffs = append(diffs, change("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", path, "the reader adds the optional %q", name))
	case resolve(r).Default != nil:
		diffs = append(diffs, change("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", path, "the reader adds the required %q with a default", name))
	default:
		diffs = append(diffs, change("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", path, "the reader adds the required %q, which the writer's values lack", name))
	}
	return diffs
}

// compareDependencies compares dependentRequired and dependentSchemas
// (draft 2019-09 on) and dependencies (before), under Confluent's
// DEPENDENCY_* kinds.
func (c *comparer) compareDependencies(writer, reader *santhosh.Schema) []difference {
	wArrays, wSchemas := dependencies(writer)
	rArrays, rSchemas := dependencies(reader)
	var diffs []difference
	for _, name := range unionKeys(wArrays, rArrays) {
		path := "/dependencies/" + pointerEscaper.Replace(name)
		w, inWriter := wArrays[name]
		r, inReader := rArrays[name]
		wHasAll, rHasAll := containsAllStrings(w, r), containsAllStrings(r, w)
		switch {
		case !inReader:
			diffs = append(diffs, change("DEPENDENCY_ARRAY_REMOVED", path, "the reader removes the dependency of %q", name))
		case !inWriter:
			diffs = append(diffs, change("DEPENDENCY_ARRAY_ADDED", path, "the reader adds a dependency of %q", name))
		case wHasAll && rHasAll:
		case rHasAll:
			diffs = append(diffs, change("DEPENDENCY_ARRAY_EXTENDED", path, "the reader's dependency of %q requires more names", name))
		case wHasAll:
			diffs = append(diffs, change("DEPENDENCY_ARRAY_NARROWED", path, "the reader's dependency of %q requires fewer names", name))
		default:
			diffs = append(diffs, change("DEPENDENCY_ARRAY_CHANGED", path, "the reader's dependency of %q requires other names", name))
		}
	}
	for _, name := range unionKeys(wSchemas, rSchemas) {
		path := "/dependencies/" + pointerEscaper.Replace(name)
		w, r := wSchemas[name], rSchemas[name]
		switch {
		case r == nil:
			diffs = append(diffs, change("DEPENDENCY_SCHEMA_REMOVED", path, "the reader removes the schema dependency of %q", name))
		case w == nil:
			diffs = append(diffs, change("DEPENDENCY_SCHEMA_ADDED", path, "the reader adds a schema dependency of %q", name))
		default:
			diffs = append(diffs, under(path, c.compare(w, r))...)
		}
	}
	return diffs
}

// dependencies merges dependencies, dependentRequired and dependentSchemas.
func dependencies(s *santhosh.Schema) (map[string][]string, map[string]*santhosh.Schema) {
	arrays := map[string][]string{}
	schemas := map[string]*santhosh.Schema{}
	for name, v := range s.Dependencies {
		switch v := v.(type) {
		case []string:
			arrays[name] = v
		case *santhosh.Schema:
			schemas[name] = v
		}
	}
	for name, v := range s.DependentRequired {
		arrays[name] = v
	}
	for name, v := range s.DependentSchemas {
		schemas[name] = v
	}
	return arrays, schemas
}

// compareAdditional is Confluent's rule for additionalProperties (kind
// PROPERTIES) and additionalItems (ITEMS): permitting more is compatible,
// refusing or constraining more is not.
func (c *comparer) compareAdditional(kind, path string, writer, reader *santhosh.Schema, of func(*santhosh.Schema) (bool, *santhosh.Schema)) []difference {
	wPermitted, w := of(writer)
	rPermitted, r := of(reader)
	keyword := strings.TrimPrefix(path, "/")
	switch {
	case wPermitted != rPermitted && rPermitted:
		return []difference{change("ADDITIONAL_"+kind+"_ADDED", path, "the reader permits %s the writer refused", keyword)}
	case wPermitted != rPermitted:
		return []difference{change("ADDITIONAL_"+kind+"_REMOVED", path, "the reader refuses %s the writer permitted", keyword)}
	case w == nil && r != nil:
		return []difference{change("ADDITIONAL_"+kind+"_NARROWED", path, "the reader constrains %s the writer let be anything", keyword)}
	case w != nil && r == nil:
		return []difference{change("ADDITIONAL_"+kind+"_EXTENDED", path, "the reader lets %s be anything", keyword)}
	case w != nil:
		return under(path, c.compare(w, r))
	}
	return nil
}

// sortedUnique returns names sorted, without repeats.
func sortedUnique(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys[V any](a, b map[string]V) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// containsAllStrings reports whether set has every name of sub.
func containsAllStrings(set, sub []string) bool {
	for _, name := range sub {
		if !slices.Contains(set, name) {
			return false
		}
	}
	return true
}

// itemPath is the path of tuple item i.
func itemPath(i int) string { return fmt.Sprintf("/items/%d", i) }
