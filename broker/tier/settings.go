package tier

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"time"

	"millrace/broker/log"
	"millrace/internal/settings"
	"millrace/store"
)

// Config is the broker's tiered-storage configuration, by Kafka's names
// where Kafka has one (KIP-405's remote.log.*), millrace.remote.storage.*
// where the choice is millrace's (which store, and how it is reached).
type Config struct {
	// Enable (remote.log.storage.system.enable, default false) turns
	// tiered storage on for the broker. Without it no topic may set
	// remote.storage.enable, as in Kafka.
	Enable bool
	// URL (millrace.remote.storage.url, default empty) names the object
	// store the segments go to, through the same store layer the lake
	// uses: s3://bucket/prefix, or file:///path for tests and shared
	// mounts. Required when Enable is set.
	URL string
	// S3Endpoint (millrace.remote.storage.s3.endpoint, default empty =
	// https://s3.amazonaws.com) and S3Region
	// (millrace.remote.storage.s3.region, default us-east-1) reach an
	// s3:// URL, as the sink's s3_endpoint and s3_region do; credentials
	// come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	S3Endpoint string
	S3Region   string
	// TaskInterval (remote.log.manager.task.interval.ms, default 30 s, as
	// Kafka's) is how often the broker looks for segments to upload and
	// remote segments to expire.
	TaskInterval time.Duration
	// CopyMaxBytesPerSecond (remote.log.manager.copy.max.bytes.per.second,
	// default unlimited, as Kafka's) bounds how fast this broker uploads,
	// its partitions together. Besides sparing the link to the store, a
	// bound spreads each segment's upload (reading, spooling, sending,
	// and on a shared host the store's own work) over time instead of
	// running it in one burst beside produce.
	CopyMaxBytesPerSecond int64
	// SweepGrace (millrace.remote.storage.sweep.grace.ms, default 1 h;
	// Kafka has no such setting) is how old an object under a partition's
	// prefix that its remote state does not reference must be before the
	// sweep removes it, and how often the sweep runs. A crash between
	// publishing a segment's objects and recording them leaves such
	// objects; the grace keeps the sweep from removing those of an upload
	// still under way, so it must exceed the longest upload of a segment.
	// The remote data of a deleted topic is removed once its state has
	// not changed for this long.
	SweepGrace time.Duration
	// Read is the read side: the chunk cache
	// (millrace.remote.fetch.cache.bytes, default 256 MiB) and the reader
	// pool (remote.log.reader.threads, default 10,
	// remote.log.reader.max.pending.tasks, default 100, and
	// remote.fetch.max.wait.ms, default 500 ms, as Kafka's).
	Read ReadConfig
}

// DefaultConfig returns the defaults: tiered storage off.
func DefaultConfig() Config {
	return Config{TaskInterval: 30 * time.Second, SweepGrace: time.Hour, CopyMaxBytesPerSecond: math.MaxInt64, Read: ReadConfig{
		Cache: CacheConfig{Bytes: DefaultCacheBytes},
		Pool:  ReadPoolConfig{Threads: DefaultReaderThreads, MaxPending: DefaultMaxPending, MaxWait: DefaultRemoteMaxWait},
	}}
}

// Validate rejects impossible settings with a sentence that says why.
func (c Config) Validate() error {
	if c.TaskInterval <= 0 {
		return fmt.Errorf("tier: remote.log.manager.task.interval.ms must be positive, not %v", c.TaskInterval)
	}
	if c.CopyMaxBytesPerSecond <= 0 {
		return fmt.Errorf("tier: remote.log.manager.copy.max.bytes.per.second must be positive, not %d", c.CopyMaxBytesPerSecond)
	}
	if c.SweepGrace <= 0 {
		return fmt.Errorf("tier: millrace.remote.storage.sweep.grace.ms must be positive, not %v", c.SweepGrace)
	}
	if err := c.Read.Cache.Validate(); err != nil {
		return err
	}
	if err := c.Read.Pool.Validate(); err != nil {
		return err
	}
	if !c.Enable {
		return nil
	}
	if c.URL == "" {
		return fmt.Errorf("tier: remote.log.storage.system.enable=true needs millrace.remote.storage.url (s3://bucket/prefix or file:///path)")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "s3" && u.Scheme != "file") {
		return fmt.Errorf("tier: millrace.remote.storage.url %q must be s3://bucket/prefix or file:///path", c.URL)
	}
	return nil
}

