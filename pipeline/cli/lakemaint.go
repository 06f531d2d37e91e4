package cli

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"millrace/sinks/iceberg"
	"millrace/sinks/lake"
	"millrace/store"
)

// The maintenance of format: iceberg tables by hand: compact, expire and
// orphans run one operation of sinks/iceberg on one topic's table or on
// every table of the namespace, with the catalog settings a sink takes.
// The sinks run the same three on a schedule (sinks/lake/maintain.go);
// these are for a sink whose maintenance is off, a first pass over a
// table, or a look at what a run would do (--dry-run).
func init() {
	addCommand("lake", func(e *env) *cobra.Command {
		cmd := lakeMaintCommand("compact [TOPIC] "+lakeMaintWhere+" [--target-size BYTES] [--dry-run]",
			"merge the small files of a table's closed hours (or days)")
		var o lakeMaintOptions
		o.addFlags(cmd.Flags())
		target := cmd.Flags().Int64("target-size", iceberg.DefaultTargetSize, "pack merged files up to this many bytes")
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if *target <= 0 {
				return usageError("--target-size must be positive")
			}
			return o.each(cmd.Context(), e, args, func(ctx context.Context, cat *iceberg.Catalog, tbl *table.Table) error {
				res, err := cat.Compact(ctx, tbl, iceberg.CompactOptions{TargetSize: *target, DryRun: o.dryRun})
				if err != nil {
					return err
				}
				verb := o.verb("merged", "would merge")
				fmt.Fprintf(e.stdout, "%s: %s %d files into %d, in %d closed partitions\n",
					tableName(tbl), verb, res.FilesRemoved, res.FilesAdded, res.Partitions)
				return nil
			})
		}
		return cmd
	})
	addCommand("lake", func(e *env) *cobra.Command {
		cmd := lakeMaintCommand("expire [TOPIC] "+lakeMaintWhere+" [--keep-days N] [--max-snapshots N] [--dry-run]",
			"drop a table's snapshots older than N days (or beyond the newest N), except each group's offsets")
		var o lakeMaintOptions
		o.addFlags(cmd.Flags())
		days := cmd.Flags().Int("keep-days", 7, "keep the snapshots of the last N days")
		maxSnapshots := cmd.Flags().Int("max-snapshots", 0, "keep about the newest N snapshots at most, however young (0: no bound)")
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if *days < 1 {
				return usageError("--keep-days must be 1 or more")
			}
			if *maxSnapshots < 0 {
				return usageError("--max-snapshots must be 0 (no bound) or more")
			}
			return o.each(cmd.Context(), e, args, func(ctx context.Context, cat *iceberg.Catalog, tbl *table.Table) error {
				res, err := cat.Expire(ctx, tbl, iceberg.ExpireOptions{Keep: time.Duration(*days) * 24 * time.Hour, MaxSnapshots: *maxSnapshots, DryRun: o.dryRun})
				if err != nil {
					return err
				}
				verb := o.verb("expired", "would expire")
				fmt.Fprintf(e.stdout, "%s: %s %d snapshots\n", tableName(tbl), verb, res.Expired)
				for _, tag := range slices.Sorted(maps.Keys(res.Tags)) {
					fmt.Fprintf(e.stdout, "  kept under tag %s: snapshot %d\n", tag, res.Tags[tag])
				}
				return nil
			})
		}
		return cmd
	})
	addCommand("lake", func(e *env) *cobra.Command {
		cmd := lakeMaintCommand("orphans [TOPIC] "+lakeMaintWhere+" [--older-than D] [--dry-run]",
			"delete the files no snapshot of a table references")
		var o lakeMaintOptions
		o.addFlags(cmd.Flags())
		age := cmd.Flags().Duration("older-than", 72*time.Hour, "only files older than D (at least 1h: younger ones may be a roll about to commit)")
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if *age < time.Hour {
				return usageError("--older-than %v: want 1h or more: a sink publishes a roll's files before it commits them", *age)
			}
			return o.each(cmd.Context(), e, args, func(ctx context.Context, cat *iceberg.Catalog, tbl *table.Table) error {
				res, err := cat.RemoveOrphans(ctx, tbl, iceberg.OrphanOptions{SafetyAge: *age, DryRun: o.dryRun})
				if err != nil {
					return err
				}
				verb := o.verb("removed", "would remove")
				fmt.Fprintf(e.stdout, "%s: %s %d orphan files (%d bytes)\n", tableName(tbl), verb, len(res.Files), res.Bytes)
				if o.dryRun {
					for _, f := range res.Files {
						fmt.Fprintf(e.stdout, "  %s\n", f)
					}
				}
				return nil
			})
		}
		return cmd
	})
}

// lakeMaintWhere is the catalog part of the maintenance commands' usage.
const lakeMaintWhere = "--out file:///PATH [--catalog sqlite|postgres|rest] [--catalog-uri URI] [--namespace NS] [--config sink.yaml]"

func lakeMaintCommand(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: rangeArgs(0, 1), Annotations: noClient}
}

// rangeArgs wants between lo and hi positional arguments.
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageError("expected %d to %d argument(s), got %d", lo, hi, len(args))
		}
		return nil
	}
}

