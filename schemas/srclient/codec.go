package srclient

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/sr"

	"millrace/schemas/format"
)

// header is Confluent's framing: magic byte 0, the schema ID as 4 bytes big
// endian, then the encoded value (for Protobuf beginning with the message
// indexes, which the protobuf format reads and writes itself).
var header sr.ConfluentHeader

// Framed reports whether value begins as a Confluent-framed value does; a
// plain text or JSON value never begins with a zero byte.
func Framed(value []byte) bool {
	_, _, err := header.DecodeID(value)
	return err == nil
}

// Decode reads a Confluent-framed value: its schema ID, the schema (from
// the cache or the registry) and the value decoded into plain Go values
// (see format.Schema.Decode). Errors are classed (see Error): ErrNotFramed,
// ErrUnknownSchema and ErrUndecodable are the record's fault,
// ErrUnavailable the registry's.
func (c *Client) Decode(ctx context.Context, value []byte) (id int, schema format.Schema, decoded any, err error) {
	id, payload, err := header.DecodeID(value)
	if err != nil {
		return 0, nil, nil, &Error{Class: ErrNotFramed, Err: ErrNotFramed}
	}
	schema, err = c.SchemaByID(ctx, id)
	if err != nil {
		return id, nil, nil, err
	}
	decoded, err = schema.Decode(payload)
	if err != nil {
		return id, schema, nil, classed(ErrUndecodable, "the value does not decode with schema %d: %w", id, err)
	}
	return id, schema, decoded, nil
}

// Encode encodes value (shaped as encoding/json decodes JSON) with the
// latest version of subject (see Latest for how long it is cached) and
// frames it with the schema's ID.
func (c *Client) Encode(ctx context.Context, subject string, value any) ([]byte, error) {
	s, err := c.Latest(ctx, subject)
	if err != nil {
		return nil, err
	}
	return EncodeWith(s.ID, s.Schema, value)
}

// EncodeWith encodes value with schema and frames it with id.
func EncodeWith(id int, schema format.Schema, value any) ([]byte, error) {
	return sr.Encode(value, &header, id, nil, schema.Encode)
}

// Registration is a schema to register.
type Registration struct {
	// Text is the schema.
	Text string
	// Type is format.Avro, format.Protobuf or format.JSON; "" is Avro.
	Type string
	// References are the schemas it references, by name, subject and
	// version.
	References []sr.SchemaReference
	// Normalize asks the registry to compare and store the normalized form.
	Normalize bool
}

// Register registers r under subject (or finds it already there) and
// returns the subject version with the schema parsed here, so a value can
// be encoded with it at once. The schema is parsed before it is sent: a
// text this client cannot use is not registered.
func (c *Client) Register(ctx context.Context, subject string, r Registration) (Subject, error) {
	var t sr.SchemaType
	if err := t.UnmarshalText([]byte(r.Type)); err != nil {
		return Subject{}, errors.New("the schema type must be AVRO, PROTOBUF or JSON")
	}
	s := sr.Schema{Schema: r.Text, Type: t, References: r.References}
	parsed, err := c.Parse(ctx, s)
	if err != nil {
		return Subject{}, err
	}
	if r.Normalize {
		ctx = sr.WithParams(ctx, sr.Normalize)
	}
	id, err := c.api.RegisterSchema(ctx, subject, s, -1, -1)
	if err != nil {
		return Subject{}, classify(err, "registering under "+subject)
	}
	found, err := c.api.LookupSchema(ctx, subject, s)
	if err != nil {
		return Subject{}, classify(err, "looking up the registered schema under "+subject)
	}
	c.mu.Lock()
	c.byID.put(id, parsed)
	c.mu.Unlock()
	return Subject{Subject: subject, Version: found.Version, ID: id, Schema: parsed}, nil
}
