package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"millrace/internal/lazyfree"
	"millrace/sinks/lake"
	"millrace/sinks/store"
)

func init() {
	register("sink", "sink -b BROKERS --group G --topic T [--topic T2...] --schema log|click|metric "+
		"[--field NAME:TYPE...] --out file:///PATH|s3://BUCKET/PREFIX [--s3-endpoint URL] [--s3-region R] [--roll-rows N] [--roll-bytes N] "+
		"[--roll-age D] [--idle-timeout D] [--session-timeout D] [--compression zstd|snappy] [--partition-by hour|day] "+
		"[--timestamp-field F] [--max-decompressed-batch-bytes N] [--dedup on|off] [--dedup-window D] [--dedup-max-ids N] [--config sink.yaml] [--metrics-listen ADDR]", runSink)
}

// sinkFile is the YAML layout of `millrace sink --config`.
type sinkFile struct {
	// Out is the lake's root: file:///PATH or s3://BUCKET/PREFIX.
	Out string `yaml:"out"`
	// S3Endpoint and S3Region configure an s3:// root; credentials come from
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	S3Endpoint string `yaml:"s3_endpoint"`
	S3Region   string `yaml:"s3_region"`
	// Lake is the worker: group, topics, schema, rolling, layout.
	Lake lake.Config `yaml:"lake"`
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// runSink lands topics as Parquet until SIGINT/SIGTERM, then publishes and
// commits what it has read (up to --shutdown-timeout) and leaves the group.
func runSink(ctx context.Context, e env, args []string) error {
	f := newFlags("sink")
	brokers := f.brokers()
	group := f.String("group", "", "consumer group shared by the sink's workers")
	var topics stringList
	f.Var(&topics, "topic", "`topic` to land (repeatable)")
	schema := f.String("schema", "", "event schema: log, click or metric")
	var fields stringList
	f.Var(&fields, "field", "declare an optional typed column `NAME:TYPE`, TYPE string|int64|double|bool|timestamp "+
		"(repeatable; replaces fields: of --config; only ever append)")
	out := f.String("out", "", "lake root: file:///PATH or s3://BUCKET/PREFIX")
	s3Endpoint := f.String("s3-endpoint", "", "S3 endpoint URL (default https://s3.amazonaws.com)")
	s3Region := f.String("s3-region", "", "S3 region (default us-east-1)")
	rollRows := f.Int64("roll-rows", 0, "end a commit window after N rows (default 1000000)")
	rollBytes := f.Int64("roll-bytes", 0, "end a commit window at N bytes of Parquet (default 256 MiB)")
	rollAge := f.Duration("roll-age", 0, "end a commit window at this span of record time (default 1m)")
	idleTimeout := f.Duration("idle-timeout", 0, "land a partition's window after this long without records (default 30s)")
	sessionTimeout := f.Duration("session-timeout", 0, "group session timeout: how soon a crashed worker's partitions move (default 45s)")
	compression := f.String("compression", "", "snappy (default) or zstd (smaller files, slower to write)")
	partitionBy := f.String("partition-by", "", "hour (default) or day")
	timestampField := f.String("timestamp-field", "", "timestamp field that picks the bucket (default the schema's)")
	maxBatch := f.Int("max-decompressed-batch-bytes", 0, "dead-letter and skip a batch that decompresses past N bytes "+
		"or cannot be decompressed (default 64 MiB; the same for every worker of a group)")
	dedup := f.String("dedup", "", "drop repeated event ids: on (default) or off")
	dedupWindow := f.Duration("dedup-window", 0, "how long in record time a partition remembers ids (default 1h)")
	dedupMaxIDs := f.Int("dedup-max-ids", 0, "ids a partition remembers at most, about 38 bytes each (default 1000000)")
	configFile := f.String("config", "", "YAML file with out:, s3_endpoint:, s3_region: and lake: (flags override)")
	metricsAddr := f.String("metrics-listen", "", "serve Prometheus /metrics on this address")
	shutdownTimeout := f.Duration("shutdown-timeout", time.Minute, "how long to publish and commit on shutdown")
	logLevel := f.String("log-level", "info", "debug, info, warn or error")
	// Fault injection for the e2e tests, deliberately left out of the usage
	// line: after N published data files the process exits at once with
	// status 3, as a crash between two publishes of one window would.
	crashAfter := f.Int("crash-after-publish", 0, "")
	// Likewise: before the Nth data file's publish (and its group
	// generation check) the process stops itself with SIGSTOP, as a long
	// pause would; a SIGCONT resumes it.
	stopBefore := f.Int("stop-before-publish", 0, "")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	logger, err := newLogger(e, *logLevel)
	if err != nil {
		return err
	}
	var cfg sinkFile
	if *configFile != "" {
		if err := loadYAML(*configFile, &cfg); err != nil {
			return err
		}
	}
	explicit := visited(f)
	if explicit["brokers"] || explicit["b"] || len(cfg.Lake.Brokers) == 0 {
		cfg.Lake.Brokers = seeds(*brokers)
	}
	setString := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setString(&cfg.Lake.Group, *group)
	setString(&cfg.Lake.Schema, *schema)
	setString(&cfg.Out, *out)
	setString(&cfg.S3Endpoint, *s3Endpoint)
	setString(&cfg.S3Region, *s3Region)
	setString(&cfg.Lake.Compression, *compression)
	setString(&cfg.Lake.PartitionBy, *partitionBy)
	setString(&cfg.Lake.TimestampField, *timestampField)
	setString(&cfg.Lake.Dedup, *dedup)
	if len(topics) > 0 {
		cfg.Lake.Topics = topics
	}
	if len(fields) > 0 {
		cfg.Lake.Fields = fields
	}
	if explicit["roll-rows"] {
		cfg.Lake.RollRows = *rollRows
	}
	if explicit["roll-bytes"] {
		cfg.Lake.RollBytes = *rollBytes
	}
	if explicit["roll-age"] {
		cfg.Lake.RollAge = *rollAge
	}
	if explicit["idle-timeout"] {
		cfg.Lake.IdleTimeout = *idleTimeout
	}
	if explicit["session-timeout"] {
		cfg.Lake.SessionTimeout = *sessionTimeout
	}
	if explicit["dedup-window"] {
		cfg.Lake.DedupWindow = *dedupWindow
	}
	if explicit["dedup-max-ids"] {
		cfg.Lake.DedupMaxIDs = *dedupMaxIDs
	}
	if explicit["max-decompressed-batch-bytes"] {
		cfg.Lake.MaxDecompressedBatchBytes = *maxBatch
	}
	if cfg.Out == "" {
		return usageError("--out file:///PATH or s3://BUCKET/PREFIX (or out: in --config) is required")
	}
	if err := cfg.Lake.Validate(); err != nil {
		return usageError("%v", err)
	}
	// Once the arguments are known to be good, so that a usage error is
	// reported by the first run; on success this does not return.
	if err := lazyfree.Reexec(); err != nil {
		logger.Warn("freed memory goes back to the kernel at once (slower)", "err", err)
	}
	if *crashAfter > 0 {
		var published atomic.Int64
		n := int64(*crashAfter)
		cfg.Lake.AfterPublish = func(name string) {
			if published.Add(1) >= n {
				logger.Warn("crash-after-publish: exiting without committing", "published", name)
				os.Exit(3)
			}
		}
	}

	if *stopBefore > 0 {
		var publishing atomic.Int64
		n := int64(*stopBefore)
		cfg.Lake.BeforePublish = func(name string) {
			if publishing.Add(1) == n {
				logger.Warn("stop-before-publish: stopping", "publishing", name)
				if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
					logger.Error("stop-before-publish: SIGSTOP failed", "err", err)
				}
			}
		}
	}

	st, err := store.Open(ctx, cfg.Out, store.Options{S3Endpoint: cfg.S3Endpoint, S3Region: cfg.S3Region, Logger: logger})
	if err != nil {
		return err
	}
	defer st.Close()
	reg := newRegistry()
	waitMetrics, err := serveMetrics(ctx, *metricsAddr, reg, logger)
	if err != nil {
		return err
	}
	defer waitMetrics()
	runner, err := lake.NewRunner(ctx, cfg.Lake, st, reg, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down: landing open windows", "timeout", *shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := runner.Shutdown(sctx); err != nil {
		return fmt.Errorf("%w (records not landed are landed again from the committed offsets)", err)
	}
	return nil
}
