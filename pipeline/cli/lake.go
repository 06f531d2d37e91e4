package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"millrace/sinks/iceberg"
	"millrace/sinks/lakeread"
	"millrace/sinks/parquet"
	"millrace/store"
)

func init() {
	addCommand("lake", func(e *env) *cobra.Command {
		cmd := &cobra.Command{
			Use: "inspect FILE|DIR|file:///PATH|s3://BUCKET/KEY [--s3-endpoint URL] [--s3-region R] " +
				"| inspect WAREHOUSE --table TOPIC [--catalog sqlite|postgres|rest] [--catalog-uri URI] [--namespace NS] [--json | --sql]",
			Short: "show what an independent Parquet reader sees in landed files, or a table's snapshots, files and partitions",
			Long: `Without --table, read the footers of a landed file, or of every .parquet file
under a directory or S3 prefix. With --table (or given a table's directory,
<warehouse>/<namespace>.db/<topic>, in a warehouse with the default
catalog.db), show the topic's Iceberg table as its catalog has it: its
snapshots (with the group offsets in their summaries), and the data files
and partitions of the current snapshot, never the files of the directory.
--sql prints a DuckDB view over those files instead.`,
			Args:        exactArgs(1),
			Annotations: noClient,
		}
		f := cmd.Flags()
		s3Endpoint := f.String("s3-endpoint", "", "S3 endpoint URL for an s3:// target (default https://s3.amazonaws.com)")
		s3Region := f.String("s3-region", "", "S3 region (default us-east-1)")
		topic := f.String("table", "", "inspect TOPIC's Iceberg table in the warehouse directory given")
		asJSON := f.Bool("json", false, "with a table: print it as one JSON object")
		asSQL := f.Bool("sql", false, "with a table: print a DuckDB view of the current snapshot's files, named after the topic")
		var tf tableFlags
		tf.add(f)
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if dir, table, ok := tf.tableTarget(args[0], *topic); ok {
				if *asJSON && *asSQL {
					return usageError("--json and --sql: give one")
				}
				return inspectTable(cmd.Context(), e, tf, dir, table, *asJSON, *asSQL)
			}
			if *topic != "" {
				return usageError("--table: %q is not a warehouse directory", args[0])
			}
			if *asJSON || *asSQL {
				return usageError("--json and --sql are for a table (--table TOPIC)")
			}
			return lakeInspect(cmd.Context(), e, args[0], store.Options{S3Endpoint: *s3Endpoint, S3Region: *s3Region})
		}
		return cmd
	})
}

// lakeInspect prints what an independent reader (xitongsys/parquet-go) sees
// in a landed file, or in every file under a directory or S3 prefix: schema,
// rows, row groups, codec, min/max of the time column, footer metadata.
func lakeInspect(ctx context.Context, e *env, target string, s3 store.Options) error {
	var (
		infos []*parquet.FileInfo
		err   error
	)
	if strings.HasPrefix(target, "s3://") {
		// Credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
		// as for `millrace sink`.
		infos, err = inspectS3(ctx, target, s3)
	} else {
		dir := strings.TrimPrefix(target, "file://")
		if lakeread.HasDefaultCatalog(dir) {
			// Every file under a warehouse includes those no snapshot
			// lists; the tables' own view is --table.
			fmt.Fprintf(e.stderr, "%s holds an Iceberg catalog: these are all its Parquet files, committed or not; "+
				"`millrace lake inspect %s --table TOPIC` shows a table's snapshots and committed files\n", dir, target)
		}
		infos, err = inspectLocal(dir)
	}
	if err != nil {
		return err
	}
	var rows int64
	for i, info := range infos {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		if err := info.WriteText(e.stdout); err != nil {
			return err
		}
		rows += info.Rows
	}
	if len(infos) > 1 {
		fmt.Fprintf(e.stdout, "\ntotal: %d files, %d rows\n", len(infos), rows)
	}
	return nil
}

// inspectLocal inspects a file, or every .parquet file under a directory.
func inspectLocal(path string) ([]*parquet.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		info, err := parquet.Inspect(path)
		if err != nil {
			return nil, err
		}
		return []*parquet.FileInfo{info}, nil
	}
	infos, err := parquet.InspectDir(path)
	if err == nil && len(infos) == 0 {
		err = fmt.Errorf("no .parquet files under %s", path)
	}
	return infos, err
}

