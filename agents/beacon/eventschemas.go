package beacon

import (
	"context"
	"fmt"
	"net/http"

	"millrace/agents/ship"
	"millrace/schemas/format"
	"millrace/schemas/srclient"
)

// eventSchemas checks events against the JSON Schemas Config.Schemas
// names, held in the schema registry. A nil *eventSchemas checks nothing.
type eventSchemas struct {
	client *srclient.Client
	// subjects maps an event type to its subject.
	subjects map[string]string
}

// newEventSchemas returns the checker of cfg.Schemas, nil when there are
// none. It reads the registry's password and TLS files; it sends nothing.
func newEventSchemas(cfg Config) (*eventSchemas, error) {
	if len(cfg.Schemas) == 0 {
		return nil, nil
	}
	c, err := srclient.New(cfg.SchemaRegistry)
	if err != nil {
		return nil, fmt.Errorf("beacon: %w", err)
	}
	return &eventSchemas{client: c, subjects: cfg.Schemas}, nil
}

// check validates an event of eventType, raw as the client sent it,
// against its subject's latest schema (cached; see srclient.Client.Latest).
// A mismatch is an error saying where and why, which rejects the event. A
// schema that cannot be had is a *ship.Refusal: 503, the client retries,
// as when the broker cannot take the events; a subject that holds no JSON
// Schema is a 500 until the operator fixes the map.
func (v *eventSchemas) check(ctx context.Context, eventType string, raw []byte) error {
	if v == nil {
		return nil
	}
	subject, ok := v.subjects[eventType]
	if !ok {
		return nil
	}
	s, err := v.client.Latest(ctx, subject)
	if err != nil {
		return &ship.Refusal{Status: http.StatusServiceUnavailable,
			Reason: "the schema of " + eventType + " events cannot be had from the schema registry now", Err: err}
	}
	if name := s.Schema.Type().Name(); name != format.JSON {
		return &ship.Refusal{Status: http.StatusInternalServerError,
			Reason: fmt.Sprintf("subject %s holds a %s schema; the beacon validates events with JSON Schema only", subject, name)}
	}
	if _, err := s.Schema.Decode(raw); err != nil {
		return fmt.Errorf("%s: does not match %s version %d: %w", eventType, subject, s.Version, err)
	}
	return nil
}
