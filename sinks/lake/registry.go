package lake

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas"
	"millrace/schemas/format"
	"millrace/schemas/srclient"
	"millrace/sinks/iceberg"
)

// Registry-typed topics (Config.Schema "registry"): the values are
// Confluent-framed — a zero magic byte, the big-endian 4-byte ID of a
// schema of the schema registry, then the value encoded with it (Avro,
// Protobuf with its message indexes, JSON Schema) — and the table's
// columns are the top-level fields of those schemas (format.Columnar,
// schemas.FromColumns).
//
// Which schema fixes the table: at Start, the subject's latest version
// (Config.Registry.Subject, by default Confluent's TopicNameStrategy,
// "<topic>-value"). A record whose schema has a field the table lacks
// evolves it: every open window is landed first (a cut of its own,
// "schema"), the fields are appended as optional columns (Schema.Extend;
// with Format iceberg the table's schema evolves the same way, through
// iceberg.Catalog.Table), and later files have the new columns. A record
// whose schema lacks a column of the table has a null there. A record
// whose schema gives a column another type than the table's (other than
// int32 to int64 and float32 to float64, which land alike) is a dead
// letter naming both, as are records that are not Confluent-framed, whose
// schema ID the registry does not know, whose value does not decode with
// its schema, or whose schema is not a record at the top.
//
// A registry that cannot be reached is not a property of the record: the
// worker stops (Err says why) without dead-lettering it, and its Runner
// starts it again from the committed offsets after a backoff.

// SchemaRegistry is Config.Schema's value for registry-typed topics.
const SchemaRegistry = "registry"

// SchemaSource reads Confluent-framed values with the schema registry: the
// worker's one dependency on a registry client (schemas/srclient
// implements it). Its methods are called from one goroutine at a time.
type SchemaSource interface {
	// Decode reads value: its schema ID, the schema (from the client's
	// cache, or fetched) and the value decoded with it
	// (format.Schema.Decode). An error wrapping ErrUnknownSchema or
	// ErrUndecodable is the record's fault and sends it to the dead
	// letters; any other error is the registry's (unreachable, timing out,
	// answering 5xx) and stops the worker without dead-lettering.
	Decode(value []byte) (id int, s format.Schema, v any, err error)
	// Latest returns the latest version of subject's schema, which fixes
	// the table's columns at Start. An error stops the start; one wrapping
	// ErrUnknownSchema means the subject has none yet.
	Latest(ctx context.Context, subject string) (id int, s format.Schema, err error)
}

// The errors a SchemaSource wraps when a record, not the registry, is at
// fault.
var (
	// ErrUnknownSchema: the registry has no schema of the value's ID (or
	// no version of a subject).
	ErrUnknownSchema = errors.New("unknown schema")
	// ErrUndecodable: the value does not decode with its schema.
	ErrUndecodable = errors.New("value does not decode with its schema")
)

// RegistryConfig is where the schemas of a registry-typed sink come from:
// the registry client's settings (urls, username, password or
// password_file, tls, timeout, cache_size, refresh; schemas/srclient, the
// same as the beacon's schema_registry:), and the subject.
type RegistryConfig struct {
	srclient.Config `yaml:",inline"`
	// Subject is the subject whose latest schema fixes the table's columns
	// at start. Default "<topic>-value" (TopicNameStrategy).
	Subject string `yaml:"subject"`
}

// validate checks the settings of a registry-typed sink.
func (c Config) validateRegistry() []error {
	var errs []error
	if len(c.Topics) > 1 {
		errs = append(errs, errors.New("lake: schema registry: one topic per sink (each topic's schemas make its own table); run a sink per topic"))
	}
	if len(c.Fields) > 0 {
		errs = append(errs, errors.New("lake: fields: with schema registry the registry's schemas give the columns"))
	}
	if err := c.Registry.Config.WithDefaults().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("lake: registry: %w", err))
	}
	return errs
}

