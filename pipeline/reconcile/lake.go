package reconcile

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"millrace/audit"
	"millrace/sinks/lake"
	"millrace/sinks/parquet"
	"millrace/store"
)

// Lake is what the reconciler reads from a lake: rows per (topic, hour,
// source) from the files' footers, and which hours are complete.
type Lake struct {
	// Rows counts rows per topic: Rows[topic][hour][source].
	Rows map[string]audit.RowCounts
	// Complete holds, per topic, the hours covered by a _SUCCESS marker
	// (an hour's own, or its day's with partition_by: day).
	Complete map[string]map[string]bool
	// Unattributed counts, per topic and hour directory, the rows of files
	// without MetaRows (landed before the sink counted sources); they are
	// reported, not reconciled.
	Unattributed map[string]map[string]int64
	// Files is the number of data files read.
	Files int
}

// ReadLake reads the footers and _SUCCESS markers of topics in st for the
// days from since to until (both UTC, inclusive), listing one day directory
// at a time (`<topic>/dt=YYYY-MM-DD/`) so an old, large lake is not walked.
func ReadLake(ctx context.Context, st store.Store, topics []string, since, until time.Time) (*Lake, error) {
	l := &Lake{Rows: map[string]audit.RowCounts{}, Complete: map[string]map[string]bool{},
		Unattributed: map[string]map[string]int64{}}
	for _, topic := range topics {
		if err := l.readDirectories(ctx, st, topic, since, until); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// readDirectories reads the footers and markers of topic's day
// directories from since to until.
func (l *Lake) readDirectories(ctx context.Context, st store.Store, topic string, since, until time.Time) error {
	const day = 24 * time.Hour
	for d := since.UTC().Truncate(day); !d.After(until); d = d.Add(day) {
		objs, err := st.List(ctx, lake.DayPrefix(topic, d))
		if err != nil {
			return fmt.Errorf("audit: listing the lake: %w", err)
		}
		for _, o := range objs {
			switch base := path.Base(o.Name); {
			case base == lake.SuccessName:
				l.markComplete(topic, o.Name)
			case strings.HasSuffix(base, ".parquet"):
				if err := l.readFile(ctx, st, topic, o.Name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// markComplete records the hours the marker name covers (an hour's, or
// with partition_by: day the whole day's).
func (l *Lake) markComplete(topic, name string) {
	start, end, ok := lake.ParseBucket(strings.TrimPrefix(name, topic+"/"))
	if !ok {
		return
	}
	m := l.Complete[topic]
	if m == nil {
		m = map[string]bool{}
		l.Complete[topic] = m
	}
	for _, h := range lake.Hours(start, end) {
		m[h] = true
	}
}

// readFile adds one data file's footer counts.
func (l *Lake) readFile(ctx context.Context, st store.Store, topic, name string) error {
	r, err := st.Open(ctx, name)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer r.Close()
	info, err := parquet.InspectReader(name, r, r.Size())
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.Files++
	meta, ok := info.Metadata[audit.MetaRows]
	if !ok {
		dir := path.Dir(name)
		m := l.Unattributed[topic]
		if m == nil {
			m = map[string]int64{}
			l.Unattributed[topic] = m
		}
		m[dir] += info.Rows
		return nil
	}
	counts, err := audit.DecodeRowCounts(meta)
	if err != nil {
		return fmt.Errorf("audit: %s: %w", name, err)
	}
	rows := l.Rows[topic]
	if rows == nil {
		rows = audit.RowCounts{}
		l.Rows[topic] = rows
	}
	for h, m := range counts {
		for s, n := range m {
			rows.Add(h, s, n)
		}
	}
	return nil
}