// inspectS3 inspects the object s3://BUCKET/KEY, or every .parquet object
// under it taken as a directory, reading only each footer (ranged GETs).
func inspectS3(ctx context.Context, target string, opts store.Options) ([]*parquet.FileInfo, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, usageError("%q: want s3://BUCKET/KEY", target)
	}
	st, err := store.Open(ctx, "s3://"+u.Host, opts)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	key := strings.TrimPrefix(u.Path, "/")
	dir := strings.TrimSuffix(key, "/") + "/"
	objs, err := st.List(ctx, strings.TrimSuffix(key, "/"))
	if err != nil {
		return nil, err
	}
	var infos []*parquet.FileInfo
	for _, o := range objs {
		// The object named, or the .parquet objects below it: not
		// "clicks2/..." for "clicks", not the _SUCCESS markers.
		under := key == "" || strings.HasPrefix(o.Name, dir)
		if o.Name != key && !(under && strings.HasSuffix(o.Name, ".parquet")) {
			continue
		}
		info, err := inspectObject(ctx, st, "s3://"+u.Host+"/", o.Name)
		if err != nil {
			return infos, err
		}
		infos = append(infos, info)
	}
	if len(infos) == 0 {
		return nil, fmt.Errorf("no .parquet objects under %s", target)
	}
	return infos, nil
}

// inspectObject reads the footer of one published object; root prefixes its
// name in the result.
func inspectObject(ctx context.Context, st store.Store, root, name string) (*parquet.FileInfo, error) {
	r, err := st.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return parquet.InspectReader(root+name, r, r.Size())
}

// tableFlags are the catalog settings of the topics' Iceberg tables, as
// `millrace sink --format iceberg` takes them. Without them a warehouse
// directory's default catalog.db is used, when there is one.
type tableFlags struct {
	catalog, catalogURI, catalogTokenFile, catalogCredentialFile, namespace string
}

func (t *tableFlags) add(f *pflag.FlagSet) {
	f.StringVar(&t.catalog, "catalog", "", "the tables' catalog: sqlite (default, <lake>/catalog.db), postgres or rest")
	f.StringVar(&t.catalogURI, "catalog-uri", "", "the SQLite file, the PostgreSQL URL or the REST catalog's URL")
	f.StringVar(&t.catalogTokenFile, "catalog-token-file", "", "a file holding the bearer token of a rest catalog")
	f.StringVar(&t.catalogCredentialFile, "catalog-credential-file", "", "a file holding a rest catalog's OAuth2 client credential, client_id:client_secret")
	f.StringVar(&t.namespace, "namespace", "", "the tables' namespace (default millrace)")
}

// given reports whether a catalog setting was given.
func (t *tableFlags) given() bool {
	return t.catalog != "" || t.catalogURI != "" || t.catalogTokenFile != "" || t.catalogCredentialFile != "" || t.namespace != ""
}

// config is the sinks/iceberg configuration of the flags for the
// warehouse directory dir.
func (t *tableFlags) config(dir string) (iceberg.Config, error) {
	c := iceberg.Config{Catalog: t.catalog, Namespace: t.namespace, Directory: dir}
	switch t.catalog {
	case "", iceberg.CatalogSQLite:
		c.Path = t.catalogURI
		if c.Path != "" {
			abs, err := filepath.Abs(c.Path)
			if err != nil {
				return c, usageError("--catalog-uri %q: %v", c.Path, err)
			}
			c.Path = abs
		}
	case iceberg.CatalogPostgres, iceberg.CatalogREST:
		c.URL = t.catalogURI
	default:
		return c, usageError("--catalog %q: want sqlite, postgres or rest", t.catalog)
	}
	if t.catalogTokenFile != "" {
		token, err := os.ReadFile(t.catalogTokenFile)
		if err != nil {
			return c, usageError("--catalog-token-file: %v", err)
		}
		c.Token = strings.TrimSpace(string(token))
	}
	if t.catalogCredentialFile != "" {
		cred, err := os.ReadFile(t.catalogCredentialFile)
		if err != nil {
			return c, usageError("--catalog-credential-file: %v", err)
		}
		c.Credential = strings.TrimSpace(string(cred))
	}
	if err := c.Validate(); err != nil {
		return c, usageError("%s", strings.TrimPrefix(err.Error(), "iceberg: "))
	}
	return c, nil
}

// open opens the catalog of the flags for the warehouse directory dir;
// the caller closes it.
func (t *tableFlags) open(ctx context.Context, dir string) (*lakeread.Catalog, error) {
	cfg, err := t.config(dir)
	if err != nil {
		return nil, err
	}
	return lakeread.OpenCatalog(ctx, cfg)
}

