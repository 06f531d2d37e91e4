package log

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"millrace/internal/settings"
)

// Timestamp types for Config.MessageTimestampType.
const (
	CreateTime    = "CreateTime"    // keep the producer's timestamps
	LogAppendTime = "LogAppendTime" // stamp each batch with the broker's append time
)

// never is the Duration that stands for Kafka's Long.MAX_VALUE milliseconds.
const never = time.Duration(math.MaxInt64)

// Config is the per-topic log configuration, named after Kafka's topic configs.
type Config struct {
	// SegmentBytes (segment.bytes, default 1 GiB): roll to a new segment
	// before an append that would make the active one larger than this.
	SegmentBytes int64
	// SegmentAge (segment.ms, default 7 days): roll when the active segment's
	// first append is older than this.
	SegmentAge time.Duration
	// SegmentIndexBytes (segment.index.bytes, default 10 MiB): roll when the
	// offset or time index of the active segment would grow beyond this.
	SegmentIndexBytes int
	// IndexIntervalBytes (index.interval.bytes, default 4096): bytes of log
	// between two offset index entries.
	IndexIntervalBytes int
	// FlushMessages (flush.messages, default MaxInt64): fsync after this many
	// records since the last flush.
	FlushMessages int64
	// FlushInterval (flush.ms, default never): fsync once the oldest append
	// not yet fsynced is this old; a timer per log fires at that moment
	// (flush.go), so it does not wait for the retention check.
	FlushInterval time.Duration
	// FlushOnAck (millrace.flush.on.ack, default false; Kafka has no such
	// setting): a produce is acknowledged only once its records are fsynced
	// on the leader (and, with replication, on every ISR member before it
	// counts), and consumers see only fsynced records. Concurrent produces
	// share one fsync (group commit, flush.go). Off, an ack means "in the
	// page cache of every ISR member", as in Kafka.
	FlushOnAck bool
	// Retention (retention.ms, default 7 days; <0 unlimited): delete a
	// segment whose largest timestamp is older than this.
	Retention time.Duration
	// RetentionBytes (retention.bytes, default -1 = unlimited): delete the
	// oldest segments while the log is larger than this.
	RetentionBytes int64
	// MaxMessageBytes (max.message.bytes, default 1048588): largest batch accepted.
	MaxMessageBytes int
	// FileDeleteDelay (file.delete.delay.ms, default 60 s): how long a deleted
	// segment's files stay (renamed *.deleted) before they are removed; files
	// still read by a Slice are removed only after it is closed.
	FileDeleteDelay time.Duration
	// MessageTimestampType (message.timestamp.type, default CreateTime):
	// CreateTime or LogAppendTime.
	MessageTimestampType string
	// MessageTimestampBeforeMax (message.timestamp.before.max.ms, default
	// never, as in Kafka): on a CreateTime topic, a produced record whose
	// timestamp is more than this before the broker's clock is refused with
	// INVALID_TIMESTAMP. Must not be negative.
	MessageTimestampBeforeMax time.Duration
	// MessageTimestampAfterMax (message.timestamp.after.max.ms, default 1 h,
	// as in Kafka 4): on a CreateTime topic, a produced record whose
	// timestamp is more than this after the broker's clock is refused with
	// INVALID_TIMESTAMP. It also bounds how far in the future a segment's
	// largest timestamp can be before retention stops trusting it
	// (retention.go). Must not be negative.
	MessageTimestampAfterMax time.Duration
	// MaxDecompressedBytes (millrace.max.decompressed.bytes, default 64 MiB;
	// Kafka has no such setting): a produced compressed batch is decompressed
	// to check its records, and one that would decompress to more than this
	// is refused with MESSAGE_TOO_LARGE before it is expanded further, so a
	// decompression bomb costs at most this much decoding work. Memory does
	// not grow with it except for snappy, which decodes a whole batch at once.
	// Must be at least max.message.bytes, so every batch that fits
	// uncompressed also fits decompressed.
	MaxDecompressedBytes int64
	// CleanupPolicy (cleanup.policy, default "delete"): "delete" removes
	// whole old segments by retention.ms and retention.bytes; "compact"
	// keeps only the last record of each key (cleaner.go) and deletes
	// nothing by age or size; "compact,delete" does both.
	CleanupPolicy string
	// MinCleanableDirtyRatio (min.cleanable.dirty.ratio, default 0.5): a
	// compacted log is cleaned once the bytes not yet cleaned make up at
	// least this share of its closed segments. Between 0 and 1.
	MinCleanableDirtyRatio float64
	// MinCompactionLag (min.compaction.lag.ms, default 0): a record stays
	// uncompacted at least this long after its timestamp; the cleaner stops
	// at the first closed segment holding a younger record.
	MinCompactionLag time.Duration
	// MaxCompactionLag (max.compaction.lag.ms, default never): a log whose
	// oldest uncleaned record is older than this is cleaned whatever its
	// dirty ratio, and its active segment rolls at this age if segment.ms
	// is longer. At least min.compaction.lag.ms.
	MaxCompactionLag time.Duration
	// DeleteRetention (delete.retention.ms, default 1 day): a tombstone (a
	// record with a key and a null value) of a compacted log is removed
	// this long after its timestamp, so a consumer reading the log within
	// that time sees the key's deletion. Must not be negative.
	DeleteRetention time.Duration
	// CompressionType (compression.type, default "producer"): the codec
	// produced batches are stored with. "producer" keeps each batch as its
	// producer compressed it; uncompressed, gzip, snappy, lz4 or zstd make
	// the leader recompress every produced batch of another codec before
	// appending it (recompress.go), as Kafka's LogValidator does.
	CompressionType string
	// MessageFormatVersion (message.format.version, default "3.0-IV1"):
	// accepted and ignored, as Kafka 3.x does once the inter-broker
	// protocol is 3.0 or later (every millrace cluster): batches are
	// always stored in the v2 format. Deprecated in Kafka 3.0, removed in
	// 4.0; kept so that tools which still set it are not refused.
	MessageFormatVersion string
	// CompactedMaxKeyBytes (millrace.compacted.max.key.bytes, default 64
	// KiB; Kafka has no such setting): on a compacted topic a produced
	// record whose key is longer is refused with INVALID_RECORD, as a
	// record without a key is. The cleaner keeps a digest of each key, not
	// the key, so its memory does not depend on this; what does is the
	// time it spends reading and hashing keys, and every consumer that
	// rebuilds state from the topic. At least 1.
	CompactedMaxKeyBytes int64
	// LeaderReplicationThrottledReplicas
	// (leader.replication.throttled.replicas, default none) and
	// FollowerReplicationThrottledReplicas
	// (follower.replication.throttled.replicas) list the replicas whose
	// replication is held to the broker's leader.replication.throttled.rate
	// and follower.replication.throttled.rate, as Kafka writes them:
	// "partition:broker,..." or "*" for every replica. A reassignment sets
	// them on the partitions it moves, so that catching up new replicas
	// cannot take the bandwidth of clients. The leader holds its side
	// (broker/kafka/replication_throttle.go), the follower's replica
	// fetchers theirs (broker/interbroker/throttle.go).
	LeaderReplicationThrottledReplicas   string
	FollowerReplicationThrottledReplicas string
	// RemoteStorageEnable (remote.storage.enable, default false): the
	// topic's closed segments are copied to remote storage (tiered
	// storage, KIP-405, package broker/tier), and local retention deletes
	// a segment only once it is stored remotely (SetRemoteEnd) and beyond
	// local.retention.ms or local.retention.bytes; retention.ms and
	// retention.bytes then bound the remote copy. Not for compacted topics.
	RemoteStorageEnable bool
	// LocalRetention (local.retention.ms, default -2 = retention.ms; -1
	// unlimited): on a tiered topic, how long a segment stays on local
	// disk after it is stored remotely. At most retention.ms.
	LocalRetention time.Duration
	// LocalRetentionBytes (local.retention.bytes, default -2 =
	// retention.bytes; -1 unlimited): on a tiered topic, how large the
	// local part of the partition may grow. At most retention.bytes.
	LocalRetentionBytes int64
}

