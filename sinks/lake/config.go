package lake

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"millrace/audit"
	"millrace/internal/clientauth"
	"millrace/schemas"
	"millrace/sinks/parquet"
)

// Config configures a Worker. The zero value of every field is its default.
type Config struct {
	// Brokers are the seed brokers ("host:port"). Required.
	Brokers []string `yaml:"brokers"`
	// Security is the TLS and SASL settings of the sink's connections (its
	// group consumer, dead letters, audit records), the tls: and sasl: keys
	// next to brokers: (see package clientauth). Default none: PLAINTEXT
	// without authentication.
	Security clientauth.Settings `yaml:",inline"`
	// Group is the consumer group; the workers of one sink share it. Required.
	Group string `yaml:"group"`
	// Topics to land; all of them carry events of Schema. Required.
	Topics []string `yaml:"topics"`
	// Schema names the event schema: "log", "click", "metric" or
	// "syslog" (JSON values); "otel-logs", "otel-spans" or "otel-metrics"
	// for OTLP records as agents/otlp and the Collector's Kafka exporter
	// write them, a row per log record, span or data point (rows.go); or
	// "registry" for values written with the schema registry's schemas,
	// whose fields are the columns (registry.go; Registry). Required.
	Schema string `yaml:"schema"`
	// Registry is where a registry-typed sink's schemas come from; ignored
	// unless Schema is registry.
	Registry RegistryConfig `yaml:"registry"`
	// Source is the registry client that reads a registry-typed sink's
	// values, connected by the caller from Registry. Required with schema
	// registry; not part of the YAML configuration.
	Source SchemaSource `yaml:"-"`
	// EventIDField is, with schema registry, the field of the values that
	// is the event id for Dedup (a string: a UUID or a tail id). Default
	// "event_id"; records without it pass and are counted. The built-in
	// schemas' id is always event_id.
	EventIDField string `yaml:"event_id_field"`
	// Fields declares optional typed columns beyond the schema's own, each
	// "name:type" with type string, int64, double, bool or timestamp (see
	// schemas.ParseFieldDecl): top-level event members of that name land in
	// the column instead of the catch-all one. Only ever append to the list;
	// each field raises the schema version by one (schemas.Schema.Extend).
	// Default none.
	Fields []string `yaml:"fields"`
	// RollRows ends a commit window after this many rows. Default 1,000,000.
	RollRows int64 `yaml:"roll_rows"`
	// RollBytes ends a window when its files' estimated size reaches this.
	// Default 256 MiB.
	RollBytes int64 `yaml:"roll_bytes"`
	// RollAge ends a window before the first record whose record timestamp is
	// RollAge after the window's first record (record time, so cut points stay
	// deterministic). Default 1m.
	RollAge time.Duration `yaml:"roll_age"`
	// IdleTimeout ends a window whose partition has delivered no record for
	// this long (wall clock), so a quiet partition lands promptly. Default 30s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// Format is "hive" (default: Hive-partitioned Parquet under the
	// store's root, see Layout) or "iceberg" (one Apache Iceberg table per
	// topic, configured by Iceberg; see tablecommit.go).
	Format string `yaml:"format"`
	// Iceberg is the catalog and tables of Format iceberg; ignored otherwise.
	Iceberg TableConfig `yaml:"iceberg"`
	// PartitionBy is "hour" (default: dt=…/hr=…) or "day" (dt=… only).
	// With Format iceberg it follows the table's partition spec.
	PartitionBy string `yaml:"partition_by"`
	// TimestampField is the timestamp field that picks a row's bucket; default
	// the schema's time field. The record timestamp stands in when it is null.
	TimestampField string `yaml:"timestamp_field"`
	// Compression is "snappy" (default) or "zstd"; see parquet.Options.
	Compression string `yaml:"compression"`
	// RowGroupRows and RowGroupBytes bound a file's row groups (and so the
	// memory each open file holds); defaults 1,000,000 rows and 32 MiB.
	RowGroupRows  int   `yaml:"row_group_rows"`
	RowGroupBytes int64 `yaml:"row_group_bytes"`
	// MaxOpenFiles caps the files a worker has open at once, over all its
	// partitions. Default 64.
	MaxOpenFiles int `yaml:"max_open_files"`
	// SuccessGrace is how far past a bucket's end every partition must be
	// before its _SUCCESS marker is written. Default 10m. Negative disables
	// markers.
	SuccessGrace time.Duration `yaml:"success_grace"`
	// SuccessInterval is how often a worker checks whether markers are due.
	// Default 30s.
	SuccessInterval time.Duration `yaml:"success_interval"`
	// SessionTimeout is the group session timeout: how long the group waits
	// for a member that stopped heartbeating (a crashed worker) before its
	// partitions move. Default 45s, Kafka's default.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// MaxDecompressedBatchBytes bounds what one fetched batch may
	// decompress to, so a decompression bomb cannot exhaust the sink's
	// memory. A batch past the bound, or one whose records cannot be
	// decompressed at all, is sent to the dead-letter topic as one record
	// (reason "undecodable batch") and skipped. Every worker of a group must
	// use the same bound: whether a batch is skipped must not depend on the
	// worker. Default 64 MiB (64 times a full 1 MiB batch); at most 2 GiB - 1.
	MaxDecompressedBatchBytes int `yaml:"max_decompressed_batch_bytes"`
	// StallTimeout is how long an owned partition may deliver nothing
	// while its log goes on beyond the worker's position before the batch
	// at the position is read and checked: one the client cannot get past
	// (malformed records, or fewer records than it claims) is sent to the
	// dead-letter topic (reason "malformed batch") and skipped; a valid one
	// is waited for. A quiet partition costs one end-offset listing per
	// StallTimeout. Default 30s.
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// StartAt is where a partition without a committed offset starts:
	// "earliest" (default) or "latest".
	StartAt string `yaml:"start_at"`
	// Dedup drops repeated events by their event_id (doc.go, "Dedup"):
	// "on" (default) or "off". Tail ids (file prefix + byte offset) at or
	// below the largest offset of their file remembered in the partition,
	// and UUIDs remembered in the partition, are dropped; records without
	// such an id pass and are counted.
	Dedup string `yaml:"dedup"`
	// DedupWindow is how long, in record time, a partition remembers the
	// ids it read: a repeat that arrives within it of the first copy is
	// dropped. A worker that takes a partition over reads this much of it
	// again before landing. Default 1h.
	DedupWindow time.Duration `yaml:"dedup_window"`
	// DedupMaxIDs caps the ids a partition remembers (about 38 bytes each,
	// taken as they arrive); past it the oldest are forgotten first. At
	// most 2^30. Default 1,000,000: an hour of a partition receiving about
	// 280 ids a second, in at most 38 MB; a partition that reads fewer
	// holds less, so a worker pays the cap only for its busiest partitions.
	DedupMaxIDs int `yaml:"dedup_max_ids"`
	// AuditTopic is where the worker publishes its audit counts (rows
	// landed, deduplicated and dead-lettered per source and hour) before
	// each commit, for `millrace audit`. Default "_millrace.audit"; "off"
	// publishes none (the files' footers still count their rows).
	AuditTopic string `yaml:"audit_topic"`
	// Lake is the canonical URL of the lake the worker's store writes to
	// (store.CanonicalURL). When set, the worker announces on AuditTopic
	// that it lands its topics there (an audit.Run of role sink), so that
	// `millrace audit` knows which lake should hold which topic and can
	// report a topic no sink lands. Set by the caller from the store's URL,
	// not in YAML.
	Lake string `yaml:"-"`

	// AfterPublish, when set, is called after every published data file with
	// its name. It is a fault-injection hook for tests (the CLI's hidden
	// --crash-after-publish exits the process from it); it is not part of the
	// YAML configuration.
	AfterPublish func(name string) `yaml:"-"`
	// BeforePublish, when set, is called before every data file's publish,
	// ahead of the group generation check, with the file's final name. It is
	// a fault-injection hook for tests (the CLI's hidden --stop-before-publish
	// stops the process there, as a long pause would); it is not part of the
	// YAML configuration.
	BeforePublish func(name string) `yaml:"-"`
	// AfterCommit, when set, is called after every committed window with
	// its partition, the offset after its last record, and how long its
	// commit took (the span of commit_seconds), as soon as the commit has
	// ended: with Format iceberg from the goroutine that ran it (one at a
	// time, in window order). It is a hook for benchmarks and tests; it is
	// not part of the YAML configuration.
	AfterCommit func(topic string, partition int32, next int64, took time.Duration) `yaml:"-"`
}

