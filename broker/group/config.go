package group

import (
	"errors"
	"fmt"
	"time"

	"millrace/internal/settings"
)

// Config tunes the coordinator. The zero value of a field means its default;
// DefaultConfig returns the defaults spelled out.
type Config struct {
	// MinSessionTimeout is the smallest session timeout a member may ask for
	// (Kafka's group.min.session.timeout.ms). Default 6s.
	MinSessionTimeout time.Duration
	// MaxSessionTimeout is the largest session timeout a member may ask for
	// (group.max.session.timeout.ms). Default 30m.
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty group
	// waits for more members before completing, extended while members keep
	// arriving, up to the rebalance timeout (group.initial.rebalance.delay.ms).
	// Default 3s; a negative value disables the delay.
	InitialRebalanceDelay time.Duration
	// MaxMetadataBytes bounds the metadata string of a committed offset
	// (offset.metadata.max.bytes). Default 4096.
	MaxMetadataBytes int
	// MaxGroupIDBytes (millrace.group.id.max.bytes, default 255) bounds the
	// length of a group ID; a longer one gets INVALID_GROUP_ID from every
	// group API. Kafka sets no limit, but a group ID names a node in the
	// coordination store and a map key in memory; 255 bytes is the usual
	// file-name limit and far above real group IDs.
	MaxGroupIDBytes int
	// MaxGroups (millrace.max.groups, default 10000) bounds the groups the
	// coordinator holds in memory: groups with members, and groups whose
	// offsets were committed or read since the broker started. A JoinGroup
	// or OffsetCommit that would add a group beyond it gets
	// GROUP_MAX_SIZE_REACHED, which clients report instead of retrying;
	// groups known only from the store (written before a restart) count
	// once they are used. Kafka sets no limit; without one, simple commits
	// to ever-new group IDs grow the broker without bound.
	MaxGroups int
	// OffsetsRetention (offsets.retention.minutes, default 7 days) is how
	// long the committed offsets of a group without members are kept, as
	// Kafka 2.1+ does (KIP-211): a consumer group's offsets expire this
	// long after it became empty (or after their commit, if later), a
	// simple group's (one that never had members) this long after their
	// commit. A group left without offsets is deleted from the store.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval (offsets.retention.check.interval.ms,
	// default 10 minutes) is how often expired offsets are looked for.
	OffsetsRetentionCheckInterval time.Duration
	// ProducerIDExpiration (producer.id.expiration.ms, default 24 hours)
	// is how long the epoch of a transactional producer is remembered,
	// once it has no pending transactional offsets, to refuse its zombie's
	// late TxnOffsetCommit (see txn_offsets.go): as long as Kafka keeps an
	// idle producer's state.
	ProducerIDExpiration time.Duration
	// PartitionExists reports whether a topic partition exists, so that
	// OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for others. Nil accepts
	// every partition.
	PartitionExists func(topic string, partition int32) bool
	// Now returns the current time for commit timestamps. Nil means time.Now.
	Now func() time.Time
	// MirrorResync is how often the membership mirrors (ids, owners) are
	// re-applied to the store in full. Ephemeral nodes vanish when the store
	// session expires; the periodic pass puts them back without the
	// coordinator consuming the store's session events, which the broker
	// reads. Default 30s.
	MirrorResync time.Duration
	// Owner reports whether this broker coordinates a group, and the
	// generation of the view it decided from: one counter for every group,
	// which changes whenever any group may have moved. A group this broker
	// does not coordinate gets NOT_COORDINATOR, so clients look up its
	// coordinator again; a group that moved away is abandoned here soon
	// after the generation changes (members, pending joins, mirrors), and
	// cached offsets are read from the store again. Nil: this broker
	// coordinates every group (a single broker).
	Owner func(group string) (owned bool, generation uint64)
}