// CheckThrottledReplicas accepts a *.replication.throttled.replicas value:
// empty, "*", or "partition:broker" pairs separated by commas.
func CheckThrottledReplicas(v string) error {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return nil
	}
	for item := range strings.SplitSeq(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return fmt.Errorf("%q is not partition:broker (or use * for every replica)", item)
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32); err != nil {
			return fmt.Errorf("%q: the partition is not a number", item)
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32); err != nil {
			return fmt.Errorf("%q: the broker is not a number", item)
		}
	}
	return nil
}

// ThrottledReplica reports whether list, a *.replication.throttled.replicas
// value, names the replica of partition on broker.
func ThrottledReplica(list string, partition, broker int32) bool {
	list = strings.TrimSpace(list)
	if list == "*" {
		return true
	}
	for item := range strings.SplitSeq(list, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			continue
		}
		pn, perr := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bn, berr := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if perr == nil && berr == nil && int32(pn) == partition && int32(bn) == broker {
			return true
		}
	}
	return false
}

// Cleanup policies (cleanup.policy's list items).
const (
	PolicyDelete  = "delete"
	PolicyCompact = "compact"
)

// Compacts reports whether cleanup.policy includes compact.
func (c Config) Compacts() bool { return policyHas(c.CleanupPolicy, PolicyCompact) }

