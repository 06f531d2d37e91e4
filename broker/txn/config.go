package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"millrace/internal/settings"
)

// Defaults of Config, as Kafka's.
const (
	// DefaultMaxTimeout is transaction.max.timeout.ms' default, 900000.
	DefaultMaxTimeout = 15 * time.Minute
	// DefaultIDExpiration is transactional.id.expiration.ms' default,
	// 604800000 (7 days).
	DefaultIDExpiration = 7 * 24 * time.Hour
	// DefaultAbortCheckInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms' default,
	// 10000.
	DefaultAbortCheckInterval = 10 * time.Second
	// DefaultMaxIDBytes is millrace.transactional.id.max.bytes' default,
	// 255 bytes, as millrace.group.id.max.bytes' (Kafka has no limit).
	DefaultMaxIDBytes = 255
	// DefaultMaxIDs is millrace.max.transactional.ids' default, as
	// millrace.max.groups'.
	DefaultMaxIDs = 10000
	// DefaultMaxIDsPerPrincipal is
	// millrace.max.transactional.ids.per.principal's default: a fifth of
	// DefaultMaxIDs, so one principal leaves room for others.
	DefaultMaxIDsPerPrincipal = 2000
)

// Config configures the transaction coordinator. Its settings (Settings)
// are broker settings by Kafka's names, held in the wire server's
// configuration; Owner, NewProducerID, Markers and Now are the broker's
// hooks, filled in when it opens the coordinator.
type Config struct {
	// MaxTimeout (transaction.max.timeout.ms, default 15 minutes) is the
	// longest transaction timeout a producer may ask for in InitProducerId;
	// a longer one gets INVALID_TRANSACTION_TIMEOUT. It bounds how long an
	// abandoned transaction holds back read_committed consumers.
	MaxTimeout time.Duration
	// IDExpiration (transactional.id.expiration.ms, default 7 days) is how
	// long a transactional ID with no transaction in progress is kept after
	// its last change; then its state is removed from the store and a
	// producer using the ID again gets a new producer ID.
	IDExpiration time.Duration
	// AbortCheckInterval
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms, default
	// 10 s) is how often the coordinator looks for transactions past their
	// timeout (which it aborts), transactional IDs past their expiration
	// (which it removes) and transactions whose markers a previous
	// coordinator left unsent (which it completes).
	AbortCheckInterval time.Duration
	// MaxIDs (millrace.max.transactional.ids, default 10000; Kafka has no
	// limit) bounds the transactional IDs this broker coordinates: each
	// is a node in the coordination store, replayed at start-up and read
	// at every AbortCheckInterval, for IDExpiration after its last use.
	// InitProducer for an ID more gets POLICY_VIOLATION; IDs this broker
	// already coordinates are served as before.
	MaxIDs int
	// MaxIDsPerPrincipal (millrace.max.transactional.ids.per.principal,
	// default 2000) bounds the IDs of MaxIDs one principal created, so that
	// one user cannot take them all. The same answer.
	MaxIDsPerPrincipal int
	// MaxIDBytes (millrace.transactional.id.max.bytes, default 255, as
	// millrace.group.id.max.bytes; Kafka has no limit) bounds the length
	// of a transactional ID: it names a node in the coordination store and
	// is written again in the node's content, which stay for IDExpiration.
	// The wire server checks it at the edge: InitProducerId and
	// FindCoordinator answer a longer one INVALID_REQUEST.
	MaxIDBytes int
	// PartitionVerification (transaction.partition.verification.enable,
	// default true, Kafka's) has a partition leader ask the transaction
	// coordinator, before a producer's first transactional batch on the
	// partition, whether the partition is in its ongoing transaction
	// (KIP-890), and refuse the batch with INVALID_TXN_STATE if not: a
	// late batch of a finished transaction cannot start a transaction no
	// coordinator will end. The wire server's produce path does the asking.
	PartitionVerification bool
	// Owner reports whether this broker coordinates a transactional ID, and
	// the generation of the view it decided from (which changes whenever
	// any ID may have moved, so the coordinator then looks for IDs it took
	// over). Nil: this broker coordinates every ID.
	Owner func(transactionalID string) (owned bool, generation uint64)
	// NewProducerID allocates a producer ID never used before. Required.
	NewProducerID func() (int64, error)
	// Markers writes transaction markers. Required.
	Markers MarkerWriter
	// Now returns the current time. Nil means time.Now.
	Now func() time.Time
}

