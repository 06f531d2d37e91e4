package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"millrace/sinks/lakeread"
	"millrace/store"
)

// The lake commands that show values: head (the first rows), cat (every
// row) and count (rows by a column's value). They only translate flags;
// sinks/lakeread reads the files: a topic's Hive directories, or the files
// the current snapshot of its Iceberg table lists, when the lake is a
// warehouse whose catalog has the topic's table.
func init() {
	const where = "--lake DIR|URL [--since D | --from T] [--to T] [--catalog sqlite|postgres|rest] [--catalog-uri URI] [--namespace NS]"
	addCommand("lake", func(e *env) *cobra.Command {
		return lakeRowsCommand(e, 10,
			"head TOPIC "+where+" [--columns a,b] [-n 10] [--json]",
			"print a topic's first rows in the lake (oldest hour first)")
	})
	addCommand("lake", func(e *env) *cobra.Command {
		return lakeRowsCommand(e, 0,
			"cat TOPIC "+where+" [--columns a,b] [-n N] [--json]",
			"print every row of a topic in the lake, file by file")
	})
	addCommand("lake", func(e *env) *cobra.Command {
		cmd := &cobra.Command{
			Use:         "count TOPIC --by COLUMN " + where + " [-n N] [--json]",
			Short:       "count a topic's rows in the lake by a column's value, most frequent first",
			Args:        exactArgs(1),
			Annotations: noClient,
		}
		var o lakeRowsOptions
		o.addFlags(cmd.Flags(), 0, "show the N most frequent values only (0: all)")
		var by string
		cmd.Flags().StringVar(&by, "by", "", "the column whose values are counted (required)")
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			return lakeCount(cmd.Context(), e, args[0], by, o)
		}
		return cmd
	})
}

// lakeRowsCommand builds head or cat, which differ in the default limit.
func lakeRowsCommand(e *env, limit int64, use, short string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: exactArgs(1), Annotations: noClient}
	var o lakeRowsOptions
	o.addFlags(cmd.Flags(), limit, "print at most N rows (0: all)")
	var columns string
	cmd.Flags().StringVar(&columns, "columns", "", "comma-separated columns to print, in order (default: all)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return lakeRows(cmd.Context(), e, args[0], columns, o)
	}
	return cmd
}

// lakeRowsOptions are the flags head, cat and count share.
type lakeRowsOptions struct {
	lake, s3Endpoint, s3Region string
	since                      time.Duration
	from, to                   string
	limit                      int64
	asJSON                     bool
	tables                     tableFlags
}

func (o *lakeRowsOptions) addFlags(f *pflag.FlagSet, limit int64, limitDoc string) {
	f.StringVar(&o.lake, "lake", "", "the lake root the sinks land into: a directory, file:///PATH or s3://BUCKET/PREFIX (required)")
	f.DurationVar(&o.since, "since", 0, "only rows of the last D (e.g. 1h, 30m), by hour directory and event time")
	f.StringVar(&o.from, "from", "", "only rows at or after T (RFC 3339, or 2006-01-02[T15[:04]], UTC)")
	f.StringVar(&o.to, "to", "", "only rows before T (as --from)")
	f.Int64VarP(&o.limit, "limit", "n", limit, limitDoc)
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object per line, whole values (a table cuts cells at 48 characters)")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL for an s3:// lake (default https://s3.amazonaws.com)")
	f.StringVar(&o.s3Region, "s3-region", "", "S3 region (default us-east-1)")
	o.tables.add(f)
}

// query turns the flags into a query of topic, relative to now.
func (o *lakeRowsOptions) query(topic string, now time.Time) (lakeread.Query, error) {
	q := lakeread.Query{Topic: topic, Limit: o.limit}
	if o.lake == "" {
		return q, usageError("--lake is required: the lake root, e.g. --lake .millrace/lake")
	}
	if o.limit < 0 {
		return q, usageError("-n/--limit must be 0 (all) or more")
	}
	if o.since < 0 {
		return q, usageError("--since must be positive")
	}
	if o.since > 0 && o.from != "" {
		return q, usageError("--since and --from both set the start; give one")
	}
	if o.since > 0 {
		q.From = now.Add(-o.since)
	}
	var err error
	if o.from != "" {
		if q.From, err = parseLakeTime(o.from); err != nil {
			return q, usageError("--from: %v", err)
		}
	}
	if o.to != "" {
		if q.To, err = parseLakeTime(o.to); err != nil {
			return q, usageError("--to: %v", err)
		}
	}
	if err := q.Validate(); err != nil {
		return q, usageError("%s", strings.TrimPrefix(err.Error(), "lakeread: "))
	}
	return q, nil
}