// Deletes reports whether cleanup.policy includes delete.
func (c Config) Deletes() bool { return policyHas(c.CleanupPolicy, PolicyDelete) }

func policyHas(policy, item string) bool {
	// SplitSeq, not Split: every produce request asks (produceRules), and
	// needs no slice for it.
	for p := range strings.SplitSeq(policy, ",") {
		if strings.TrimSpace(p) == item {
			return true
		}
	}
	return false
}

// checkPolicy accepts a non-empty comma-separated list of delete and compact.
func checkPolicy(policy string) error {
	items := strings.Split(policy, ",")
	for _, p := range items {
		if p = strings.TrimSpace(p); p != PolicyDelete && p != PolicyCompact {
			return fmt.Errorf("%q must be delete, compact or both (\"compact,delete\")", policy)
		}
	}
	return nil
}

// DefaultConfig returns Kafka's topic defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:         1 << 30,
		SegmentAge:           7 * 24 * time.Hour,
		SegmentIndexBytes:    10 << 20,
		IndexIntervalBytes:   4096,
		FlushMessages:        math.MaxInt64,
		FlushInterval:        never,
		Retention:            7 * 24 * time.Hour,
		RetentionBytes:       -1,
		MaxMessageBytes:      1048588,
		FileDeleteDelay:      time.Minute,
		MessageTimestampType: CreateTime,

		MessageTimestampBeforeMax: never,
		MessageTimestampAfterMax:  time.Hour,
		MaxDecompressedBytes:      64 << 20,

		CleanupPolicy:          PolicyDelete,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLag:       never,
		DeleteRetention:        24 * time.Hour,
		CompactedMaxKeyBytes:   64 << 10,

		CompressionType:      CompressionProducer,
		MessageFormatVersion: DefaultMessageFormatVersion,

		LocalRetention:      UseRetention,
		LocalRetentionBytes: UseRetentionBytes,
	}
}

// UseRetention and UseRetentionBytes are local.retention.ms and
// local.retention.bytes's -2: use retention.ms, retention.bytes.
const (
	UseRetention      = -2 * time.Millisecond
	UseRetentionBytes = -2
)

