// Package kafkalog is the schema registry's Log (registry.Log) on the
// compacted `_schemas` topic, through franz-go: one partition, read with a
// read_committed consumer, written by one transactional producer whose
// transactional ID every registry shares.
//
// Why one transactional ID makes a write racing a failover either fail
// cleanly or land once (KIP-98): a registry becomes the writer by calling
// Claim, which runs InitProducerId for the shared ID. The coordinator then
// bumps the ID's epoch and, before it answers, finishes the previous epoch's
// transaction: a commit already decided is completed (its records become
// visible), anything else is aborted (its records never become visible to a
// read_committed reader). From then on every request of the old epoch
// (AddPartitionsToTxn, Produce, EndTxn) is refused with PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH, which Append reports as registry.ErrFenced. So the
// old primary's write is either committed before the new primary's Claim
// returns, and then it is below the End the new primary reads to before it
// allocates an ID, or it is never visible at all; the old primary's own
// retries are deduplicated by the idempotent producer inside the
// transaction, so a committed write is there once.
//
// Transaction markers take offsets too. Read hands each commit or abort
// marker to the registry as a record with Confluent's NOOP key
// ({"keytype":"NOOP","magic":0}, which Confluent's own registry writes to
// find the end of the topic and every reader of `_schemas` ignores), so
// the offsets Read returns reach End (the last stable offset) even when the
// topic ends with a marker, and a reader that stops once it has passed End
// always gets there.
package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas/registry"
)

// Defaults of Config.
const (
	// DefaultTopic is Confluent's kafkastore.topic default.
	DefaultTopic = "_schemas"
	// DefaultTransactionalID is the ID every millrace registry writes
	// under, so that each new primary fences the one before.
	DefaultTransactionalID = "millrace-schema-registry"
	// DefaultTransactionTimeout bounds how long an open transaction of a
	// primary that hung or died holds the last stable offset, and so every
	// registry's view, back before the coordinator aborts it.
	DefaultTransactionTimeout = 10 * time.Second
)

// NoopKey is Confluent's key of a record that carries nothing; Read
// returns one for each transaction marker.
var NoopKey = []byte(`{"keytype":"NOOP","magic":0}`)

// Config is where the log lives and how it is reached.
type Config struct {
	// Opts reach the brokers: kgo.SeedBrokers and the TLS and SASL
	// options (internal/clientauth). Required.
	Opts []kgo.Opt
	// Topic is the topic's name. Default DefaultTopic.
	Topic string
	// TransactionalID is the writers' shared transactional ID. Default
	// DefaultTransactionalID.
	TransactionalID string
	// TransactionTimeout is the producer's transaction.timeout.ms.
	// Default DefaultTransactionTimeout.
	TransactionTimeout time.Duration
	// OnFenced, when set, is called (on the appending goroutine) when an
	// Append found this process fenced: the election should step down.
	OnFenced func()
	// Logger receives the log's lines. Default: discarded.
	Logger *slog.Logger
}

// Log is the `_schemas` topic; its methods are safe for concurrent use.
type Log struct {
	cfg    Config
	logger *slog.Logger
	admin  *kgo.Client // topic creation and the last stable offset
	// closing is cancelled by Close, so that a Read waiting for records
	// returns and lets Close take the reader.
	closing     context.Context
	stopReading context.CancelFunc

	ensureMu sync.Mutex // guards the following
	ensured  bool

	readMu sync.Mutex // guards the following (Read runs on one goroutine)
	reader *kgo.Client
	next   int64 // the offset reader fetches next
	buffer []*kgo.Record

	writeMu  sync.Mutex  // guards the following; one transaction at a time
	producer *kgo.Client // nil unless claimed and not fenced since
	closed   bool
}

var _ registry.Log = (*Log)(nil)

// New returns the log; nothing is dialled until it is used, so the broker
// that hosts the registry may build it before it serves.
func New(cfg Config) (*Log, error) {
	if len(cfg.Opts) == 0 {
		return nil, errors.New("kafkalog: no client options: the seed brokers are required")
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.TransactionalID == "" {
		cfg.TransactionalID = DefaultTransactionalID
	}
	if cfg.TransactionTimeout <= 0 {
		cfg.TransactionTimeout = DefaultTransactionTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	admin, err := kgo.NewClient(cfg.Opts...)
	if err != nil {
		return nil, fmt.Errorf("kafkalog: %w", err)
	}
	closing, stop := context.WithCancel(context.Background())
	return &Log{cfg: cfg, logger: logger.With("component", "schema-registry-log", "topic", cfg.Topic), admin: admin,
		closing: closing, stopReading: stop, next: -1}, nil
}

// Close closes every client; later calls fail.
func (l *Log) Close() error {
	l.stopReading()
	l.writeMu.Lock()
	l.closed = true
	if l.producer != nil {
		l.producer.Close()
		l.producer = nil
	}
	l.writeMu.Unlock()
	l.readMu.Lock()
	if l.reader != nil {
		l.reader.Close()
		l.reader = nil
	}
	l.readMu.Unlock()
	l.admin.Close()
	return nil
}
