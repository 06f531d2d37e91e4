// Package lakeread reads rows back out of the lake the sinks write, so the
// data can be looked at without a warehouse: the rows of a topic (optionally
// some columns, a time range, a limit) and counts grouped by a column's value.
// It is what `millrace lake head`, `cat` and `count` print.
//
// It reads any store (a directory, S3) and both layouts the sink writes,
// `<topic>/dt=YYYY-MM-DD/hr=HH/part-….parquet` and, with `partition_by: day`,
// `<topic>/dt=YYYY-MM-DD/part-….parquet`. A time range first skips the
// directories whose hour (or day) lies outside it, then keeps the rows whose
// event time (the schema's time column) lies inside it; a row without one
// is judged by its directory alone, as the sink placed it by its record time.
//
// A topic landed as an Iceberg table (`format: iceberg`) is read through
// its catalog (Catalog.Table): the data files its current snapshot lists,
// never the table's directory, which may hold files nobody committed.
//
// Files are read one at
// a time, a batch of rows at a time, with the Arrow Parquet reader, so memory
// stays bounded whatever the size of the lake.
package lakeread

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"millrace/sinks/lake"
	"millrace/store"
)

// Query selects rows of one topic.
type Query struct {
	// Topic is the topic whose directory under the lake's root is read.
	Topic string
	// Columns are the columns to return, in order; empty means every column
	// of the newest file.
	Columns []string
	// From and To bound the event time: rows with From <= time < To. A zero
	// value leaves that side open.
	From, To time.Time
	// Limit is the number of rows to return; 0 returns all.
	Limit int64
	// Table, when set, is the topic's Iceberg table (Catalog.Table): the
	// files its current snapshot lists are read, in a store rooted at the
	// table's warehouse, instead of the topic's directory.
	Table *Table
}

// Validate rejects a query that cannot name a topic's directory or a range
// that holds nothing.
func (q *Query) Validate() error {
	if q.Topic == "" {
		return fmt.Errorf("lakeread: no topic")
	}
	for _, r := range q.Topic {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("lakeread: topic %q: a topic name has only letters, digits, '.', '_' and '-'", q.Topic)
		}
	}
	if q.Topic == "." || q.Topic == ".." {
		return fmt.Errorf("lakeread: topic %q is not a topic name", q.Topic)
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return fmt.Errorf("lakeread: the range from %s to %s is empty", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	if q.Limit < 0 {
		return fmt.Errorf("lakeread: limit %d: want 0 (all rows) or more", q.Limit)
	}
	seen := map[string]bool{}
	for _, c := range q.Columns {
		if c == "" {
			return fmt.Errorf("lakeread: an empty column name")
		}
		if seen[c] {
			return fmt.Errorf("lakeread: column %q named twice", c)
		}
		seen[c] = true
	}
	return nil
}

// inRange reports whether t lies in the query's range.
func (q *Query) inRange(t time.Time) bool {
	return (q.From.IsZero() || !t.Before(q.From)) && (q.To.IsZero() || t.Before(q.To))
}

// overlaps reports whether the bucket [start, end) meets the query's range.
func (q *Query) overlaps(start, end time.Time) bool {
	return (q.From.IsZero() || end.After(q.From)) && (q.To.IsZero() || start.Before(q.To))
}

// ErrNoFiles is returned (wrapped) when the topic has no Parquet file in
// the lake at all, so a typo in the topic or the lake is not taken for an
// empty result.
var ErrNoFiles = fmt.Errorf("lakeread: no Parquet files")

// files lists the topic's Parquet files whose directory's hour or day meets
// the query's range, in name order (by day, hour, partition and offset), and
// the name of the topic's newest file, in the range or not.
func files(ctx context.Context, st store.Store, q *Query) (selected []string, newest string, err error) {
	if q.Table != nil {
		return tableFiles(q.Table, q)
	}
	objs, err := st.List(ctx, q.Topic+"/")
	if err != nil {
		return nil, "", err
	}
	for _, o := range objs {
		if !strings.HasSuffix(o.Name, ".parquet") || strings.HasPrefix(path.Base(o.Name), ".") {
			continue
		}
		// Names sort by day and hour: the last is the newest.
		newest = o.Name
		start, end, ok := lake.ParseBucket(strings.TrimPrefix(o.Name, q.Topic+"/"))
		if ok && !q.overlaps(start, end) {
			continue
		}
		selected = append(selected, o.Name)
	}
	if newest == "" {
		return nil, "", fmt.Errorf("%w of topic %q", ErrNoFiles, q.Topic)
	}
	return selected, newest, nil
}
