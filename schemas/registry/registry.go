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
	"log/slog"
	"net/http"

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
	// until there is at least one or ctx is done.
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
}

// ErrFenced is returned by Log.Append when another writer has taken over.
var ErrFenced = errors.New("registry: another primary has taken over the _schemas topic")

// Server is one registry: its view of the log and its HTTP API.
type Server struct {
	cfg      Config
	log      Log
	election Election
}

// New returns a registry over log, taking writes when election says so.
// Run builds and follows the view; Handler serves the API.
func New(cfg Config, log Log, election Election) *Server {
	return &Server{cfg: cfg, log: log, election: election}
}

// Run applies the log to the view until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Handler is the REST API.
func (s *Server) Handler() http.Handler {
	return http.NotFoundHandler()
}