// LocalRetentionLimits returns what local retention keeps of a tiered log:
// local.retention.ms and local.retention.bytes, with -2 resolved to the
// total retention (<0: unlimited).
func (c Config) LocalRetentionLimits() (time.Duration, int64) {
	retention, bytes := c.LocalRetention, c.LocalRetentionBytes
	if retention == UseRetention {
		retention = c.Retention
	}
	if bytes == UseRetentionBytes {
		bytes = c.RetentionBytes
	}
	return retention, bytes
}

// checkRemoteStorage applies Kafka's rules for a tiered topic (its
// LogConfig's validateNoRemoteStorageForCompactedTopic and
// validateRemoteStorageRetentionTime/Size): no compaction, and the local
// limits no larger than the total ones; -1 locally (keep everything) only
// when the total is -1 as well.
func (c Config) checkRemoteStorage() []error {
	var errs []error
	if c.LocalRetention < UseRetention {
		errs = append(errs, fmt.Errorf("local.retention.ms %d must be -2 (use retention.ms), -1 (unlimited) or at least 0", c.LocalRetention.Milliseconds()))
	}
	if c.LocalRetentionBytes < UseRetentionBytes {
		errs = append(errs, fmt.Errorf("local.retention.bytes %d must be -2 (use retention.bytes), -1 (unlimited) or at least 0", c.LocalRetentionBytes))
	}
	if !c.RemoteStorageEnable {
		return errs
	}
	if c.Compacts() {
		errs = append(errs, fmt.Errorf("remote.storage.enable=true is not supported for a compacted topic (cleanup.policy %q): tiered storage keeps only topics whose cleanup.policy is delete, as in Kafka", c.CleanupPolicy))
	}
	if c.Retention >= 0 {
		switch {
		case c.LocalRetention == -time.Millisecond:
			errs = append(errs, fmt.Errorf("local.retention.ms -1 (unlimited) is not allowed while retention.ms is %d: local retention cannot keep more than the total", c.Retention.Milliseconds()))
		case c.LocalRetention > c.Retention:
			errs = append(errs, fmt.Errorf("local.retention.ms %d must not exceed retention.ms %d", c.LocalRetention.Milliseconds(), c.Retention.Milliseconds()))
		}
	}
	if c.RetentionBytes >= 0 {
		switch {
		case c.LocalRetentionBytes == -1:
			errs = append(errs, fmt.Errorf("local.retention.bytes -1 (unlimited) is not allowed while retention.bytes is %d: local retention cannot keep more than the total", c.RetentionBytes))
		case c.LocalRetentionBytes > c.RetentionBytes:
			errs = append(errs, fmt.Errorf("local.retention.bytes %d must not exceed retention.bytes %d", c.LocalRetentionBytes, c.RetentionBytes))
		}
	}
	return errs
}