// registrySchemas is a registry-typed worker's view of the registry: the
// columns of every schema ID seen, kept for the worker's life (a topic
// uses a handful of IDs, and only IDs the registry knows are kept).
type registrySchemas struct {
	source  SchemaSource
	columns map[int][]format.Column
	// fits holds, per schema ID, the worker's schema that has every
	// column of it: while the worker's schema is that one (it changes
	// only by growing), a record of the ID needs no look for new fields.
	fits map[int]*schemas.Schema
}

// subject is the subject whose latest schema fixes the columns.
func (c Config) subject() string {
	if c.Registry.Subject != "" {
		return c.Registry.Subject
	}
	return c.Topics[0] + "-value"
}

// columnsOf returns s's columns, or why it has none.
func columnsOf(id int, s format.Schema) ([]format.Column, error) {
	c, ok := s.(format.Columnar)
	if !ok {
		return nil, fmt.Errorf("schema ID %d (%s) cannot describe its columns", id, s.Type().Name())
	}
	cols, err := c.Columns()
	if err != nil {
		return nil, fmt.Errorf("schema ID %d: %w", id, err)
	}
	return cols, nil
}

// fixSchema makes the worker's schema the columns of the subject's latest
// schema. Start calls it; tests call it for a worker they feed directly.
func (w *Worker) fixSchema(ctx context.Context) error {
	id, s, err := w.registry.source.Latest(ctx, w.cfg.subject())
	if err != nil {
		return fmt.Errorf("lake: schema registry: the latest schema of subject %q: %w", w.cfg.subject(), err)
	}
	cols, err := columnsOf(id, s)
	if err != nil {
		return fmt.Errorf("lake: schema registry: subject %q: %w", w.cfg.subject(), err)
	}
	w.registry.columns[id] = cols
	schema, err := schemas.FromColumns(SchemaRegistry, w.cfg.TimestampField, cols)
	if err != nil {
		return fmt.Errorf("lake: schema registry: subject %q: %w", w.cfg.subject(), err)
	}
	if w.cfg.Format == FormatIceberg {
		if err := w.cfg.Iceberg.validateIdentity(schema); err != nil {
			return err
		}
	}
	w.setSchema(schema)
	return nil
}

// setSchema makes s the worker's schema, and gives every partition a row
// of it. The caller holds w.landing, or the worker has not started.
func (w *Worker) setSchema(s *schemas.Schema) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.schema = s
	w.timeField = -1
	if w.cfg.TimestampField != "" && w.cfg.TimestampField != s.TimeField {
		w.timeField = s.FieldIndex(w.cfg.TimestampField)
	}
	for _, p := range w.parts {
		p.row = s.NewRow()
	}
}

