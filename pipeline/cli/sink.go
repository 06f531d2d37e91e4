package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"millrace/internal/lazyfree"
	"millrace/sinks/lake"
	"millrace/store"
)

func init() {
	addCommand("", sinkCommand)
}

func sinkCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use: "sink -b BROKERS --group G --topic T [--topic T2...] --schema SCHEMA " +
			"[--field NAME:TYPE...] --out file:///PATH|s3://BUCKET/PREFIX [--s3-endpoint URL] [--s3-region R] " +
			"[--format hive|iceberg] [--catalog sqlite|postgres|rest] [--catalog-uri URI] [--namespace NS] [--partition hour|day|identity:FIELD|none] " +
			"[--roll-rows N] [--roll-bytes N] " +
			"[--roll-age D] [--idle-timeout D] [--session-timeout D] [--compression zstd|snappy] [--partition-by hour|day] " +
			"[--timestamp-field F] [--max-decompressed-batch-bytes N] [--dedup on|off] [--dedup-window D] [--dedup-max-ids N] " +
			"[--registry URL] [--registry-subject S] [--config sink.yaml] [--metrics-listen ADDR]",
		Short: "land topics as Parquet files, exactly once, as a consumer group",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	var o sinkOptions
	f.StringVarP(&o.group, "group", "g", "", "consumer group shared by the sink's workers")
	f.StringArrayVarP(&o.topics, "topic", "t", nil, "`topic` to land (repeatable)")
	f.StringVar(&o.schema, "schema", "", "event schema: log, click, metric or syslog; otel-logs, otel-spans or otel-metrics for OTLP records (otlp_proto or otlp_json, a row per log record, span or data point); registry for Confluent-framed values typed by a schema registry")
	o.registry = addRegistryFlags(f)
	f.StringVar(&o.registrySubject, "registry-subject", "", "with --schema registry: the subject whose latest schema gives the columns (default TOPIC-value)")
	f.StringArrayVar(&o.fields, "field", nil, "declare an optional typed column `NAME:TYPE`, TYPE string|int64|double|bool|timestamp "+
		"(repeatable; replaces fields: of --config; only ever append)")
	f.StringVar(&o.out, "out", "", "lake root: file:///PATH or s3://BUCKET/PREFIX")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL (default https://s3.amazonaws.com)")
	f.StringVar(&o.s3Region, "s3-region", "", "S3 region (default us-east-1)")
	f.StringVarP(&o.format, "format", "f", "", "hive (default: Hive-partitioned Parquet) or iceberg (one Iceberg table per topic, in --out)")
	f.StringVar(&o.catalog, "catalog", "", "with --format iceberg: sqlite (default, <out>/catalog.db), postgres or rest")
	f.StringVar(&o.catalogURI, "catalog-uri", "", "with --format iceberg: the SQLite file, the PostgreSQL URL or the REST catalog's URL")
	f.StringVar(&o.catalogTokenFile, "catalog-token-file", "", "with --catalog rest: a file holding the bearer token of a rest catalog")
	f.StringVar(&o.catalogCredentialFile, "catalog-credential-file", "", "with --catalog rest: a file holding its OAuth2 client credential, client_id:client_secret")
	f.StringVar(&o.namespace, "namespace", "", "with --format iceberg: the tables' namespace (default millrace)")
	f.StringVarP(&o.partition, "partition", "p", "", "with --format iceberg: the tables' partition spec, hour (default), day, identity:FIELD (a string, int64 or bool field) or none")
	f.Int64Var(&o.rollRows, "roll-rows", 0, "end a commit window after N rows (default 1000000)")
	f.Int64Var(&o.rollBytes, "roll-bytes", 0, "end a commit window at N bytes of Parquet (default 256 MiB)")
	f.DurationVar(&o.rollAge, "roll-age", 0, "end a commit window at this span of record time (default 1m)")
	f.DurationVar(&o.idleTimeout, "idle-timeout", 0, "land a partition's window after this long without records (default 30s)")
	f.DurationVar(&o.sessionTimeout, "session-timeout", 0, "group session timeout: how soon a crashed worker's partitions move (default 45s)")
	f.StringVarP(&o.compression, "compression", "z", "", "snappy (default) or zstd (smaller files, slower to write)")
	f.StringVar(&o.partitionBy, "partition-by", "", "hour (default) or day")
	f.StringVar(&o.timestampField, "timestamp-field", "", "timestamp field that picks the bucket (default the schema's)")
	f.IntVar(&o.maxBatch, "max-decompressed-batch-bytes", 0, "dead-letter and skip a batch that decompresses past N bytes "+
		"or cannot be decompressed (default 64 MiB; the same for every worker of a group)")
	f.StringVar(&o.dedup, "dedup", "", "drop repeated event ids: on (default) or off")
	f.DurationVar(&o.dedupWindow, "dedup-window", 0, "how long in record time a partition remembers ids (default 1h)")
	f.IntVar(&o.dedupMaxIDs, "dedup-max-ids", 0, "ids a partition remembers at most, about 38 bytes each (default 1000000)")
	f.StringVarP(&o.configFile, "config", "c", "", "YAML file with out:, s3_endpoint:, s3_region: and lake: (flags override)")
	f.StringVar(&o.metricsAddr, "metrics-listen", "", "serve Prometheus /metrics on this address")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", time.Minute, "how long to publish and commit on shutdown")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	addOpsFlags(f, &o.ops)
	// Fault injection for the e2e tests, hidden from the help: after N
	// published data files the process exits at once with status 3, as a
	// crash between two publishes of one window would.
	f.IntVar(&o.crashAfter, "crash-after-publish", 0, "")
	// Likewise: before the Nth data file's publish (and its group
	// generation check) the process stops itself with SIGSTOP, as a long
	// pause would; a SIGCONT resumes it.
	f.IntVar(&o.stopBefore, "stop-before-publish", 0, "")
	// Likewise, after the Nth data file's publish: with one file per
	// window, the process stops between writing a window and committing it.
	f.IntVar(&o.stopAfter, "stop-after-publish", 0, "")
	for _, name := range []string{"crash-after-publish", "stop-before-publish", "stop-after-publish"} {
		if err := f.MarkHidden(name); err != nil {
			panic(err) // a flag defined just above
		}
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runSink(cmd.Context(), e, o, cmd.Flags().Changed) }
	return cmd
}