// Validate rejects impossible settings with a sentence that says why.
func (c Config) Validate() error {
	var errs []error
	if c.SegmentBytes < batchHeaderSize || c.SegmentBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("segment.bytes %d must be between %d (one batch header) and %d (file positions are 32-bit)", c.SegmentBytes, batchHeaderSize, math.MaxInt32))
	}
	if c.SegmentAge < time.Millisecond {
		errs = append(errs, fmt.Errorf("segment.ms %v must be at least 1 ms", c.SegmentAge))
	}
	if c.SegmentIndexBytes < timeIndexEntrySize {
		errs = append(errs, fmt.Errorf("segment.index.bytes %d must hold at least one index entry (%d bytes)", c.SegmentIndexBytes, timeIndexEntrySize))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("index.interval.bytes %d must not be negative", c.IndexIntervalBytes))
	}
	if c.FlushMessages < 1 {
		errs = append(errs, fmt.Errorf("flush.messages %d must be at least 1", c.FlushMessages))
	}
	if c.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("flush.ms %v must not be negative", c.FlushInterval))
	}
	if c.MaxMessageBytes < batchHeaderSize {
		errs = append(errs, fmt.Errorf("max.message.bytes %d cannot hold even a batch header (%d bytes)", c.MaxMessageBytes, batchHeaderSize))
	}
	if c.FileDeleteDelay < 0 {
		errs = append(errs, fmt.Errorf("file.delete.delay.ms %v must not be negative", c.FileDeleteDelay))
	}
	if c.MessageTimestampType != CreateTime && c.MessageTimestampType != LogAppendTime {
		errs = append(errs, fmt.Errorf("message.timestamp.type %q must be %s or %s", c.MessageTimestampType, CreateTime, LogAppendTime))
	}
	if c.MessageTimestampBeforeMax < 0 {
		errs = append(errs, fmt.Errorf("message.timestamp.before.max.ms %v must not be negative", c.MessageTimestampBeforeMax))
	}
	if c.MessageTimestampAfterMax < 0 {
		errs = append(errs, fmt.Errorf("message.timestamp.after.max.ms %v must not be negative", c.MessageTimestampAfterMax))
	}
	if c.MaxDecompressedBytes < int64(c.MaxMessageBytes) {
		errs = append(errs, fmt.Errorf("millrace.max.decompressed.bytes %d must be at least max.message.bytes %d: a batch that is accepted uncompressed must also be accepted compressed", c.MaxDecompressedBytes, c.MaxMessageBytes))
	}
	if err := checkPolicy(c.CleanupPolicy); err != nil {
		errs = append(errs, fmt.Errorf("cleanup.policy %w", err))
	}
	if !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1) {
		errs = append(errs, fmt.Errorf("min.cleanable.dirty.ratio %v must be between 0 and 1", c.MinCleanableDirtyRatio))
	}
	if c.MinCompactionLag < 0 {
		errs = append(errs, fmt.Errorf("min.compaction.lag.ms %v must not be negative", c.MinCompactionLag))
	}
	if c.MaxCompactionLag < time.Millisecond || c.MaxCompactionLag < c.MinCompactionLag {
		errs = append(errs, fmt.Errorf("max.compaction.lag.ms %v must be at least 1 ms and at least min.compaction.lag.ms %v", c.MaxCompactionLag, c.MinCompactionLag))
	}
	if c.DeleteRetention < 0 {
		errs = append(errs, fmt.Errorf("delete.retention.ms %v must not be negative", c.DeleteRetention))
	}
	if c.CompactedMaxKeyBytes < 1 {
		errs = append(errs, fmt.Errorf("millrace.compacted.max.key.bytes %d must be at least 1: a compacted topic accepts only keyed records", c.CompactedMaxKeyBytes))
	}
	if _, ok := compressionCodecs[c.CompressionType]; !ok {
		errs = append(errs, fmt.Errorf("compression.type %q must be one of %s", c.CompressionType, compressionTypeList))
	}
	if err := checkMessageFormatVersion(c.MessageFormatVersion); err != nil {
		errs = append(errs, fmt.Errorf("message.format.version %w", err))
	}
	errs = append(errs, c.checkRemoteStorage()...)
	return errors.Join(errs...)
}