// lookup returns topic's table in the warehouse directory dir, or nil
// when the topic has no table there and none was asked for (no catalog
// flag): the topic is then read as Hive directories.
func (t *tableFlags) lookup(ctx context.Context, dir, topic string) (*lakeread.Table, error) {
	if !t.given() && !lakeread.HasDefaultCatalog(dir) {
		return nil, nil
	}
	cat, err := t.open(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	tbl, err := cat.Table(ctx, topic)
	if errors.Is(err, lakeread.ErrNoTable) && !t.given() {
		return nil, nil
	}
	return tbl, err
}

// tableTarget says whether inspect's target names a table: a warehouse
// directory with --table TOPIC, or a table's directory
// <warehouse>/<namespace>.db/<topic> in a warehouse with catalog settings
// or the default catalog.db. It returns the warehouse and the topic.
func (t *tableFlags) tableTarget(target, topic string) (dir, table string, ok bool) {
	if strings.HasPrefix(target, "s3://") {
		return "", "", false
	}
	path, err := filepath.Abs(strings.TrimPrefix(target, "file://"))
	if err != nil {
		return "", "", false
	}
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return "", "", false
	}
	if topic != "" {
		return path, topic, true
	}
	ns, warehouse := filepath.Base(filepath.Dir(path)), filepath.Dir(filepath.Dir(path))
	name, isTable := strings.CutSuffix(ns, ".db")
	if !isTable || name == "" || (t.namespace != "" && t.namespace != name) {
		return "", "", false
	}
	if !t.given() && !lakeread.HasDefaultCatalog(warehouse) {
		return "", "", false
	}
	t.namespace = name
	return warehouse, filepath.Base(path), true
}

// inspectTable prints topic's table in the warehouse dir.
func inspectTable(ctx context.Context, e *env, tf tableFlags, dir, topic string, asJSON, asSQL bool) error {
	cat, err := tf.open(ctx, dir)
	if err != nil {
		return err
	}
	defer cat.Close()
	t, err := cat.Table(ctx, topic)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(t)
	}
	if asSQL {
		return writeTableSQL(e.stdout, topic, t)
	}
	return writeTableText(e.stdout, t)
}

// writeTableSQL prints a DuckDB statement that makes a view named after
// the topic over the data files of t's current snapshot: a warehouse that
// cannot load DuckDB's iceberg extension reads the table with it, and
// never a file of the table's directory that no snapshot lists.
func writeTableSQL(w io.Writer, topic string, t *lakeread.Table) error {
	if len(t.Files) == 0 {
		return fmt.Errorf("table %s has no data files yet (no committed snapshot with rows)", t.Identifier)
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	files := make([]string, len(t.Files))
	for i, f := range t.Files {
		files[i] = quote(strings.TrimPrefix(f.Location, "file://"))
	}
	_, err := fmt.Fprintf(w, "-- %s, snapshot %d: %d files, %d rows\nCREATE OR REPLACE VIEW %s AS SELECT * FROM read_parquet([\n  %s\n], hive_partitioning = true, union_by_name = true);\n",
		t.Identifier, t.CurrentSnapshotID, len(t.Files), t.Rows, `"`+strings.ReplaceAll(topic, `"`, `""`)+`"`, strings.Join(files, ",\n  "))
	return err
}

// writeTableText prints a table: what it is, its snapshots oldest first
// with their summaries, then the current snapshot's partitions and files.
func writeTableText(w io.Writer, t *lakeread.Table) error {
	fmt.Fprintf(w, "table %s\nlocation %s\nmetadata %s\npartition spec %s\ncolumns %s\n",
		t.Identifier, t.Location, t.MetadataLocation, t.Spec, strings.Join(t.Columns, ", "))
	fmt.Fprintf(w, "\nsnapshots (%d, oldest first):\n", len(t.Snapshots))
	for _, s := range t.Snapshots {
		current := ""
		if s.Current {
			current = "  (current)"
		}
		fmt.Fprintf(w, "  %d  %s  %s%s\n", s.ID, s.Time.Format(time.RFC3339Nano), s.Operation, current)
		for _, k := range slices.Sorted(maps.Keys(s.Summary)) {
			fmt.Fprintf(w, "      %s = %s\n", k, s.Summary[k])
		}
	}
	for _, g := range t.Groups {
		parts := make([]string, 0, len(g.Offsets))
		for _, p := range slices.Sorted(maps.Keys(g.Offsets)) {
			parts = append(parts, fmt.Sprintf("%d:%d", p, g.Offsets[p]))
		}
		fmt.Fprintf(w, "\ngroup %s has landed up to %s (partition:next offset), as of snapshot %d\n", g.Group, strings.Join(parts, ","), g.SnapshotID)
	}
	if t.CurrentSnapshotID == 0 {
		_, err := fmt.Fprintln(w, "\nno snapshot yet: the table holds no rows")
		return err
	}
	fmt.Fprintf(w, "\npartitions of snapshot %d:\n", t.CurrentSnapshotID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PARTITION\tFILES\tROWS\tBYTES")
	for _, p := range t.Partitions {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\n", p.Name, p.Files, p.Rows, p.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndata files of snapshot %d:\n", t.CurrentSnapshotID)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  FILE\tPARTITION\tROWS\tBYTES")
	for _, f := range t.Files {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", f.Location, f.Partition, f.Rows, f.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\ntotal: %d snapshots, %d partitions, %d files, %d rows, %d bytes\n",
		len(t.Snapshots), len(t.Partitions), len(t.Files), t.Rows, t.Bytes)
	return err
}
