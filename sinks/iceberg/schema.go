package iceberg

import (
	"fmt"

	"github.com/apache/iceberg-go"

	"millrace/schemas"
)

// Schema maps a sink schema to an Iceberg schema with stable field IDs.
//
// IDs are assigned depth first in column order: a field takes the next ID,
// then a map field's key and value take the two after it. This is the order
// iceberg-go (and Java's AssignFreshIds) renumbers a new table's schema in, so
// the table keeps exactly these IDs. Because a later version of a sink schema
// only appends fields (schemas.CheckEvolution), the same fields always get the
// same IDs, and an appended field gets the table's next ID, which is what
// Iceberg's UpdateSchema gives an added column. These are the IDs a new
// table gets; once it exists its IDs are its own: Evolve pairs the sink's
// fields with the table's columns by name.
func Schema(s *schemas.Schema) (*iceberg.Schema, error) {
	next := 0
	id := func() int { next++; return next }
	fields := make([]iceberg.NestedField, 0, len(s.Fields))
	for _, f := range s.Fields {
		field := iceberg.NestedField{ID: id(), Name: f.Name, Required: f.Required, Doc: f.Doc}
		switch f.Type {
		case schemas.TypeString, schemas.TypeJSON:
			field.Type = iceberg.PrimitiveTypes.String
		case schemas.TypeInt64:
			field.Type = iceberg.PrimitiveTypes.Int64
		case schemas.TypeFloat64:
			field.Type = iceberg.PrimitiveTypes.Float64
		case schemas.TypeBool:
			field.Type = iceberg.PrimitiveTypes.Bool
		case schemas.TypeTimestamp:
			// timestamp[us, UTC] in the sink's Parquet is Iceberg's timestamptz.
			field.Type = iceberg.PrimitiveTypes.TimestampTz
		case schemas.TypeStringMap:
			// Values are never null (see schemas.Field.ArrowType).
			field.Type = &iceberg.MapType{
				KeyID: id(), KeyType: iceberg.PrimitiveTypes.String,
				ValueID: id(), ValueType: iceberg.PrimitiveTypes.String, ValueRequired: true,
			}
		default:
			return nil, fmt.Errorf("iceberg: schema %s: field %q has type %v, which has no Iceberg type", s.Name, f.Name, f.Type)
		}
		fields = append(fields, field)
	}
	return iceberg.NewSchema(0, fields...), nil
}