// Settings are the topic configs of the log, by Kafka's topic config
// names, each with the broker config that is its broker-wide default
// (Synonym). Every topic config can be altered per topic at runtime;
// Dynamic says whether the broker-wide default can be too.
var Settings = settings.NewList(func(name, _ string, err error) error {
	return fmt.Errorf("log: %s %w", name, err)
},
	logInt("segment.bytes", "log.segment.bytes", settings.Int, "roll to a new segment before it grows past this", func(c *Config) *int64 { return &c.SegmentBytes }),
	logMs("segment.ms", "log.roll.ms", "roll when the active segment's first append is this old", func(c *Config) *time.Duration { return &c.SegmentAge }),
	logInt("segment.index.bytes", "log.index.size.max.bytes", settings.Int, "roll when an index of the active segment would grow past this", func(c *Config) *int { return &c.SegmentIndexBytes }),
	logInt("index.interval.bytes", "log.index.interval.bytes", settings.Int, "bytes of log between two offset index entries", func(c *Config) *int { return &c.IndexIntervalBytes }),
	logInt("flush.messages", "log.flush.interval.messages", settings.Long, "fsync after this many records", func(c *Config) *int64 { return &c.FlushMessages }),
	logMs("flush.ms", "log.flush.interval.ms", "fsync when the oldest unflushed append is this old", func(c *Config) *time.Duration { return &c.FlushInterval }),
	logMs("retention.ms", "log.retention.ms", "delete segments older than this; -1: keep", func(c *Config) *time.Duration { return &c.Retention }),
	logInt("retention.bytes", "log.retention.bytes", settings.Long, "delete the oldest segments while the partition is larger; -1: no limit", func(c *Config) *int64 { return &c.RetentionBytes }),
	logInt("max.message.bytes", "message.max.bytes", settings.Int, "largest batch accepted", func(c *Config) *int { return &c.MaxMessageBytes }),
	logMs("file.delete.delay.ms", "log.segment.delete.delay.ms", "how long a deleted segment's files stay before removal", func(c *Config) *time.Duration { return &c.FileDeleteDelay }),
	topicString("message.timestamp.type", "log.message.timestamp.type", settings.String, "CreateTime keeps the producer's timestamps, LogAppendTime stamps the append time", func(v string) error {
		if v != CreateTime && v != LogAppendTime {
			return fmt.Errorf("must be %s or %s, not %q", CreateTime, LogAppendTime, v)
		}
		return nil
	}, func(c *Config) *string { return &c.MessageTimestampType }),
	logMs("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", "refuse CreateTime records further than this behind the broker's clock", func(c *Config) *time.Duration { return &c.MessageTimestampBeforeMax }),
	logMs("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", "refuse CreateTime records further than this ahead of the broker's clock", func(c *Config) *time.Duration { return &c.MessageTimestampAfterMax }),
	dynamic(settings.Setting[Config]{Name: "millrace.flush.on.ack", Type: settings.Boolean, Synonym: "millrace.log.flush.on.ack", Doc: "answer produces only once fsynced, and show consumers only fsynced records",
		Parse: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("must be true or false, not %q", v)
			}
			c.FlushOnAck = b
			return nil
		},
		Format: func(c Config) string { return strconv.FormatBool(c.FlushOnAck) },
	}),
	logInt("millrace.max.decompressed.bytes", "millrace.log.max.decompressed.bytes", settings.Long, "a produced batch decompressing past this is refused", func(c *Config) *int64 { return &c.MaxDecompressedBytes }),
	topicString("cleanup.policy", "log.cleanup.policy", settings.ListType, "`delete`, `compact` or `compact,delete`", checkPolicy, func(c *Config) *string { return &c.CleanupPolicy }),
	dynamic(settings.Setting[Config]{Name: "min.cleanable.dirty.ratio", Type: settings.Double, Synonym: "log.cleaner.min.cleanable.ratio", Doc: "clean a compacted log once this share of it is not yet cleaned",
		Parse: func(c *Config, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || !(r >= 0 && r <= 1) {
				return fmt.Errorf("must be a number between 0 and 1, not %q", v)
			}
			c.MinCleanableDirtyRatio = r
			return nil
		},
		Format: func(c Config) string { return strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64) },
	}),
	logMs("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", "a record stays uncompacted at least this long", func(c *Config) *time.Duration { return &c.MinCompactionLag }),
	logMs("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "a log with a record uncleaned this long is cleaned whatever its ratio", func(c *Config) *time.Duration { return &c.MaxCompactionLag }),
	logMs("delete.retention.ms", "log.cleaner.delete.retention.ms", "how long a compacted log keeps tombstones", func(c *Config) *time.Duration { return &c.DeleteRetention }),
	logInt("millrace.compacted.max.key.bytes", "millrace.log.compacted.max.key.bytes", settings.Long, "longest key a compacted topic accepts", func(c *Config) *int64 { return &c.CompactedMaxKeyBytes }),
	topicString("compression.type", "compression.type", settings.String, "the codec batches are stored with: `producer` keeps the producer's; `uncompressed`, `gzip`, `snappy`, `lz4`, `zstd` recompress", func(v string) error {
		if _, ok := compressionCodecs[v]; !ok {
			return fmt.Errorf("must be one of %s, not %q", compressionTypeList, v)
		}
		return nil
	}, func(c *Config) *string { return &c.CompressionType }),
	topicString("leader.replication.throttled.replicas", "", settings.ListType, "`partition:broker,...` or `*`: replicas whose replication the leader holds to leader.replication.throttled.rate", CheckThrottledReplicas, func(c *Config) *string { return &c.LeaderReplicationThrottledReplicas }),
	topicString("follower.replication.throttled.replicas", "", settings.ListType, "`partition:broker,...` or `*`: replicas whose fetching this broker, as follower, holds to follower.replication.throttled.rate", CheckThrottledReplicas, func(c *Config) *string { return &c.FollowerReplicationThrottledReplicas }),
	dynamic(settings.TrueFalse("remote.storage.enable", "copy closed segments to remote storage (tiered storage); local disk keeps the tail set by `local.retention.*`", func(c *Config) *bool { return &c.RemoteStorageEnable })),
	localMs("local.retention.ms", "log.local.retention.ms", "on a tiered topic, keep a segment locally this long after it is stored remotely; -2: retention.ms, -1: keep", func(c *Config) *time.Duration { return &c.LocalRetention }),
	logInt("local.retention.bytes", "log.local.retention.bytes", settings.Long, "on a tiered topic, the most the local part of a partition may hold; -2: retention.bytes, -1: no limit", func(c *Config) *int64 { return &c.LocalRetentionBytes }),
	func() settings.Setting[Config] {
		s := topicString("message.format.version", "log.message.format.version", settings.String, "[DEPRECATED] The record format version the broker writes to the log. "+
			"Ignored, as by Kafka 3.x brokers whose inter-broker protocol is 3.0 or later: batches are always "+
			"stored in format v2. Accepted so that tools which still set it are not refused; Kafka 4.0 removed it.",
			checkMessageFormatVersion, func(c *Config) *string { return &c.MessageFormatVersion })
		s.Dynamic = false // on brokers, as Kafka's DynamicLogConfig leaves it out
		return s
	}(),
)

