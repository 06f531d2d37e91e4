// Package registry is millrace's schema registry: Confluent's Schema Registry
// REST API over a view built from the compacted `_schemas` topic. Every broker
// hosting it serves reads from its own view; writes go through one elected
// primary, which appends to the topic and answers once its view has applied
// the record. The schema languages come in as format.Types; the topic and the
// election come in as Log and Election, so this package holds the rules and
// the HTTP surface and no Kafka or coordination client.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"millrace/schemas/format"
)

// Record is one record of the `_schemas` topic: Confluent's JSON key and
// value (a nil Value is a tombstone), at its offset.
type Record struct {
	Key, Value []byte
	Offset     int64
}

// Log is the registry's record: the compacted `_schemas` topic.
type Log interface {
	// Read returns the records at offsets from `from` on, in order, waiting
	// until there is at least one or ctx is done. Offsets may have gaps
	// (compaction); but when the last offsets before End hold nothing to
	// read (a transaction marker, say), Read must return a Record with a
	// nil Key at the last of them, which the view skips: a primary waits
	// until its view has passed End-1 before it writes.
	Read(ctx context.Context, from int64) ([]Record, error)
	// End returns the offset the next appended record will have: a new
	// primary reads up to it before it allocates an ID.
	End(ctx context.Context) (int64, error)
	// Append writes records durably (replicated) and returns the offset of
	// the last. It fails with ErrFenced once another process has become the
	// writer, so a primary that lost its election cannot land a write after
	// its successor has read the log.
	Append(ctx context.Context, records []Record) (int64, error)
}

// Election says which registry takes writes.
type Election interface {
	// Primary reports whether this process is the primary now and, when it
	// is not, the URL of the one that is ("" while there is none).
	Primary() (self bool, url string)
}

// Operation is what a request does, for authorization.
type Operation int

// The operations. Reads are open to every authenticated user; the rest
// need a grant (Auth.Authorize).
const (
	OpRead   Operation = iota // GET of anything
	OpWrite                   // register a schema, import
	OpDelete                  // soft or permanent delete
	OpConfig                  // /config and /mode changes
)

// Auth authenticates and authorizes requests. A nil Auth lets everything
// through (the registry on loopback without security).
type Auth interface {
	// Authenticate returns the request's principal, or an error when its
	// credentials are missing or wrong (answered 401).
	Authenticate(r *http.Request) (principal string, err error)
	// Authorize reports whether principal may do op on subject ("" for
	// global config and mode).
	Authorize(principal string, op Operation, subject string) bool
}

// Config is the registry's behaviour.
type Config struct {
	// Limits bound one schema and its references. Default
	// format.DefaultLimits.
	Limits format.Limits
	// Types are the schema languages served, by schemaType.
	Types map[string]format.Type
	// Auth protects the API; nil means none.
	Auth Auth
	// Logger receives the registry's log lines.
	Logger *slog.Logger
	// ForwardTimeout bounds a write forwarded to the primary. Default 10s:
	// a client's own timeout (Confluent's serializers use 30s) should see
	// our 50003 rather than its own.
	ForwardTimeout time.Duration
	// WriteTimeout bounds how long the primary waits for its view to reach
	// the log's end before a write, and to apply the write after. Default
	// 10s; past it the write is answered 50002.
	WriteTimeout time.Duration
	// Client sends forwarded writes. Default an http.Client with
	// ForwardTimeout.
	Client *http.Client
}

// ErrFenced is returned by Log.Append when another writer has taken over.
var ErrFenced = errors.New("registry: another primary has taken over the _schemas topic")

// Server is one registry: its view of the log and its HTTP API.
type Server struct {
	cfg      Config
	log      Log
	election Election
	logger   *slog.Logger

	mu      sync.RWMutex // guards the following
	state   *State
	applied chan struct{} // closed and replaced whenever the view advances

	// writeMu makes the primary's writes one at a time: a write reads the
	// view (the next ID, the next version, the compatibility of the
	// latest) and appends what follows from it, so two at once could both
	// take the same ID.
	writeMu sync.Mutex
}

// New returns a registry over log, taking writes when election says so.
// Run builds and follows the view; Handler serves the API.
func New(cfg Config, log Log, election Election) *Server {
	if cfg.Limits == (format.Limits{}) {
		cfg.Limits = format.DefaultLimits
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.ForwardTimeout}
	}
	s := &Server{
		cfg:      cfg,
		log:      log,
		election: election,
		logger:   cfg.Logger.With("component", "schema-registry"),
		applied:  make(chan struct{}),
	}
	s.state = NewState(s.parse, cfg.Limits, s.logger)
	return s
}

// parse parses a schema with the Type its schemaType names.
func (s *Server) parse(schemaType, text string, refs map[string]string) (format.Schema, error) {
	t, ok := s.cfg.Types[schemaType]
	if !ok {
		return nil, fmt.Errorf("schema type %q is not served by this registry", schemaType)
	}
	return t.Parse(text, refs, s.cfg.Limits)
}

// readRetry is the pause after a failed Log.Read before the next.
const readRetry = time.Second

// Run applies the log to the view until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	for {
		s.mu.RLock()
		from := s.state.Next()
		s.mu.RUnlock()
		records, err := s.log.Read(ctx, from)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.logger.Warn("reading _schemas failed; retrying", "offset", from, "err", err)
			select {
			case <-time.After(readRetry):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		if len(records) == 0 {
			continue
		}
		s.mu.Lock()
		for _, r := range records {
			s.state.Apply(r)
		}
		close(s.applied)
		s.applied = make(chan struct{})
		s.mu.Unlock()
	}
}

// CatchUp returns once the view has applied every record the log held
// when it was called. A host serves the API after it, so a registry that
// has just started does not answer from a view that is still filling.
func (s *Server) CatchUp(ctx context.Context) error {
	end, err := s.log.End(ctx)
	if err != nil {
		return err
	}
	return s.WaitFor(ctx, end-1)
}

// WaitFor returns once the view has applied the record at offset (at once
// for a negative offset), or ctx's error.
func (s *Server) WaitFor(ctx context.Context, offset int64) error {
	for {
		s.mu.RLock()
		next, applied := s.state.Next(), s.applied
		s.mu.RUnlock()
		if next > offset {
			return nil
		}
		select {
		case <-applied:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
