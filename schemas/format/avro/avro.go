// Package avro is the AVRO schema language of the schema registry: the
// format.Type the registry and its clients hold for schemaType AVRO.
//
// The work is github.com/twmb/avro's (parsing with named types from other
// schemas through its SchemaCache, the binary codec, the SchemaNode tree);
// this package adds what the registry needs beyond it:
//
//   - limits checked before the library sees a text (parse.go);
//   - the order to parse references in, and errors that say where an
//     unknown type is used (refs.go);
//   - the canonical forms schemas are compared by (canonical.go);
//   - Avro schema resolution as Confluent's checker reports it, every
//     problem with its kind and path (compat.go);
//   - plain Go values out of Decode and JSON-shaped values into Encode
//     (codec.go).
//
// Use the package variable Type.
package avro

import (
	"millrace/schemas/format"

	lib "github.com/twmb/avro"
)

// Type is Avro as a format.Type. It holds no state: one value serves every
// caller.
var Type format.Type = avroType{}

type avroType struct{}

// Name returns format.Avro.
func (avroType) Name() string { return format.Avro }

// schema is one parsed Avro schema. Everything in it is built by Parse and
// only read afterwards, so its methods are safe for concurrent use.
type schema struct {
	text string
	// codec encodes and decodes; it is parsed with the logical types'
	// conversions switched off, so values stay plain (codec.go).
	codec *lib.Schema
	// tree is codec.Root(), kept because Root re-parses on each call. It
	// holds the definitions of the referenced named types too, inlined at
	// their first use.
	tree *lib.SchemaNode
	// names indexes the named types of tree by full name.
	names *names
	// refNames are the full names defined by the referenced schemas: the
	// normalized form names them instead of writing them out, as
	// Confluent's does.
	refNames map[string]bool
}

// Type returns Type.
func (s *schema) Type() format.Type { return Type }

// Text returns the schema as it was given to Parse.
func (s *schema) Text() string { return s.text }
