package avro

import (
	"fmt"

	"millrace/schemas/format"

	lib "github.com/twmb/avro"
)

// Columns describes a record schema's fields as columns (format.Columnar):
// boolean, int, long, float, double, string, bytes and fixed as their
// kinds, an enum as a string, a long with logicalType timestamp-millis or
// timestamp-micros as a timestamp (the spec's instants; the local-
// timestamp types name no instant and stay longs), a union of null and
// one type as that type, nullable, and records, arrays, maps and other
// unions as JSON.
func (s *schema) Columns() ([]format.Column, error) {
	top, ns, ok := s.names.resolve(s.tree, "")
	if !ok || kind(top.Type) != "record" {
		return nil, fmt.Errorf("avro: the schema is a %s, not a record: only a record's fields can be columns", s.tree.Type)
	}
	cols := make([]format.Column, 0, len(top.Fields))
	for i := range top.Fields {
		f := &top.Fields[i]
		c := format.Column{Name: f.Name}
		n := &f.Type
		if n.Type == "union" {
			var others []*lib.SchemaNode
			for j := range n.Branches {
				if n.Branches[j].Type == "null" {
					c.Nullable = true
				} else {
					others = append(others, &n.Branches[j])
				}
			}
			if len(others) != 1 {
				// Several types, or null alone: nothing narrower holds it.
				c.Kind = format.KindJSON
				cols = append(cols, c)
				continue
			}
			n = others[0]
		}
		c.Kind, c.Unit = s.kindOf(n, ns)
		if c.Kind == format.KindJSON && n.Type == "null" {
			c.Nullable = true
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// kindOf is the column kind of a field of type n, read in namespace ns.
func (s *schema) kindOf(n *lib.SchemaNode, ns string) (format.ColumnKind, format.TimeUnit) {
	def, _, ok := s.names.resolve(n, ns)
	if !ok {
		return format.KindJSON, format.UnitNone
	}
	switch kind(def.Type) {
	case "boolean":
		return format.KindBool, format.UnitNone
	case "int":
		return format.KindInt32, format.UnitNone
	case "long":
		switch def.LogicalType {
		case "timestamp-millis":
			return format.KindTimestamp, format.UnitMillis
		case "timestamp-micros":
			return format.KindTimestamp, format.UnitMicros
		}
		return format.KindInt64, format.UnitNone
	case "float":
		return format.KindFloat32, format.UnitNone
	case "double":
		return format.KindFloat64, format.UnitNone
	case "string", "enum":
		return format.KindString, format.UnitNone
	case "bytes", "fixed":
		return format.KindBytes, format.UnitNone
	}
	return format.KindJSON, format.UnitNone
}