// MarkerWriter writes the markers that end a transaction.
type MarkerWriter interface {
	// WriteMarkers writes m's marker on each of its partitions and completes
	// its groups' offsets, returning nil once every one is written (or its
	// partition no longer exists). An error means some were not: the
	// coordinator calls again with the same markers until they all are.
	WriteMarkers(ctx context.Context, m Markers) error
}

// Markers are the markers that end one transaction.
type Markers struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Commit          bool
	// CoordinatorEpoch is the version of the transaction's store node the
	// decision was written at: it only grows, so a partition can refuse a
	// former coordinator's late marker.
	CoordinatorEpoch int32
	// Partitions are the transaction's partitions by topic.
	Partitions map[string][]int32
	// Groups are the consumer groups whose offsets the transaction commits.
	Groups []string
}

// DefaultConfig returns a Config with the defaults filled in (Owner,
// NewProducerID and Markers left to the caller).
func DefaultConfig() Config {
	return Config{MaxTimeout: DefaultMaxTimeout, IDExpiration: DefaultIDExpiration, AbortCheckInterval: DefaultAbortCheckInterval,
		MaxIDs: DefaultMaxIDs, MaxIDsPerPrincipal: DefaultMaxIDsPerPrincipal, MaxIDBytes: DefaultMaxIDBytes, PartitionVerification: true}
}

// Validate reports settings that cannot work, with a sentence that says
// why. New also requires the hooks.
func (c Config) Validate() error {
	var errs []error
	if c.MaxIDBytes < 1 {
		errs = append(errs, fmt.Errorf("millrace.transactional.id.max.bytes %d must be at least 1", c.MaxIDBytes))
	}
	if c.MaxIDs < 1 || c.MaxIDsPerPrincipal < 1 {
		errs = append(errs, fmt.Errorf("millrace.max.transactional.ids %d and millrace.max.transactional.ids.per.principal %d must be at least 1", c.MaxIDs, c.MaxIDsPerPrincipal))
	}
	if c.MaxTimeout <= 0 {
		errs = append(errs, fmt.Errorf("transaction.max.timeout.ms %v must be positive", c.MaxTimeout))
	}
	if c.IDExpiration <= 0 {
		errs = append(errs, fmt.Errorf("transactional.id.expiration.ms %v must be positive", c.IDExpiration))
	}
	if c.AbortCheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("transaction.abort.timed.out.transaction.cleanup.interval.ms %v must be positive", c.AbortCheckInterval))
	}
	return errors.Join(errs...)
}

// Settings are the transaction coordinator's broker settings, by Kafka's
// names. None changes at runtime. The wire server serves them with its own
// (kafka.Settings), since DescribeConfigs lists them among its settings.
var Settings = settings.NewList[Config](nil,
	intMs("transaction.max.timeout.ms", "longest transaction timeout a producer may ask for", func(c *Config) *time.Duration { return &c.MaxTimeout }),
	intMs("transactional.id.expiration.ms", "a transactional ID idle this long is forgotten", func(c *Config) *time.Duration { return &c.IDExpiration }),
	intMs("transaction.abort.timed.out.transaction.cleanup.interval.ms", "how often timed-out transactions are aborted", func(c *Config) *time.Duration { return &c.AbortCheckInterval }),
	settings.Integer("millrace.transactional.id.max.bytes", settings.Int, 32, "longest transactional ID", func(c *Config) *int { return &c.MaxIDBytes }),
	settings.Integer("millrace.max.transactional.ids", settings.Int, 32, "transactional IDs a broker coordinates", func(c *Config) *int { return &c.MaxIDs }),
	settings.Integer("millrace.max.transactional.ids.per.principal", settings.Int, 32, "transactional IDs of one principal a broker coordinates", func(c *Config) *int { return &c.MaxIDsPerPrincipal }),
	settings.Bool("transaction.partition.verification.enable", "check a transaction's first batch on a partition with its coordinator (KIP-890)",
		func(error) error { return errors.New("must be true or false") }, func(c *Config) *bool { return &c.PartitionVerification }),
)

// intMs is a setting of milliseconds that Kafka declares an INT.
func intMs(name, doc string, dst func(*Config) *time.Duration) settings.Setting[Config] {
	s := settings.Duration(name, time.Millisecond, doc, func(error) error { return errors.New("must be a number of milliseconds") }, dst)
	s.Type = settings.Int
	return s
}