// copyThrottle is the pace of uploads, nil when unlimited.
func (c Config) copyThrottle() *log.Throttle {
	if c.CopyMaxBytesPerSecond == math.MaxInt64 {
		return nil
	}
	return log.NewThrottle(float64(c.CopyMaxBytesPerSecond))
}

// copyRate is the upload rate the copy quota allows, in bytes per second.
func (c Config) copyRate() float64 { return float64(c.CopyMaxBytesPerSecond) }

// OpenStore opens the object store the URL names.
func (c Config) OpenStore(ctx context.Context, logger *slog.Logger) (store.Store, error) {
	st, err := store.Open(ctx, c.URL, store.Options{S3Endpoint: c.S3Endpoint, S3Region: c.S3Region, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("tier: opening millrace.remote.storage.url: %w", err)
	}
	return st, nil
}

// Settings are the broker settings of tiered storage.
var Settings = settings.NewList[Config](func(name, _ string, err error) error {
	return fmt.Errorf("tier: %s %w", name, err)
},
	settings.TrueFalse("remote.log.storage.system.enable", "turn tiered storage on: topics with `remote.storage.enable` keep their closed segments in `millrace.remote.storage.url`", func(c *Config) *bool { return &c.Enable }),
	settings.Str("millrace.remote.storage.url", settings.String, "where tiered segments go: `s3://bucket/prefix` or `file:///path`", func(c *Config) *string { return &c.URL }),
	settings.Str("millrace.remote.storage.s3.endpoint", settings.String, "the S3 server of an s3:// remote storage URL; empty: https://s3.amazonaws.com", func(c *Config) *string { return &c.S3Endpoint }),
	settings.Str("millrace.remote.storage.s3.region", settings.String, "the S3 region of an s3:// remote storage URL; empty: us-east-1", func(c *Config) *string { return &c.S3Region }),
	settings.Ms("remote.log.manager.task.interval.ms", "how often segments are uploaded and remote retention runs", func(c *Config) *time.Duration { return &c.TaskInterval }),
	settings.Integer("remote.log.manager.copy.max.bytes.per.second", settings.Long, 64, "the most bytes per second this broker uploads, its partitions together; the default is unlimited", func(c *Config) *int64 { return &c.CopyMaxBytesPerSecond }),
	settings.Ms("millrace.remote.storage.sweep.grace.ms", "how old an unreferenced remote object must be before the sweep removes it", func(c *Config) *time.Duration { return &c.SweepGrace }),
	settings.Integer("millrace.remote.fetch.cache.bytes", settings.Long, 64, "memory for chunks of remote segments read by fetches below the local log; 0: the default", func(c *Config) *int64 { return &c.Read.Cache.Bytes }),
	settings.Integer("remote.log.reader.threads", settings.Int, 0, "goroutines reading remote segments for fetches; 0: the default", func(c *Config) *int { return &c.Read.Pool.Threads }),
	settings.Integer("remote.log.reader.max.pending.tasks", settings.Int, 0, "remote reads that may wait for a reader; more are refused and their fetch answers empty; 0: the default", func(c *Config) *int { return &c.Read.Pool.MaxPending }),
	settings.Ms("remote.fetch.max.wait.ms", "how long a fetch waits for its remote reads before answering without them", func(c *Config) *time.Duration { return &c.Read.Pool.MaxWait }),
)
