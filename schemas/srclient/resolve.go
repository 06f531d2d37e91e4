package srclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"millrace/schemas/format"
)

// maxReferences bounds the schemas one schema may pull in, directly and
// transitively, as the registry bounds them: a hostile chain costs a
// bounded number of requests.
const maxReferences = 1000

// fetch is one schema ID being fetched; the others asking wait for it.
type fetch struct {
	done   chan struct{}
	schema format.Schema
	err    error
}

// SchemaByID returns the parsed schema of id, from the cache or fetched
// with its references and parsed with the Type its schemaType names. An ID
// the registry did not know is not asked again for Config.Refresh.
func (c *Client) SchemaByID(ctx context.Context, id int) (format.Schema, error) {
	c.mu.Lock()
	if s, ok := c.byID.get(id); ok {
		c.mu.Unlock()
		return s, nil
	}
	if at, ok := c.unknown[id]; ok {
		if time.Since(at) < c.cfg.Refresh {
			c.mu.Unlock()
			return nil, classed(ErrUnknownSchema, "schema ID %d: the registry did not know it %v ago", id, time.Since(at).Round(time.Second))
		}
		delete(c.unknown, id)
	}
	if f, ok := c.inFlight[id]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.schema, f.err
		case <-ctx.Done():
			return nil, classed(ErrUnavailable, "fetching schema %d: %w", id, ctx.Err())
		}
	}
	f := &fetch{done: make(chan struct{})}
	c.inFlight[id] = f
	c.mu.Unlock()

	f.schema, f.err = c.fetchID(ctx, id)
	c.mu.Lock()
	delete(c.inFlight, id)
	switch {
	case f.err == nil:
		c.byID.put(id, f.schema)
	case errors.Is(f.err, ErrUnknownSchema):
		if len(c.unknown) >= c.cfg.CacheSize {
			clear(c.unknown)
		}
		c.unknown[id] = time.Now()
	}
	c.mu.Unlock()
	close(f.done)
	return f.schema, f.err
}

func (c *Client) fetchID(ctx context.Context, id int) (format.Schema, error) {
	s, err := c.api.SchemaByID(ctx, id)
	if err != nil {
		return nil, classify(err, fmt.Sprintf("schema ID %d", id))
	}
	return c.Parse(ctx, s)
}

// Parse parses a schema as the registry returned it, fetching the schemas
// it references (by subject and version, transitively) first.
func (c *Client) Parse(ctx context.Context, s sr.Schema) (format.Schema, error) {
	t, ok := c.cfg.Types[s.Type.String()]
	if !ok {
		return nil, classed(ErrUndecodable, "the schema type %q is not one this client reads", s.Type)
	}
	refs, err := c.References(ctx, s.References)
	if err != nil {
		return nil, err
	}
	parsed, err := t.Parse(s.Schema, refs, c.cfg.Limits)
	if err != nil {
		return nil, classed(ErrUndecodable, "the registry's schema does not parse: %w", err)
	}
	return parsed, nil
}

// References returns the texts of every schema refs reaches, keyed by
// reference name, as format.Type.Parse takes them. A cycle, a name used
// for two texts, more than maxReferences schemas or more than the limit's
// bytes are refused.
func (c *Client) References(ctx context.Context, refs []sr.SchemaReference) (map[string]string, error) {
	r := refResolver{c: c, texts: map[string]string{}, done: map[sr.SubjectVersion]bool{}}
	for _, ref := range refs {
		if err := r.visit(ctx, ref, nil); err != nil {
			return nil, err
		}
	}
	return r.texts, nil
}

type refResolver struct {
	c     *Client
	texts map[string]string
	done  map[sr.SubjectVersion]bool
	bytes int
}

func (r *refResolver) visit(ctx context.Context, ref sr.SchemaReference, path []sr.SubjectVersion) error {
	at := sr.SubjectVersion{Subject: ref.Subject, Version: ref.Version}
	for _, p := range path {
		if p == at {
			return classed(ErrUndecodable, "the references form a cycle through %s version %d", at.Subject, at.Version)
		}
	}
	if r.done[at] {
		return nil
	}
	if len(r.done) >= maxReferences {
		return classed(ErrUndecodable, "the schema references more than %d schemas", maxReferences)
	}
	// A soft-deleted version still serves those that reference it.
	s, err := r.c.api.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), ref.Subject, ref.Version)
	if err != nil {
		return classify(err, fmt.Sprintf("reference %q (subject %s version %d)", ref.Name, ref.Subject, ref.Version))
	}
	if prev, ok := r.texts[ref.Name]; ok && prev != s.Schema.Schema {
		return classed(ErrUndecodable, "the reference name %q names two different schemas", ref.Name)
	}
	r.bytes += len(s.Schema.Schema)
	if r.bytes > r.c.cfg.Limits.MaxBytes {
		return classed(ErrUndecodable, "the referenced schemas exceed %d bytes", r.c.cfg.Limits.MaxBytes)
	}
	r.texts[ref.Name] = s.Schema.Schema
	for _, next := range s.References {
		if err := r.visit(ctx, next, append(path, at)); err != nil {
			return err
		}
	}
	r.done[at] = true
	return nil
}

// Subject is a subject's version as Latest resolved it.
type Subject struct {
	Subject string
	Version int
	ID      int
	Schema  format.Schema
}

// latestEntry is the cached latest version of a subject.
type latestEntry struct {
	subject  Subject
	fetched  time.Time
	fetching bool // one caller refreshes; the others use the version held
}

// Latest returns the latest version of subject, parsed, asking the
// registry at most once per Config.Refresh: a new version applies within
// that time. While a refresh fails, the version held is kept (a registry
// that is down does not stop a client that has already seen the schema);
// without one the error is returned.
func (c *Client) Latest(ctx context.Context, subject string) (Subject, error) {
	c.mu.Lock()
	e, ok := c.latest[subject]
	if ok && (e.fetching || time.Since(e.fetched) < c.cfg.Refresh) {
		c.mu.Unlock()
		return e.subject, nil
	}
	if ok {
		e.fetching = true
	}
	c.mu.Unlock()

	got, err := c.fetchLatest(ctx, subject)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if ok {
			e.fetching = false
			e.fetched = time.Now() // try again after another Refresh
			return e.subject, nil
		}
		return Subject{}, err
	}
	c.latest[subject] = &latestEntry{subject: got, fetched: time.Now()}
	return got, nil
}

func (c *Client) fetchLatest(ctx context.Context, subject string) (Subject, error) {
	s, err := c.api.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		return Subject{}, classify(err, "subject "+subject)
	}
	parsed, err := c.SchemaByID(ctx, s.ID)
	if err != nil {
		return Subject{}, err
	}
	return Subject{Subject: subject, Version: s.Version, ID: s.ID, Schema: parsed}, nil
}
