package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas/srclient"
)

// valueEncoder resolves subject's latest schema once, so every line of a
// run is encoded with the same version, and returns what encodes a line's
// JSON with it, framed as Confluent's serializers frame values (kcat's -s
// value=avro does the same).
func valueEncoder(ctx context.Context, registry *registryFlags, subject string) (func(line int, value []byte) ([]byte, error), error) {
	c, err := registry.client()
	if err != nil {
		return nil, err
	}
	s, err := c.Latest(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("--value-schema %s: %w", subject, err)
	}
	return func(line int, value []byte) ([]byte, error) {
		dec := json.NewDecoder(bytes.NewReader(value))
		dec.UseNumber() // 64-bit integers stay exact
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d is not JSON: %v", line, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("line %d holds more than one JSON value", line)
		}
		framed, err := srclient.EncodeWith(s.ID, s.Schema, v)
		if err != nil {
			return nil, fmt.Errorf("line %d does not fit %s version %d: %w", line, subject, s.Version, err)
		}
		return framed, nil
	}, nil
}

// valueDecoder turns framed values into JSON for consume --decode, as
// kcat -s value=avro -r URL prints them. A value that is not framed is
// printed as it is, with a note on stderr the first time; one whose schema
// the registry does not have, or that does not decode, too. A registry
// that cannot be reached stops the command.
type valueDecoder struct {
	client *srclient.Client
	stderr io.Writer
	// plain counts the values printed as they are, for the last note.
	plain int
}

func newValueDecoder(registry *registryFlags, stderr io.Writer) (*valueDecoder, error) {
	c, err := registry.client()
	if err != nil {
		return nil, err
	}
	return &valueDecoder{client: c, stderr: stderr}, nil
}

// decode returns r with its value as JSON when it decodes.
func (d *valueDecoder) decode(ctx context.Context, r *kgo.Record) (*kgo.Record, error) {
	_, _, value, err := d.client.Decode(ctx, r.Value)
	if err == nil {
		var b []byte
		if b, err = json.Marshal(value); err == nil {
			out := *r
			out.Value = b
			return &out, nil
		}
	}
	if errors.Is(err, srclient.ErrUnavailable) {
		return nil, err
	}
	d.plain++
	if d.plain == 1 {
		fmt.Fprintf(d.stderr, "note: %s/%d offset %d printed as it is: %v\n", r.Topic, r.Partition, r.Offset, err)
	}
	return r, nil
}

// finish notes how many values were printed as they are, past the first.
func (d *valueDecoder) finish() {
	if d.plain > 1 {
		fmt.Fprintf(d.stderr, "note: %d values were printed as they are (not framed, or not decodable)\n", d.plain)
	}
}