func dynamic(s settings.Setting[Config]) settings.Setting[Config] {
	s.Dynamic = true
	return s
}

// topicString is a topic config of the values check accepts.
func topicString(name, synonym string, typ settings.Type, doc string, check func(string) error, dst func(*Config) *string) settings.Setting[Config] {
	s := settings.Checked(name, typ, doc, check, dst)
	s.Synonym = synonym
	return dynamic(s)
}

// logInt is an integer topic config; an int field takes 32-bit values.
func logInt[T int | int64](name, synonym string, typ settings.Type, doc string, dst func(*Config) *T) settings.Setting[Config] {
	return dynamic(settings.Setting[Config]{Name: name, Type: typ, Synonym: synonym, Doc: doc,
		Parse: func(c *Config, value string) error {
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return fmt.Errorf("must be an integer: %w", err)
			}
			if _, isInt := any(*dst(c)).(int); isInt && (v < math.MinInt32 || v > math.MaxInt32) {
				return fmt.Errorf("%d is out of range", v)
			}
			*dst(c) = T(v)
			return nil
		},
		Format: func(c Config) string { return strconv.FormatInt(int64(*dst(&c)), 10) },
	})
}

// logMs is a topic config of milliseconds, where Long.MAX_VALUE is never.
func logMs(name, synonym, doc string, dst func(*Config) *time.Duration) settings.Setting[Config] {
	return dynamic(settings.Setting[Config]{Name: name, Type: settings.Long, Synonym: synonym, Doc: doc,
		Parse: func(c *Config, value string) error {
			v, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return fmt.Errorf("must be an integer: %w", err)
			}
			*dst(c) = msToDuration(v)
			return nil
		},
		Format: func(c Config) string { return durationToMs(*dst(&c)) },
	})
}