// lakeTimeLayouts are what --from and --to take, longest first; those
// without an offset are UTC, the time of the lake's directories.
var lakeTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02T15", "2006-01-02"}

func parseLakeTime(s string) (time.Time, error) {
	for _, layout := range lakeTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2024-05-01T10:00:00Z) or 2024-05-01[T10[:30]] in UTC", s)
}

// openLake opens the store the --lake flag names.
func (o *lakeRowsOptions) openLake(ctx context.Context) (store.Store, string, error) {
	u, err := store.CanonicalURL(o.lake)
	if err != nil {
		return nil, "", usageError("--lake: %v", err)
	}
	// The file store makes its root when missing, as a sink needs; a
	// command that only reads must not leave a directory where a typo
	// pointed.
	if dir, ok := strings.CutPrefix(u, "file://"); ok {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, u, fmt.Errorf("no lake at %s: not a directory", dir)
		}
	}
	// Credentials for an s3:// lake come from AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, as for `millrace sink`.
	st, err := store.Open(ctx, u, store.Options{S3Endpoint: o.s3Endpoint, S3Region: o.s3Region})
	return st, u, err
}

// table returns topic's Iceberg table when the lake is a warehouse
// directory whose catalog has it (the catalog flags', or the default
// catalog.db), else nil: the topic is read as Hive directories.
func (o *lakeRowsOptions) table(ctx context.Context, lakeURL, topic string) (*lakeread.Table, error) {
	dir, ok := strings.CutPrefix(lakeURL, "file://")
	if !ok {
		if o.tables.given() {
			return nil, usageError("--catalog: tables are read from a warehouse directory; %s is not one", lakeURL)
		}
		return nil, nil
	}
	return o.tables.lookup(ctx, dir, topic)
}

// explain adds to ErrNoFiles where the command looked, so a wrong topic or
// lake is not mistaken for a lake still filling.
func explain(err error, lakeURL string) error {
	if errors.Is(err, lakeread.ErrNoFiles) {
		return fmt.Errorf("%s under %s (nothing landed yet, or another topic or lake?)", strings.TrimPrefix(err.Error(), "lakeread: "), lakeURL)
	}
	return err
}

// lakeRows prints the rows head and cat select.
func lakeRows(ctx context.Context, e *env, topic, columns string, o lakeRowsOptions) error {
	q, err := o.query(topic, time.Now())
	if err != nil {
		return err
	}
	if columns != "" {
		for _, c := range strings.Split(columns, ",") {
			q.Columns = append(q.Columns, strings.TrimSpace(c))
		}
	}
	if err := q.Validate(); err != nil {
		return usageError("--columns: %s", strings.TrimPrefix(err.Error(), "lakeread: "))
	}
	st, lakeURL, err := o.openLake(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if q.Table, err = o.table(ctx, lakeURL, topic); err != nil {
		return err
	}
	s, err := lakeread.Open(ctx, st, q)
	if err != nil {
		return explain(err, lakeURL)
	}
	w := lakeread.NewTableWriter(e.stdout, s.Columns())
	if o.asJSON {
		w = lakeread.NewJSONWriter(e.stdout, s.Columns())
	}
	if err := s.Scan(ctx, w.Write); err != nil {
		// Show the rows read before the failure; the failure is the error
		// to report, not a failed write after it.
		w.Flush()
		return err
	}
	return w.Flush()
}

// lakeCount prints the counts by a column's value.
func lakeCount(ctx context.Context, e *env, topic, by string, o lakeRowsOptions) error {
	if by == "" {
		return usageError("--by COLUMN is required")
	}
	q, err := o.query(topic, time.Now())
	if err != nil {
		return err
	}
	st, lakeURL, err := o.openLake(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if q.Table, err = o.table(ctx, lakeURL, topic); err != nil {
		return err
	}
	groups, err := lakeread.Count(ctx, st, q, by)
	if err != nil {
		return explain(err, lakeURL)
	}
	if o.limit > 0 && int64(len(groups)) > o.limit {
		groups = groups[:o.limit]
	}
	columns := []string{by, "count"}
	w := lakeread.NewTableWriter(e.stdout, columns)
	if o.asJSON {
		w = lakeread.NewJSONWriter(e.stdout, columns)
	}
	for _, g := range groups {
		if err := w.Write([]any{g.Value, g.Count}); err != nil {
			return err
		}
	}
	return w.Flush()
}