// decodeRegistry decodes r into p's row with its registry schema, evolving
// the table first when the schema adds columns. reason is why r is a dead
// letter ("" when it is a row); err is a failure that stops the worker.
// The caller holds w.landing.
func (w *Worker) decodeRegistry(ctx context.Context, p *partitionState, r *kgo.Record) (reason string, err error) {
	if len(r.Value) < 5 || r.Value[0] != 0 {
		return "not Confluent-framed: the value does not start with the magic byte 0 and a 4-byte schema ID", nil
	}
	id, s, v, err := w.registry.source.Decode(r.Value)
	switch {
	case errors.Is(err, ErrUnknownSchema) || errors.Is(err, ErrUndecodable):
		return err.Error(), nil
	case err != nil:
		return "", fmt.Errorf("lake: schema registry: %w; the records are landed again from the committed offset once it answers", err)
	}
	if s.Type().Name() == format.Protobuf && !firstMessage(s, r.Value[5:]) {
		// The columns are the first message's (protobuf Columns).
		return fmt.Sprintf("schema ID %d: the value is not of the schema's first message, whose fields are the columns", id), nil
	}
	cols, ok := w.registry.columns[id]
	if !ok {
		if cols, err = columnsOf(id, s); err != nil {
			return err.Error(), nil
		}
		w.registry.columns[id] = cols
	}
	value, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("schema ID %d: the value is not a record", id), nil
	}
	if w.registry.fits[id] != w.schema {
		var added []schemas.Field
		for _, c := range cols {
			i := w.schema.FieldIndex(c.Name)
			if i < 0 {
				added = append(added, schemas.ColumnField(c))
			} else if have, want := w.schema.Fields[i].Type, schemas.ColumnType(c.Kind); have != want {
				// Before any evolution: a record that cannot land adds
				// no column.
				return fmt.Sprintf("schema ID %d: field %q: the value's schema makes it %s, which lands as %s, and the table's column is %s",
					id, c.Name, c.Kind, want, have), nil
			}
		}
		if len(added) > 0 {
			if reason, err := w.evolve(ctx, id, added); reason != "" || err != nil {
				return reason, err
			}
		}
		w.registry.fits[id] = w.schema
	}
	if err := p.row.SetColumns(cols, value); err != nil {
		return fmt.Sprintf("schema ID %d: %v", id, err), nil
	}
	if w.schema.TimeField == schemas.RecordTimeField {
		if err := p.row.Set(schemas.RecordTimeField, r.Timestamp.UTC()); err != nil {
			return "", err // a required timestamp from a time.Time: cannot fail
		}
	}
	return "", nil
}

// evolve appends fields to the worker's schema for schema ID id: it lands
// every open window (their files have the old columns), evolves the
// tables with Format iceberg, and makes the new schema the one files are
// opened with. A field the schema cannot take (a name one column already
// has in another case, dt or hr) or the table cannot (a column of that
// name with another type, in a table made elsewhere) makes the record a
// dead letter with the reason. The caller holds w.landing.
func (w *Worker) evolve(ctx context.Context, id int, fields []schemas.Field) (reason string, err error) {
	next, err := w.schema.Extend(fields...)
	if err != nil {
		return fmt.Sprintf("schema ID %d: %v", id, err), nil
	}
	if err := w.runActions(ctx, w.core.landAll("schema"), nil); err != nil {
		return "", err
	}
	if err := w.settle(); err != nil { // the tables change after their last commit
		return "", err
	}
	if tc, ok := w.commit.(*tableCommitter); ok {
		if err := tc.evolve(ctx, next, w.cfg.Iceberg); errors.Is(err, iceberg.ErrIncompatibleSchema) {
			return fmt.Sprintf("schema ID %d: %v", id, err), nil
		} else if err != nil {
			return "", fmt.Errorf("lake: evolving the table for schema ID %d: %w", id, err)
		}
	}
	w.logger.Info("schema evolved", "schema_id", id, "version", next.Version, "columns", len(next.Fields))
	w.setSchema(next)
	return "", nil
}

// firstMessage reports whether value, of a Protobuf schema s, is the
// file's first message, the one whose fields are the columns; the schema
// knows how it reads the framing (schemas/format/protobuf, FirstMessage).
func firstMessage(s format.Schema, value []byte) bool {
	m, ok := s.(interface{ FirstMessage(data []byte) bool })
	return ok && m.FirstMessage(value)
}

// registryEventID reads the event id of a registry-typed record for the
// dedup rebuild, which does not land it: the id field's string, if any. A
// record the registry cannot decode now has none, like a dead letter: the
// rebuild is best effort (rebuild.go).
func (w *Worker) registryEventID(r *kgo.Record) (idKind, [16]byte) {
	if len(r.Value) < 5 || r.Value[0] != 0 {
		return idNone, [16]byte{}
	}
	_, _, v, err := w.registry.source.Decode(r.Value)
	if err != nil {
		return idNone, [16]byte{}
	}
	value, _ := v.(map[string]any)
	if id, ok := value[w.cfg.eventIDField()].(string); ok {
		return parseEventID(id)
	}
	return idNone, [16]byte{}
}
