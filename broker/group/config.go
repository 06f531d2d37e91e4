package group

import (
	"errors"
	"fmt"
	"time"
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

// Defaults of Config, as Kafka's.
const (
	DefaultMinSessionTimeout     = 6 * time.Second
	DefaultMaxSessionTimeout     = 30 * time.Minute
	DefaultInitialRebalanceDelay = 3 * time.Second
	DefaultMaxMetadataBytes      = 4096
	DefaultMirrorResync          = 30 * time.Second
)

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:     DefaultMinSessionTimeout,
		MaxSessionTimeout:     DefaultMaxSessionTimeout,
		InitialRebalanceDelay: DefaultInitialRebalanceDelay,
		MaxMetadataBytes:      DefaultMaxMetadataBytes,
		MirrorResync:          DefaultMirrorResync,
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
	return errors.Join(errs...)
}