// Defaults.
const (
	DefaultRollRows        = 1_000_000
	DefaultRollBytes       = 256 << 20
	DefaultRollAge         = time.Minute
	DefaultIdleTimeout     = 30 * time.Second
	DefaultMaxOpenFiles    = 64
	DefaultSuccessGrace    = 10 * time.Minute
	DefaultSuccessInterval = 30 * time.Second
	DefaultSessionTimeout  = 45 * time.Second
	DefaultStallTimeout    = 30 * time.Second
	DefaultDedupWindow     = time.Hour
	DefaultDedupMaxIDs     = 1_000_000
	// DefaultMaxDecompressedBatchBytes is 64 MiB.
	DefaultMaxDecompressedBatchBytes = 64 << 20
)

// eventIDField is the field dedup reads the event id from.
func (c Config) eventIDField() string {
	if c.EventIDField != "" {
		return c.EventIDField
	}
	return "event_id"
}

// withDefaults returns a copy with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Format == "" {
		c.Format = FormatHive
	}
	if c.Format == FormatIceberg {
		// A data file holds one partition value of the table's spec, and
		// completion is the table's commit: no _SUCCESS markers among the
		// table's files.
		c.PartitionBy = c.Iceberg.layout()
		c.SuccessGrace = -1
	}
	if c.RollRows == 0 {
		c.RollRows = DefaultRollRows
	}
	if c.RollBytes == 0 {
		c.RollBytes = DefaultRollBytes
	}
	if c.RollAge == 0 {
		c.RollAge = DefaultRollAge
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.PartitionBy == "" {
		c.PartitionBy = "hour"
	}
	if c.Compression == "" {
		c.Compression = "snappy"
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if c.SuccessGrace == 0 {
		c.SuccessGrace = DefaultSuccessGrace
	}
	if c.SuccessInterval == 0 {
		c.SuccessInterval = DefaultSuccessInterval
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.StartAt == "" {
		c.StartAt = "earliest"
	}
	if c.Dedup == "" {
		c.Dedup = "on"
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.DedupMaxIDs == 0 {
		c.DedupMaxIDs = DefaultDedupMaxIDs
	}
	if c.AuditTopic == "" {
		c.AuditTopic = audit.Topic
	}
	if c.MaxDecompressedBatchBytes == 0 {
		c.MaxDecompressedBatchBytes = DefaultMaxDecompressedBatchBytes
	}
	return c
}

// Validate rejects missing settings and impossible combinations, each with a
// sentence that says why.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("lake: brokers: at least one seed broker is needed"))
	}
	if err := c.Security.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("lake: %w", err))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("lake: group: the workers of a sink share a consumer group; name it"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("lake: topics: nothing to land"))
	}
	seen := map[string]bool{}
	for _, t := range c.Topics {
		switch {
		case t == "" || strings.ContainsAny(t, "/ "):
			errs = append(errs, fmt.Errorf("lake: topic %q cannot be a directory name", t))
		case strings.HasSuffix(t, ".dlq"):
			errs = append(errs, fmt.Errorf("lake: topic %q is a dead-letter topic; landing it would need its own schema", t))
		case seen[t]:
			errs = append(errs, fmt.Errorf("lake: topic %q listed twice", t))
		}
		seen[t] = true
	}
	s, err := c.eventSchema()
	switch {
	case c.Schema == SchemaRegistry:
		// The columns are known at Start, from the registry: the
		// timestamp field and the identity partition are checked there.
		errs = append(errs, c.validateRegistry()...)
	case err != nil:
		errs = append(errs, fmt.Errorf("lake: schema: %w", err))
	case c.TimestampField != "":
		if f, ok := s.Field(c.TimestampField); !ok || f.Type != schemas.TypeTimestamp {
			errs = append(errs, fmt.Errorf("lake: timestamp_field %q is not a timestamp field of schema %s", c.TimestampField, s.Name))
		}
	}
	if c.Schema != SchemaRegistry && c.EventIDField != "" {
		errs = append(errs, fmt.Errorf("lake: event_id_field: schema %s's event id is event_id; the field is for schema registry", c.Schema))
	}
	if c.RollRows < 0 || c.RollBytes < 0 || c.RollAge < 0 || c.IdleTimeout < 0 || c.MaxOpenFiles < 0 || c.SuccessInterval < 0 || c.SessionTimeout < 0 || c.StallTimeout < 0 {
		errs = append(errs, errors.New("lake: roll limits, timeouts, open-file cap and success interval cannot be negative"))
	}
	if c.MaxDecompressedBatchBytes < 0 || int64(c.MaxDecompressedBatchBytes) > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("lake: max_decompressed_batch_bytes %d: want 1 to %d (a Kafka batch is at most 2 GiB)",
			c.MaxDecompressedBatchBytes, math.MaxInt32))
	}
	switch c.PartitionBy {
	case "", "hour", "day":
	default:
		errs = append(errs, fmt.Errorf("lake: partition_by %q: want hour or day", c.PartitionBy))
	}
	switch c.Format {
	case "", FormatHive:
	case FormatIceberg:
		errs = append(errs, c.Iceberg.validate()...)
		if s != nil {
			if err := c.Iceberg.validateIdentity(s); err != nil {
				errs = append(errs, err)
			}
		}
		if c.PartitionBy != "" && c.PartitionBy != c.Iceberg.layout() {
			errs = append(errs, fmt.Errorf("lake: partition_by %q: with format iceberg the files follow the table's partition spec (iceberg.partition); leave partition_by unset", c.PartitionBy))
		}
		if s != nil && c.TimestampField != "" && c.TimestampField != s.TimeField {
			errs = append(errs, fmt.Errorf("lake: timestamp_field %q: with format iceberg the table is partitioned by the schema's time field %q", c.TimestampField, s.TimeField))
		}
	default:
		errs = append(errs, fmt.Errorf("lake: format %q: want hive or iceberg", c.Format))
	}
	switch c.StartAt {
	case "", "earliest", "latest":
	default:
		errs = append(errs, fmt.Errorf("lake: start_at %q: want earliest or latest", c.StartAt))
	}
	if c.AuditTopic != "" && c.AuditTopic != "off" && (strings.ContainsAny(c.AuditTopic, "/ ") || seen[c.AuditTopic]) {
		errs = append(errs, fmt.Errorf("lake: audit_topic %q: want a topic name that is not landed, or off", c.AuditTopic))
	}
	switch c.Dedup {
	case "", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("lake: dedup %q: want on or off", c.Dedup))
	}
	if c.DedupWindow < 0 || (c.DedupWindow > 0 && c.DedupWindow < time.Millisecond) || c.DedupMaxIDs < 0 {
		errs = append(errs, errors.New("lake: dedup_window must be at least 1ms (record times are milliseconds) and dedup_max_ids cannot be negative"))
	}
	if c.DedupMaxIDs > maxDedupIDs {
		errs = append(errs, fmt.Errorf("lake: dedup_max_ids %d: at most %d (about 38 bytes each)", c.DedupMaxIDs, maxDedupIDs))
	}
	po := parquet.Options{Compression: c.Compression, RowGroupRows: c.RowGroupRows, RowGroupBytes: c.RowGroupBytes}
	if err := po.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("lake: %w", err))
	}
	return errors.Join(errs...)
}

// eventSchema is the built-in schema named by Schema, extended with
// Fields; nil with schema registry, whose columns come from the registry at
// Start (Worker.fixSchema).
func (c Config) eventSchema() (*schemas.Schema, error) {
	if c.Schema == SchemaRegistry {
		return nil, nil
	}
	s, err := schemas.ByName(c.Schema)
	if err != nil {
		return nil, err
	}
	if len(c.Fields) > 0 && schemas.IsOTLP(s) {
		return nil, fmt.Errorf("%s takes no declared fields: its columns are built from the OTLP record, which has no others", s.Name)
	}
	fields := make([]schemas.Field, 0, len(c.Fields))
	for _, d := range c.Fields {
		f, err := schemas.ParseFieldDecl(d)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	return s.Extend(fields...)
}
