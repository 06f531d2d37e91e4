// Package format is what the schema registry and its clients need from one
// schema language (Avro, Protobuf, JSON Schema): parsing a schema text with
// the schemas it references, its canonical form for identity, the
// reader/writer compatibility check that Confluent's compatibility levels are
// built from, and the value codec the sink, `millrace produce --value-schema`
// and `millrace consume --decode` use. The registry server and the clients
// hold a Type per schemaType and never a language's internals.
package format

import (
	"errors"
	"fmt"
)

// Names of the schema types, as the registry's `schemaType` field spells
// them. A registration without schemaType is AVRO, as in Confluent's.
const (
	Avro     = "AVRO"
	Protobuf = "PROTOBUF"
	JSON     = "JSON"
)

// Limits bound what parsing one schema may cost, so a hostile schema is
// refused with a reason instead of exhausting the process: the registry
// answers 422 (42201) with the error.
type Limits struct {
	// MaxBytes bounds the schema text and, separately, the sum of the
	// referenced texts.
	MaxBytes int
	// MaxDepth bounds nesting: records in records, messages in messages,
	// subschemas in subschemas, arrays of arrays.
	MaxDepth int
}

// DefaultLimits are the registry's: Confluent accepts schemas of a few
// megabytes in practice; nothing real nests 64 deep.
var DefaultLimits = Limits{MaxBytes: 1 << 20, MaxDepth: 64}

// WithDefaults returns l with each zero or negative field at DefaultLimits'
// value.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	return l
}

// CheckSizes refuses a schema text over MaxBytes, and referenced texts
// over MaxBytes together, with an error wrapping ErrLimit: the first check
// of every language's Parse, before anything reads the texts.
func (l Limits) CheckSizes(text string, refs map[string]string) error {
	if len(text) > l.MaxBytes {
		return fmt.Errorf("the schema is %d bytes, more than the limit of %d: %w", len(text), l.MaxBytes, ErrLimit)
	}
	total := 0
	for _, ref := range refs {
		total += len(ref)
	}
	if total > l.MaxBytes {
		return fmt.Errorf("the referenced schemas are %d bytes together, more than the limit of %d: %w", total, l.MaxBytes, ErrLimit)
	}
	return nil
}

// Type is one schema language.
type Type interface {
	// Name is the registry's schemaType: Avro, Protobuf or JSON.
	Name() string
	// Parse checks a schema text and returns it parsed. refs holds the texts
	// of every schema it references, directly or transitively, keyed by
	// reference name (an Avro full name, a Protobuf import path, a JSON
	// Schema $ref URL); the registry resolves subjects and versions to texts
	// and refuses cycles before calling Parse. The error says what is wrong
	// in a sentence a user can act on.
	Parse(text string, refs map[string]string, limits Limits) (Schema, error)
}

// Schema is one parsed schema. Its methods are safe for concurrent use.
type Schema interface {
	// Type is the Type that parsed it.
	Type() Type
	// Text is the schema as registered.
	Text() string
	// Canonical is the form two registrations are compared by: equal
	// Canonical means the same schema, which gets the same ID under any
	// subject. normalize is Confluent's `normalize=true`: also ignore what
	// does not change the meaning (order of JSON keys, Protobuf options
	// order, and so on, as Confluent's normalize does for the language).
	Canonical(normalize bool) string
	// ReadsFrom checks that a reader using this schema can read every value
	// written with writer (of the same Type), by the language's resolution
	// rules as Confluent's checker applies them. It returns one Incompat per
	// problem, none when compatible. BACKWARD checks new.ReadsFrom(old),
	// FORWARD old.ReadsFrom(new), FULL both.
	ReadsFrom(writer Schema) []Incompat
	// Decode turns one encoded value (a record's value after Confluent's
	// magic byte and schema ID; for Protobuf starting with the message
	// indexes) into plain Go values: map[string]any for records, messages
	// and objects (keys are field names), []any, string, []byte, bool,
	// int32, int64, float32, float64 and nil; Avro unions as the branch's
	// value. Malformed input is an error, never a panic or an allocation
	// beyond the input's size times a small factor.
	Decode(data []byte) (any, error)
	// Encode is Decode's inverse for values shaped as encoding/json decodes
	// JSON text (map[string]any, []any, float64 or json.Number, string,
	// bool, nil), so `millrace produce --value-schema` can take JSON lines;
	// for Protobuf it writes the message indexes of the first message.
	Encode(value any) ([]byte, error)
}

// Incompat is one reason two schemas are not compatible, shaped as
// Confluent's verbose compatibility messages.
type Incompat struct {
	// Kind is Confluent's error type for it, e.g.
	// READER_FIELD_MISSING_DEFAULT_VALUE, TYPE_MISMATCH (Avro),
	// FIELD_KIND_CHANGED, MESSAGE_REMOVED (Protobuf),
	// PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL (JSON Schema).
	Kind string
	// Path locates it in the schema, e.g. /fields/1 or #/properties/x.
	Path string
	// Message is a sentence saying what changed.
	Message string
}

// String is Confluent's verbose form.
func (i Incompat) String() string {
	return "{errorType:'" + i.Kind + "', description:'" + i.Message + "', path:'" + i.Path + "'}"
}

// ErrLimit is wrapped by Parse errors that are a Limits refusal.
var ErrLimit = errors.New("schema exceeds a limit")
