package log

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
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
			return fmt.Errorf("cleanup.policy %q must be delete, compact or both (\"compact,delete\")", policy)
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
	}
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
		errs = append(errs, err)
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
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// configNames lists the Kafka topic-config names Config understands.
var configNames = []string{
	"cleanup.policy", "compression.type", "delete.retention.ms", "message.format.version", "max.compaction.lag.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
	"file.delete.delay.ms", "flush.messages", "flush.ms", "index.interval.bytes",
	"max.message.bytes", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
	"message.timestamp.type", "millrace.compacted.max.key.bytes", "millrace.flush.on.ack", "millrace.max.decompressed.bytes", "retention.bytes", "retention.ms",
	"segment.bytes", "segment.index.bytes", "segment.ms",
}

// ConfigNames returns the Kafka topic-config names Set and Values use, sorted.
func ConfigNames() []string {
	out := append([]string(nil), configNames...)
	sort.Strings(out)
	return out
}

// Set changes one setting by its Kafka topic-config name. Durations are in
// milliseconds as in Kafka. It does not validate the whole Config; call Validate.
func (c *Config) Set(name, value string) error {
	if name == "message.timestamp.type" {
		if value != CreateTime && value != LogAppendTime {
			return fmt.Errorf("log: %s must be %s or %s, not %q", name, CreateTime, LogAppendTime, value)
		}
		c.MessageTimestampType = value
		return nil
	}
	if name == "cleanup.policy" {
		if err := checkPolicy(value); err != nil {
			return fmt.Errorf("log: %w", err)
		}
		c.CleanupPolicy = value
		return nil
	}
	if name == "compression.type" {
		if _, ok := compressionCodecs[value]; !ok {
			return fmt.Errorf("log: %s must be one of %s, not %q", name, compressionTypeList, value)
		}
		c.CompressionType = value
		return nil
	}
	if name == "message.format.version" {
		if err := checkMessageFormatVersion(value); err != nil {
			return fmt.Errorf("log: %w", err)
		}
		c.MessageFormatVersion = value
		return nil
	}
	if name == "min.cleanable.dirty.ratio" {
		r, err := strconv.ParseFloat(value, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return fmt.Errorf("log: %s must be a number between 0 and 1, not %q", name, value)
		}
		c.MinCleanableDirtyRatio = r
		return nil
	}
	if name == "millrace.flush.on.ack" {
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("log: %s must be true or false, not %q", name, value)
		}
		c.FlushOnAck = b
		return nil
	}
	v, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		if isKnownName(name) {
			return fmt.Errorf("log: %s must be an integer: %w", name, err)
		}
		return fmt.Errorf("log: unknown topic config %q", name)
	}
	switch name {
	case "segment.bytes":
		c.SegmentBytes = v
	case "segment.ms":
		c.SegmentAge = msToDuration(v)
	case "segment.index.bytes":
		c.SegmentIndexBytes, err = toInt(name, v)
	case "index.interval.bytes":
		c.IndexIntervalBytes, err = toInt(name, v)
	case "flush.messages":
		c.FlushMessages = v
	case "flush.ms":
		c.FlushInterval = msToDuration(v)
	case "retention.ms":
		c.Retention = msToDuration(v)
	case "retention.bytes":
		c.RetentionBytes = v
	case "max.message.bytes":
		c.MaxMessageBytes, err = toInt(name, v)
	case "file.delete.delay.ms":
		c.FileDeleteDelay = msToDuration(v)
	case "message.timestamp.before.max.ms":
		c.MessageTimestampBeforeMax = msToDuration(v)
	case "message.timestamp.after.max.ms":
		c.MessageTimestampAfterMax = msToDuration(v)
	case "millrace.max.decompressed.bytes":
		c.MaxDecompressedBytes = v
	case "millrace.compacted.max.key.bytes":
		c.CompactedMaxKeyBytes = v
	case "min.compaction.lag.ms":
		c.MinCompactionLag = msToDuration(v)
	case "max.compaction.lag.ms":
		c.MaxCompactionLag = msToDuration(v)
	case "delete.retention.ms":
		c.DeleteRetention = msToDuration(v)
	default:
		return fmt.Errorf("log: unknown topic config %q", name)
	}
	return err
}

// Values returns every setting by Kafka name, formatted as Kafka prints it.
func (c Config) Values() map[string]string {
	return map[string]string{
		"segment.bytes":          strconv.FormatInt(c.SegmentBytes, 10),
		"segment.ms":             durationToMs(c.SegmentAge),
		"segment.index.bytes":    strconv.Itoa(c.SegmentIndexBytes),
		"index.interval.bytes":   strconv.Itoa(c.IndexIntervalBytes),
		"flush.messages":         strconv.FormatInt(c.FlushMessages, 10),
		"flush.ms":               durationToMs(c.FlushInterval),
		"retention.ms":           durationToMs(c.Retention),
		"retention.bytes":        strconv.FormatInt(c.RetentionBytes, 10),
		"max.message.bytes":      strconv.Itoa(c.MaxMessageBytes),
		"file.delete.delay.ms":   durationToMs(c.FileDeleteDelay),
		"message.timestamp.type": c.MessageTimestampType,
		"millrace.flush.on.ack":  strconv.FormatBool(c.FlushOnAck),

		"message.timestamp.before.max.ms": durationToMs(c.MessageTimestampBeforeMax),
		"message.timestamp.after.max.ms":  durationToMs(c.MessageTimestampAfterMax),
		"millrace.max.decompressed.bytes": strconv.FormatInt(c.MaxDecompressedBytes, 10),

		"cleanup.policy":            c.CleanupPolicy,
		"min.cleanable.dirty.ratio": strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64),
		"min.compaction.lag.ms":     durationToMs(c.MinCompactionLag),
		"max.compaction.lag.ms":     durationToMs(c.MaxCompactionLag),
		"delete.retention.ms":       durationToMs(c.DeleteRetention),

		"millrace.compacted.max.key.bytes": strconv.FormatInt(c.CompactedMaxKeyBytes, 10),

		"compression.type":       c.CompressionType,
		"message.format.version": c.MessageFormatVersion,
	}
}

func isKnownName(name string) bool {
	for _, n := range configNames {
		if n == name {
			return true
		}
	}
	return false
}

func toInt(name string, v int64) (int, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("log: %s %d is out of range", name, v)
	}
	return int(v), nil
}

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