// lakeMaintOptions are the catalog flags the maintenance commands share:
// those of `millrace sink --format iceberg`, so a sink's command line or
// its --config file names the same tables.
type lakeMaintOptions struct {
	out, catalog, catalogURI, catalogTokenFile, namespace, configFile string
	s3Endpoint, s3Region                                              string
	dryRun                                                            bool
}

// verb is what a run did, or with --dry-run what it would do.
func (o *lakeMaintOptions) verb(did, wouldDo string) string {
	if o.dryRun {
		return wouldDo
	}
	return did
}

func (o *lakeMaintOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.out, "out", "", "the sink's --out, the tables' warehouse: file:///PATH, a directory or s3://BUCKET/PREFIX")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an s3:// warehouse (default https://s3.amazonaws.com)")
	f.StringVar(&o.s3Region, "s3-region", "", "S3 region for an s3:// warehouse (default us-east-1)")
	f.StringVar(&o.catalog, "catalog", "", "sqlite (default, <out>/catalog.db), postgres or rest")
	f.StringVar(&o.catalogURI, "catalog-uri", "", "the SQLite file, the PostgreSQL URL or the REST catalog's URL")
	f.StringVar(&o.catalogTokenFile, "catalog-token-file", "", "a file holding the bearer token of a rest catalog")
	f.StringVar(&o.namespace, "namespace", "", "the tables' namespace (default millrace)")
	f.StringVarP(&o.configFile, "config", "c", "", "a sink's YAML file: out: and lake.iceberg (flags override)")
	f.BoolVar(&o.dryRun, "dry-run", false, "say what would be done, change nothing")
}

// tables resolves the flags (and --config) into the sink's table settings,
// as `millrace sink` does: the warehouse is the sink's out, and the store
// options are those the sink would open it with.
func (o *lakeMaintOptions) tables() (lake.TableConfig, store.Options, error) {
	var cfg sinkFile
	if o.configFile != "" {
		if err := loadYAML(o.configFile, &cfg); err != nil {
			return lake.TableConfig{}, store.Options{}, err
		}
	}
	tc := cfg.Lake.Iceberg
	for dst, v := range map[*string]string{&cfg.Out: o.out, &tc.Catalog: o.catalog, &tc.URI: o.catalogURI, &tc.TokenFile: o.catalogTokenFile, &tc.Namespace: o.namespace,
		&cfg.S3Endpoint: o.s3Endpoint, &cfg.S3Region: o.s3Region} {
		if v != "" {
			*dst = v
		}
	}
	if cfg.Out == "" {
		cfg.Out = tc.Warehouse
	}
	if cfg.Out == "" {
		return tc, store.Options{}, usageError("--out is required: the sink's --out, where its tables live")
	}
	out := cfg.Out
	if !strings.Contains(out, "://") {
		abs, err := filepath.Abs(out)
		if err != nil {
			return tc, store.Options{}, usageError("--out %q: %v", out, err)
		}
		out = "file://" + abs
	}
	var err error
	if tc.Warehouse, err = store.CanonicalURL(out); err != nil {
		return tc, store.Options{}, usageError("%v", err)
	}
	if tc.URI != "" && (tc.Catalog == "" || tc.Catalog == iceberg.CatalogSQLite) {
		if tc.URI, err = filepath.Abs(tc.URI); err != nil {
			return tc, store.Options{}, usageError("--catalog-uri %q: %v", tc.URI, err)
		}
	}
	return tc, store.Options{S3Endpoint: cfg.S3Endpoint, S3Region: cfg.S3Region}, nil
}

// each opens the catalog and runs op on the table of the topic named in
// args, or on every table of the namespace; it stops at the first error.
func (o *lakeMaintOptions) each(ctx context.Context, e *env, args []string,
	op func(ctx context.Context, cat *iceberg.Catalog, tbl *table.Table) error) error {
	tc, opts, err := o.tables()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.Logger = logger
	st, err := store.Open(ctx, tc.Warehouse, opts)
	if err != nil {
		return err
	}
	cat, err := lake.OpenCatalog(ctx, tc, st, logger)
	if err != nil {
		return err
	}
	defer cat.Close()
	var ids []table.Identifier
	if len(args) == 1 {
		ids = []table.Identifier{cat.Identifier(args[0])}
	} else {
		for id, err := range cat.Catalog().ListTables(ctx, catalog.ToIdentifier(cat.Namespace())) {
			if err != nil {
				return fmt.Errorf("list the tables of %s: %w", cat.Namespace(), err)
			}
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			return fmt.Errorf("no tables in namespace %s of the catalog", cat.Namespace())
		}
		slices.SortFunc(ids, func(a, b table.Identifier) int { return strings.Compare(strings.Join(a, "."), strings.Join(b, ".")) })
	}
	for _, id := range ids {
		tbl, err := cat.Catalog().LoadTable(ctx, id)
		if err != nil {
			return fmt.Errorf("table %s: %w", strings.Join(id, "."), err)
		}
		if err := op(ctx, cat, tbl); err != nil {
			return err
		}
	}
	return nil
}

func tableName(tbl *table.Table) string { return strings.Join(tbl.Identifier(), ".") }