// sinkOptions are the flags of sink.
type sinkOptions struct {
	group, schema, out, s3Endpoint, s3Region, compression, partitionBy  string
	timestampField, dedup, configFile, metricsAddr, logLevel            string
	format, catalog, catalogURI, catalogTokenFile, namespace, partition string
	catalogCredentialFile                                               string
	registrySubject                                                     string
	registry                                                            *registryFlags
	topics, fields                                                      []string
	rollRows, rollBytes                                                 int64
	rollAge, idleTimeout, sessionTimeout, dedupWindow                   time.Duration
	shutdownTimeout                                                     time.Duration
	maxBatch, dedupMaxIDs, crashAfter, stopBefore, stopAfter            int
	ops                                                                 opsOptions
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

// runSink lands topics as Parquet until SIGINT/SIGTERM, then publishes and
// commits what it has read (up to --shutdown-timeout) and leaves the group.
func runSink(ctx context.Context, e *env, o sinkOptions, given func(flag string) bool) error {
	logger, err := newLogger(*e, o.logLevel)
	if err != nil {
		return err
	}
	var cfg sinkFile
	if o.configFile != "" {
		if err := loadYAML(o.configFile, &cfg); err != nil {
			return err
		}
	}
	if e.client.brokersGiven() || len(cfg.Lake.Brokers) == 0 {
		cfg.Lake.Brokers = e.client.seeds()
	}
	if err := e.client.applyTo(&cfg.Lake.Security); err != nil {
		return err
	}
	setString := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setString(&cfg.Lake.Group, o.group)
	setString(&cfg.Lake.Schema, o.schema)
	setString(&cfg.Out, o.out)
	setString(&cfg.S3Endpoint, o.s3Endpoint)
	setString(&cfg.S3Region, o.s3Region)
	setString(&cfg.Lake.Compression, o.compression)
	setString(&cfg.Lake.PartitionBy, o.partitionBy)
	setString(&cfg.Lake.TimestampField, o.timestampField)
	setString(&cfg.Lake.Dedup, o.dedup)
	setString(&cfg.Lake.Format, o.format)
	setString(&cfg.Lake.Iceberg.Catalog, o.catalog)
	setString(&cfg.Lake.Iceberg.URI, o.catalogURI)
	setString(&cfg.Lake.Iceberg.TokenFile, o.catalogTokenFile)
	setString(&cfg.Lake.Iceberg.CredentialFile, o.catalogCredentialFile)
	setString(&cfg.Lake.Iceberg.Namespace, o.namespace)
	setString(&cfg.Lake.Iceberg.Partition, o.partition)
	if len(o.topics) > 0 {
		cfg.Lake.Topics = o.topics
	}
	if len(o.fields) > 0 {
		cfg.Lake.Fields = o.fields
	}
	if given("roll-rows") {
		cfg.Lake.RollRows = o.rollRows
	}
	if given("roll-bytes") {
		cfg.Lake.RollBytes = o.rollBytes
	}
	if given("roll-age") {
		cfg.Lake.RollAge = o.rollAge
	}
	if given("idle-timeout") {
		cfg.Lake.IdleTimeout = o.idleTimeout
	}
	if given("session-timeout") {
		cfg.Lake.SessionTimeout = o.sessionTimeout
	}
	if given("dedup-window") {
		cfg.Lake.DedupWindow = o.dedupWindow
	}
	if given("dedup-max-ids") {
		cfg.Lake.DedupMaxIDs = o.dedupMaxIDs
	}
	if given("max-decompressed-batch-bytes") {
		cfg.Lake.MaxDecompressedBatchBytes = o.maxBatch
	}
	setString(&cfg.Lake.Registry.Subject, o.registrySubject)
	if cfg.Lake.Schema == lake.SchemaRegistry && (len(cfg.Lake.Registry.URLs) == 0 ||
		given("registry") || given("registry-user") || given("registry-password-file") || given("registry-ca")) {
		// The flags (their defaults: MILLRACE_SCHEMA_REGISTRY, or the
		// registry of millrace up) unless the file names the registry.
		rc, err := o.registry.config()
		if err != nil {
			return err
		}
		cfg.Lake.Registry.Config = rc
	}
	if cfg.Out == "" {
		return usageError("--out file:///PATH or s3://BUCKET/PREFIX (or out: in --config) is required")
	}
	if cfg.Lake.Format == lake.FormatIceberg {
		// The tables live where the sink writes: the warehouse is --out.
		out, err := store.CanonicalURL(cfg.Out)
		if err != nil {
			return usageError("%v", err)
		}
		if w := cfg.Lake.Iceberg.Warehouse; w != "" {
			if w, err = store.CanonicalURL(w); err != nil || w != out {
				return usageError("lake.iceberg.warehouse %q must be the sink's out %q: the sink writes the tables' files there",
					cfg.Lake.Iceberg.Warehouse, cfg.Out)
			}
		}
		cfg.Lake.Iceberg.Warehouse = out
		if uri := cfg.Lake.Iceberg.URI; uri != "" && (cfg.Lake.Iceberg.Catalog == "" || cfg.Lake.Iceberg.Catalog == "sqlite") {
			if cfg.Lake.Iceberg.URI, err = filepath.Abs(uri); err != nil {
				return usageError("--catalog-uri %q: %v", uri, err)
			}
		}
	}
	if err := cfg.Lake.Validate(); err != nil {
		return usageError("%v", err)
	}
	// Once the arguments are known to be good, so that a usage error is
	// reported by the first run; on success this does not return.
	if err := lazyfree.Reexec(); err != nil {
		logger.Warn("freed memory goes back to the kernel at once (slower)", "err", err)
	}
	if o.crashAfter > 0 {
		var published atomic.Int64
		n := int64(o.crashAfter)
		cfg.Lake.AfterPublish = func(name string) {
			if published.Add(1) >= n {
				logger.Warn("crash-after-publish: exiting without committing", "published", name)
				os.Exit(3)
			}
		}
	}
	if o.stopAfter > 0 {
		var published atomic.Int64
		n := int64(o.stopAfter)
		cfg.Lake.AfterPublish = func(name string) {
			if published.Add(1) == n {
				logger.Warn("stop-after-publish: stopping before the commit", "published", name)
				if err := stopUntilContinued(); err != nil {
					logger.Error("stop-after-publish: SIGSTOP failed", "err", err)
				}
			}
		}
	}

	if o.stopBefore > 0 {
		var publishing atomic.Int64
		n := int64(o.stopBefore)
		cfg.Lake.BeforePublish = func(name string) {
			if publishing.Add(1) == n {
				logger.Warn("stop-before-publish: stopping", "publishing", name)
				if err := stopUntilContinued(); err != nil {
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
	if cfg.Lake.Lake, err = store.CanonicalURL(cfg.Out); err != nil {
		return err
	}
	reg := newRegistry()
	waitMetrics, err := serveMetrics(ctx, o.metricsAddr, reg, logger)
	if err != nil {
		return err
	}
	defer waitMetrics()
	runner, err := lake.NewRunner(ctx, cfg.Lake, st, reg, logger)
	if err != nil {
		return err
	}
	stopOps, err := startOpsMetrics(o.ops, reg, cfg.Lake.Brokers, cfg.Lake.Security, o.ops.sourceFor("sink", cfg.Lake.Group), logger)
	if err != nil {
		logger.Warn("not publishing own metrics", "err", err)
		stopOps = func() {}
	}
	defer stopOps()
	<-ctx.Done()
	logger.Info("shutting down: landing open windows", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := runner.Shutdown(sctx); err != nil {
		return fmt.Errorf("%w (records not landed are landed again from the committed offsets)", err)
	}
	return nil
}