// localMs is logMs for local.retention.ms, whose -2 (use retention.ms)
// is a value of its own rather than "unlimited".
func localMs(name, synonym, doc string, dst func(*Config) *time.Duration) settings.Setting[Config] {
	s := logMs(name, synonym, doc, dst)
	parse, format := s.Parse, s.Format
	s.Parse = func(c *Config, value string) error {
		if v, err := strconv.ParseInt(value, 10, 64); err == nil && v < -1 {
			*dst(c) = time.Duration(v) * time.Millisecond
			return nil
		}
		return parse(c, value)
	}
	s.Format = func(c Config) string {
		if d := *dst(&c); d < -time.Millisecond {
			return strconv.FormatInt(d.Milliseconds(), 10)
		}
		return format(c)
	}
	return s
}

// CleanerSettings are the log cleaner's broker settings, by Kafka's names.
var CleanerSettings = settings.NewList[CleanerConfig](nil,
	settings.TrueFalse("log.cleaner.enable", "run the log cleaner, which compacts topics whose `cleanup.policy` includes `compact`", func(c *CleanerConfig) *bool { return &c.Enable }),
	settings.Setting[CleanerConfig]{Name: "log.cleaner.threads", Type: settings.Int, Doc: "partitions cleaned at once",
		Parse: func(c *CleanerConfig, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("must be an integer: %w", err)
			}
			if n < 1 || n > math.MaxInt32 {
				return fmt.Errorf("%d must be at least 1", n)
			}
			c.Threads = int(n)
			return nil
		},
		Format: func(c CleanerConfig) string { return strconv.Itoa(c.Threads) },
	},
	// A double in Kafka; its default, Double.MAX_VALUE, is unlimited.
	settings.Setting[CleanerConfig]{Name: "log.cleaner.io.max.bytes.per.second", Type: settings.Double, Doc: "bytes read and written per second by all cleaner threads",
		Parse: func(c *CleanerConfig, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("must be a number: %w", err)
			}
			c.IOMaxBytesPerSecond = f
			return nil
		},
		Format: func(c CleanerConfig) string { return strconv.FormatFloat(c.IOMaxBytesPerSecond, 'g', -1, 64) },
	},
	settings.Integer("log.cleaner.dedupe.buffer.size", settings.Long, 64, "memory for the cleaner threads' key maps, at least 1 MiB each (24 bytes a key)", func(c *CleanerConfig) *int64 { return &c.DedupeBufferSize }),
	settings.Duration("log.cleaner.backoff.ms", time.Millisecond, "how long a cleaner thread waits when nothing is due", func(err error) error {
		return fmt.Errorf("must be an integer: %w", err)
	}, func(c *CleanerConfig) *time.Duration { return &c.Backoff }),
)

// ConfigNames returns the Kafka topic-config names Set and Values use, sorted.
func ConfigNames() []string { return Settings.Names() }

// Set changes one setting by its Kafka topic-config name. Durations are in
// milliseconds as in Kafka. It does not validate the whole Config; call Validate.
func (c *Config) Set(name, value string) error {
	if ok, err := Settings.Set(c, name, value); ok {
		return err
	}
	return fmt.Errorf("log: unknown topic config %q", name)
}

// Values returns every setting by Kafka name, formatted as Kafka prints it.
func (c Config) Values() map[string]string { return Settings.Values(c) }

// msToDuration converts Kafka milliseconds; values too large for a Duration
// (Kafka uses Long.MAX_VALUE for "never") saturate, negatives stay negative.
func msToDuration(ms int64) time.Duration {
	if ms > int64(never/time.Millisecond) {
		return never
	}
	if ms < 0 {
		return -time.Millisecond
	}
	return time.Duration(ms) * time.Millisecond
}

func durationToMs(d time.Duration) string {
	switch {
	case d == never:
		return strconv.FormatInt(math.MaxInt64, 10)
	case d < 0:
		return "-1"
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}
