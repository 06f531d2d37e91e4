// Package ship is the one producer every millrace agent publishes through.
//
// It wraps a franz-go kgo client with the settings docs/architecture.md §7
// describes for all agents: idempotent writes acknowledged by every in-sync replica, batching by
// linger and size, compression, and a bounded buffer so an agent never holds
// unbounded memory while the broker is slow or down. Every record is
// acknowledged through a callback; errors are classified retryable or
// permanent so callers know whether to send the record again.
package ship

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/clientauth"
)

// Defaults for Config. They favour safety (acks=all, idempotence, unlimited
// retries) and a small memory footprint over raw speed.
const (
	DefaultClientID           = "millrace-agent"
	DefaultAcks               = "all"
	DefaultLinger             = 5 * time.Millisecond
	DefaultMaxBatchBytes      = 1 << 20
	DefaultCompression        = "lz4"
	DefaultMaxBufferedBytes   = 16 << 20
	DefaultMaxBufferedRecords = 100_000
	DefaultRequestTimeout     = 10 * time.Second
	DefaultDialTimeout        = 5 * time.Second
)

// Config configures a Shipper. The zero value of every field means "use the
// default"; call WithDefaults (New does) before reading them.
type Config struct {
	// Brokers are the seed addresses (host:port). Required.
	Brokers []string `yaml:"brokers"`
	// Security is the connection's TLS and SASL settings, the tls: and
	// sasl: keys next to brokers: (see package clientauth). Default none:
	// PLAINTEXT without authentication.
	Security clientauth.Settings `yaml:",inline"`
	// ClientID is sent to the broker with every request. Default "millrace-agent".
	ClientID string `yaml:"client_id"`
	// Acks is how many replicas must have a batch before it counts as
	// written: "all" (default), "leader" or "none". Anything but "all"
	// turns idempotence off, because Kafka's idempotent producer requires
	// acks=all (KIP-98).
	Acks string `yaml:"acks"`
	// DisableIdempotence turns off idempotent writes even with acks=all.
	// Default false: retries never duplicate a batch inside the broker.
	DisableIdempotence bool `yaml:"disable_idempotence"`
	// Linger is how long a partition's batch waits for more records before
	// it is sent. Default 5ms: enough to build real batches at high rates
	// while adding little latency at low ones.
	Linger time.Duration `yaml:"linger"`
	// MaxBatchBytes caps one partition batch. Default 1 MiB, the broker's
	// usual message.max.bytes.
	MaxBatchBytes int32 `yaml:"max_batch_bytes"`
	// Compression is one of zstd, lz4, snappy, gzip or none. Default lz4:
	// log text compresses well with it at a small CPU cost.
	Compression string `yaml:"compression"`
	// MaxBufferedBytes bounds the memory held by records not yet
	// acknowledged, each counted as its key, value and headers plus
	// RecordOverhead. When full, Produce waits and TryProduce answers
	// ErrBufferFull. Default 16 MiB.
	MaxBufferedBytes int `yaml:"max_buffered_bytes"`
	// MaxBufferedRecords bounds the number of records not yet acknowledged.
	// Default 100000.
	MaxBufferedRecords int `yaml:"max_buffered_records"`
	// DeliveryTimeout fails a record that has not been acknowledged after
	// this long, with a retryable error. Default 0: retry until the broker
	// answers, which is what a tailer wants (it pauses reading instead).
	DeliveryTimeout time.Duration `yaml:"delivery_timeout"`
	// RequestTimeout is how long the broker may take to answer a produce
	// request. Default 10s.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// DialTimeout bounds opening a connection to a broker. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// DefaultTopic is used for records whose Topic is empty. Optional.
	DefaultTopic string `yaml:"default_topic"`
	// AutoCreateTopics asks the broker to create a missing topic on first
	// use (when the broker allows it). Default true; set
	// "auto_create_topics: false" to require existing topics.
	AutoCreateTopics *bool `yaml:"auto_create_topics"`
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.Acks == "" {
		c.Acks = DefaultAcks
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.Compression == "" {
		c.Compression = DefaultCompression
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = DefaultMaxBufferedRecords
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.AutoCreateTopics == nil {
		yes := true
		c.AutoCreateTopics = &yes
	}
	return c
}

// Validate reports the first impossible setting, in a sentence that says why.
// It expects defaults to have been applied.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("ship: brokers: at least one broker address is needed to produce"))
	}
	for _, b := range c.Brokers {
		if strings.TrimSpace(b) == "" || !strings.Contains(b, ":") {
			errs = append(errs, fmt.Errorf("ship: brokers: %q is not host:port", b))
		}
	}
	switch c.Acks {
	case "all", "leader", "none":
	default:
		errs = append(errs, fmt.Errorf("ship: acks: %q is not one of all, leader, none", c.Acks))
	}
	if _, err := codec(c.Compression); err != nil {
		errs = append(errs, err)
	}
	if c.Linger < 0 {
		errs = append(errs, errors.New("ship: linger: must not be negative"))
	}
	if c.MaxBatchBytes < 1024 {
		errs = append(errs, fmt.Errorf("ship: max_batch_bytes: %d is below 1024, too small for one record batch", c.MaxBatchBytes))
	}
	if c.MaxBufferedBytes < int(c.MaxBatchBytes) {
		errs = append(errs, fmt.Errorf("ship: max_buffered_bytes: %d is below max_batch_bytes %d, so no batch could ever fill", c.MaxBufferedBytes, c.MaxBatchBytes))
	}
	if c.MaxBufferedRecords < 1 {
		errs = append(errs, errors.New("ship: max_buffered_records: must be at least 1"))
	}
	if c.DeliveryTimeout < 0 || c.RequestTimeout < 0 || c.DialTimeout < 0 {
		errs = append(errs, errors.New("ship: timeouts must not be negative"))
	}
	if err := c.Security.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("ship: %w", err))
	}
	return errors.Join(errs...)
}

// codec maps a compression name to kgo's codec.
func codec(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "none":
		return kgo.NoCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("ship: compression: %q is not one of zstd, lz4, snappy, gzip, none", name)
}