// Settings are the coordinator's broker settings, by Kafka's names.
var Settings = settings.NewList[Config](nil,
	settings.Ms("group.min.session.timeout.ms", "smallest session timeout a member may ask for", func(c *Config) *time.Duration { return &c.MinSessionTimeout }),
	settings.Ms("group.max.session.timeout.ms", "largest session timeout a member may ask for", func(c *Config) *time.Duration { return &c.MaxSessionTimeout }),
	settings.Ms("group.initial.rebalance.delay.ms", "the first rebalance of an empty group waits this long for more members", func(c *Config) *time.Duration { return &c.InitialRebalanceDelay }),
	settings.Duration("offsets.retention.minutes", time.Minute, "how long the offsets of a group without members are kept", func(err error) error {
		return fmt.Errorf("must be an integer number of minutes: %w", err)
	}, func(c *Config) *time.Duration { return &c.OffsetsRetention }),
	settings.Ms("offsets.retention.check.interval.ms", "how often expired offsets are looked for", func(c *Config) *time.Duration { return &c.OffsetsRetentionCheckInterval }),
	settings.Integer("offset.metadata.max.bytes", settings.Int, 0, "longest metadata string of a committed offset", func(c *Config) *int { return &c.MaxMetadataBytes }),
	settings.Integer("millrace.group.id.max.bytes", settings.Int, 0, "longest group ID", func(c *Config) *int { return &c.MaxGroupIDBytes }),
	settings.Integer("millrace.max.groups", settings.Int, 0, "groups the coordinator holds in memory", func(c *Config) *int { return &c.MaxGroups }),
)

// Defaults of Config, as Kafka's.
const (
	DefaultMinSessionTimeout     = 6 * time.Second
	DefaultMaxSessionTimeout     = 30 * time.Minute
	DefaultInitialRebalanceDelay = 3 * time.Second
	DefaultMaxMetadataBytes      = 4096
	DefaultMirrorResync          = 30 * time.Second
	DefaultMaxGroupIDBytes       = 255
	DefaultMaxGroups             = 10000
	// DefaultOffsetsRetention is offsets.retention.minutes' default, 10080.
	DefaultOffsetsRetention              = 7 * 24 * time.Hour
	DefaultOffsetsRetentionCheckInterval = 10 * time.Minute
	DefaultProducerIDExpiration          = 24 * time.Hour
)

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:     DefaultMinSessionTimeout,
		MaxSessionTimeout:     DefaultMaxSessionTimeout,
		InitialRebalanceDelay: DefaultInitialRebalanceDelay,
		MaxMetadataBytes:      DefaultMaxMetadataBytes,
		MirrorResync:          DefaultMirrorResync,
		MaxGroupIDBytes:       DefaultMaxGroupIDBytes,
		MaxGroups:             DefaultMaxGroups,
		OffsetsRetention:      DefaultOffsetsRetention,

		OffsetsRetentionCheckInterval: DefaultOffsetsRetentionCheckInterval,
		ProducerIDExpiration:          DefaultProducerIDExpiration,
	}
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if c.InitialRebalanceDelay == 0 {
		c.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if c.MirrorResync <= 0 {
		c.MirrorResync = DefaultMirrorResync
	}
	if c.MaxGroupIDBytes == 0 {
		c.MaxGroupIDBytes = DefaultMaxGroupIDBytes
	}
	if c.MaxGroups == 0 {
		c.MaxGroups = DefaultMaxGroups
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = DefaultOffsetsRetention
	}
	if c.OffsetsRetentionCheckInterval == 0 {
		c.OffsetsRetentionCheckInterval = DefaultOffsetsRetentionCheckInterval
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = DefaultProducerIDExpiration
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate rejects impossible combinations, saying why. Zero fields are
// accepted (they mean the default).
func (c Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	if d.MinSessionTimeout < 0 {
		errs = append(errs, errors.New("group: MinSessionTimeout must not be negative"))
	}
	if d.MaxSessionTimeout < d.MinSessionTimeout {
		errs = append(errs, fmt.Errorf("group: MaxSessionTimeout %v is below MinSessionTimeout %v, so no member could join", d.MaxSessionTimeout, d.MinSessionTimeout))
	}
	if d.MaxMetadataBytes < 0 {
		errs = append(errs, errors.New("group: MaxMetadataBytes must not be negative"))
	}
	if d.MaxGroupIDBytes < 1 {
		errs = append(errs, fmt.Errorf("group: millrace.group.id.max.bytes %d must be at least 1", d.MaxGroupIDBytes))
	}
	if d.MaxGroups < 1 {
		errs = append(errs, fmt.Errorf("group: millrace.max.groups %d must be at least 1", d.MaxGroups))
	}
	if d.OffsetsRetention < time.Minute {
		errs = append(errs, fmt.Errorf("group: offsets.retention.minutes %v must be at least one minute", d.OffsetsRetention))
	}
	if d.OffsetsRetentionCheckInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("group: offsets.retention.check.interval.ms %v must be positive", d.OffsetsRetentionCheckInterval))
	}
	if d.ProducerIDExpiration < time.Millisecond {
		errs = append(errs, fmt.Errorf("group: producer.id.expiration.ms %v must be positive", d.ProducerIDExpiration))
	}
	return errors.Join(errs...)
}
