// Package languages gathers the schema languages millrace serves and reads:
// the registry's server and its clients take their format.Types from here,
// so a language added is added for all of them.
package languages

import (
	"millrace/schemas/format"
	"millrace/schemas/format/avro"
	"millrace/schemas/format/jsonschema"
	"millrace/schemas/format/protobuf"
)

// All returns the languages by their schemaType: AVRO, PROTOBUF and JSON.
func All() map[string]format.Type {
	return map[string]format.Type{
		format.Avro:     avro.Type,
		format.Protobuf: protobuf.Type,
		format.JSON:     jsonschema.Type,
	}
}
