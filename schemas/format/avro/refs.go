package avro

import (
	"encoding/json"
	"fmt"
	"strings"

	"millrace/schemas/format"
)

// typeUse is one place a schema text names a type that is not primitive.
type typeUse struct {
	name  string // as written
	ns    string // the namespace it is read in
	where string // the place, for errors: `field "x" of record "r"`
}

// scanTypes reads a schema text's JSON the way Avro reads a schema, and
// returns the full names of the named types it defines and every use of a
// name. It is the library's name resolution seen from outside, needed for
// two things the library does not do: ordering references (a SchemaCache
// must be given a type before the schemas that use it) and saying where an
// unknown type is used. The text's nesting was bounded before this runs.
func scanTypes(text string) (defined []string, used []typeUse, err error) {
	var doc any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		return nil, nil, err
	}
	s := &typeScan{}
	s.schema(doc, "", "the schema")
	return s.defined, s.used, nil
}

type typeScan struct {
	defined []string
	used    []typeUse
}

func (s *typeScan) schema(v any, ns, where string) {
	switch t := v.(type) {
	case string:
		if !isPrimitive(t) {
			s.used = append(s.used, typeUse{name: t, ns: ns, where: where})
		}
	case []any:
		for _, branch := range t {
			s.schema(branch, ns, where)
		}
	case map[string]any:
		typ, _ := t["type"].(string)
		switch kind(typ) {
		case "record", "enum", "fixed":
			name, _ := t["name"].(string)
			full := qualify(name, ns)
			if space, ok := t["namespace"].(string); ok && !strings.Contains(name, ".") {
				full = qualify(name, space)
			}
			s.defined = append(s.defined, full)
			fields, _ := t["fields"].([]any)
			for _, f := range fields {
				field, _ := f.(map[string]any)
				fieldName, _ := field["name"].(string)
				s.schema(field["type"], namespaceOf(full), fmt.Sprintf("field %q of record %q", fieldName, name))
			}
		case "array":
			s.schema(t["items"], ns, "the items of "+where)
		case "map":
			s.schema(t["values"], ns, "the values of "+where)
		default:
			s.schema(t["type"], ns, where)
		}
	}
}

// refOrder orders the referenced schemas so each comes after those whose
// types it uses, and returns every full name they define. keys are refs'
// keys, sorted, so the order is the same on every call. A text that does
// not scan is placed anywhere: parsing it reports what is wrong.
//
// References using references more than maxDepth deep are refused, as
// nesting deeper than that is within one schema.
func refOrder(refs map[string]string, keys []string, maxDepth int) (order []string, defined map[string]bool, err error) {
	definedBy := make(map[string]string)
	uses := make(map[string][]typeUse, len(keys))
	for _, key := range keys {
		names, used, scanErr := scanTypes(refs[key])
		if scanErr != nil {
			continue
		}
		for _, name := range names {
			if _, taken := definedBy[name]; !taken {
				definedBy[name] = key
			}
		}
		uses[key] = used
	}
	const (
		visiting = 1
		placed   = 2
	)
	state := make(map[string]int, len(keys))
	depth := make(map[string]int, len(keys)) // 1 + the deepest of what it uses
	var place func(key string) error
	place = func(key string) error {
		switch state[key] {
		case placed:
			return nil
		case visiting:
			return fmt.Errorf("avro: the referenced schema %q uses itself through other references; references must not form a cycle", key)
		}
		state[key] = visiting
		depth[key] = 1
		for _, u := range uses[key] {
			dep, ok := definedBy[qualify(u.name, u.ns)]
			if !ok {
				dep, ok = definedBy[u.name]
			}
			if !ok || dep == key {
				continue
			}
			if err := place(dep); err != nil {
				return err
			}
			depth[key] = max(depth[key], depth[dep]+1)
		}
		if depth[key] > maxDepth {
			return fmt.Errorf("avro: the referenced schema %q uses references more than %d deep: %w", key, maxDepth, format.ErrLimit)
		}
		state[key] = placed
		order = append(order, key)
		return nil
	}
	for _, key := range keys {
		if err := place(key); err != nil {
			return nil, nil, err
		}
	}
	defined = make(map[string]bool, len(definedBy))
	for name := range definedBy {
		defined[name] = true
	}
	return order, defined, nil
}
