package jsonschema

import (
	"fmt"
	"maps"
	"slices"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"

	"millrace/schemas/format"
)

// Columns describes the properties of an object schema as columns
// (format.Columnar), in name order (a compiled schema keeps no order): a
// property of one type is that type's column (boolean, integer as int64,
// number as float64, string, a string of format date-time as a
// timestamp), "null" among its types or its absence from "required"
// makes it nullable, and anything else (objects, arrays, several types, no
// type) is JSON. Only "properties" are columns: members allowed by
// additionalProperties or patternProperties have no column and are not
// landed.
func (s *schema) Columns() ([]format.Column, error) {
	top := resolve(s.compiled)
	if top == nil || top.Types == nil || !slices.Equal(top.Types.ToStrings(), []string{"object"}) {
		return nil, fmt.Errorf("the schema's top level is not of type object: only an object's properties can be columns")
	}
	cols := make([]format.Column, 0, len(top.Properties))
	for _, name := range slices.Sorted(maps.Keys(top.Properties)) {
		c := format.Column{Name: name, Kind: format.KindJSON, Nullable: !slices.Contains(top.Required, name)}
		p := resolve(top.Properties[name])
		var types []string
		if p != nil && p.Types != nil {
			types = p.Types.ToStrings()
		}
		if i := slices.Index(types, "null"); i >= 0 {
			c.Nullable = true
			types = slices.Delete(types, i, i+1)
		}
		if len(types) == 1 {
			c.Kind, c.Unit = propertyKind(types[0], p)
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// propertyKind is the column kind of a property of JSON type t.
func propertyKind(t string, p *santhosh.Schema) (format.ColumnKind, format.TimeUnit) {
	switch t {
	case "boolean":
		return format.KindBool, format.UnitNone
	case "integer":
		return format.KindInt64, format.UnitNone
	case "number":
		return format.KindFloat64, format.UnitNone
	case "string":
		if p.Format != nil && p.Format.Name == "date-time" {
			return format.KindTimestamp, format.UnitRFC3339
		}
		return format.KindString, format.UnitNone
	}
	return format.KindJSON, format.UnitNone
}
