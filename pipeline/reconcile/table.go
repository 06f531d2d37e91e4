package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/schemas"
	"millrace/sinks/lake"
	"millrace/sinks/lakeread"
	"millrace/sinks/parquet"
	"millrace/store"
)

// Tables is the Iceberg side of a lake (`format: iceberg`): the catalog
// of its topics' tables, and how far the topics' partitions reach.
type Tables struct {
	// Catalog holds the tables; a topic without a table in it is read as
	// Hive directories.
	Catalog *lakeread.Catalog
	// EndOffsets returns, per topic, each partition's end offset (a
	// partition the table has landed to its end is complete up to now);
	// nil judges a table's hours by its watermarks alone.
	EndOffsets func(ctx context.Context, topics []string) (map[string]map[int32]int64, error)
	// Grace is how far past an hour's end every partition must be before
	// the hour is complete, as the sink's success_grace; default the
	// sink's default.
	Grace time.Duration
}

// ReadLakeTables is ReadLake for a lake whose topics may be Iceberg
// tables. A topic with a table in tables.Catalog is read from the table's
// current snapshot: the rows of the data files it lists (never a file of
// the table's directory that no snapshot lists, which a killed or fenced
// worker left), per source and hour from each file's footer counts, or,
// in a file without them or whose counts do not add up to its rows (a
// compaction's output), from the rows themselves. Its hours are complete
// (a table has no _SUCCESS markers) up to where every partition of the
// group that landed it last is past the hour's end plus the grace, as the
// sink writes a marker. The other topics are read as ReadLake reads them.
func ReadLakeTables(ctx context.Context, st store.Store, tables Tables, topics []string, since, until, now time.Time) (*Lake, error) {
	if tables.Catalog == nil {
		return ReadLake(ctx, st, topics, since, until)
	}
	if tables.Grace <= 0 {
		tables.Grace = lake.DefaultSuccessGrace
	}
	l := &Lake{Rows: map[string]audit.RowCounts{}, Complete: map[string]map[string]bool{},
		Unattributed: map[string]map[string]int64{}}
	var ends map[string]map[int32]int64
	for _, topic := range topics {
		t, err := tables.Catalog.Table(ctx, topic)
		if errors.Is(err, lakeread.ErrNoTable) {
			if err := l.readDirectories(ctx, st, topic, since, until); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if ends == nil && tables.EndOffsets != nil {
			if ends, err = tables.EndOffsets(ctx, topics); err != nil {
				return nil, fmt.Errorf("audit: the topics' end offsets: %w", err)
			}
		}
		if err := l.readTable(ctx, st, topic, t, since, until); err != nil {
			return nil, err
		}
		if pos, ok := tablePosition(t, ends[topic], now); ok {
			l.completeUpTo(topic, since, pos.Add(-tables.Grace))
		}
	}
	return l, nil
}

// readTable adds the rows of t's current snapshot whose partition
// directory's span meets since to until (UTC days, inclusive).
func (l *Lake) readTable(ctx context.Context, st store.Store, topic string, t *lakeread.Table, since, until time.Time) error {
	first, last := since.UTC().Truncate(24*time.Hour), until.UTC().Truncate(24*time.Hour).Add(24*time.Hour)
	fallback := tableSchema(t)
	for _, f := range t.Files {
		if f.Name == "" {
			return fmt.Errorf("audit: table %s lists %s, outside the lake", t.Identifier, f.Location)
		}
		start, end, ok := time.Time{}, time.Time{}, false
		if _, rest, found := strings.Cut(f.Name, "/data/"); found {
			start, end, ok = lake.ParseBucket(rest)
		}
		if ok && (!end.After(first) || !start.Before(last)) {
			continue
		}
		if err := l.readTableFile(ctx, st, topic, f, start, end, fallback); err != nil {
			return err
		}
	}
	return nil
}

// tableSchema is the built-in schema whose every column t has (a sink's
// declared fields only add columns), for files whose footer does not name
// theirs (a compaction's output); nil when none fits.
func tableSchema(t *lakeread.Table) *schemas.Schema {
	have := map[string]bool{}
	for _, c := range t.Columns {
		have[c] = true
	}
	var best *schemas.Schema
	for _, s := range schemas.All() {
		fits := true
		for _, f := range s.Fields {
			fits = fits && have[f.Name]
		}
		if fits && (best == nil || len(s.Fields) > len(best.Fields)) {
			best = s
		}
	}
	return best
}

// readTableFile adds one data file's rows: its footer's counts when they
// add up to its rows, else counted row by row, by the schema its footer
// names, else by fallback.
func (l *Lake) readTableFile(ctx context.Context, st store.Store, topic string, f lakeread.DataFile, start, end time.Time, fallback *schemas.Schema) error {
	r, err := st.Open(ctx, f.Name)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	info, err := parquet.InspectReader(f.Name, r, r.Size())
	r.Close()
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.Files++
	rows := l.Rows[topic]
	if rows == nil {
		rows = audit.RowCounts{}
		l.Rows[topic] = rows
	}
	if meta, ok := info.Metadata[audit.MetaRows]; ok {
		counts, err := audit.DecodeRowCounts(meta)
		if err != nil {
			return fmt.Errorf("audit: %s: %w", f.Name, err)
		}
		var sum int64
		for _, m := range counts {
			for _, n := range m {
				sum += n
			}
		}
		if sum == info.Rows {
			for h, m := range counts {
				for s, n := range m {
					rows.Add(h, s, n)
				}
			}
			return nil
		}
	}
	s, err := schemas.ByName(info.Metadata[schemas.MetaSchemaName])
	if err != nil {
		if s = fallback; s == nil {
			return fmt.Errorf("audit: %s names no schema, and its table's columns fit none, so its rows' sources are unknown", f.Name)
		}
	}
	return countRows(ctx, st, f.Name, s, start, end, rows)
}

// countRows adds a file's rows to rows by source and hour, as the sink
// counts them: the source from the row's fields (audit.SourceOf), the
// hour its event time's when it lies in the file's partition span
// [start, end), else the span's first (the sink placed a row without an
// event time by its record time, in that span).
func countRows(ctx context.Context, st store.Store, name string, s *schemas.Schema, start, end time.Time, rows audit.RowCounts) error {
	fields := []string{"source"}
	switch s.Name {
	case "log":
		fields = []string{"host", "source"}
	case "click":
		fields = []string{"url"}
	}
	columns := append([]string{s.TimeField}, fields...)
	index := map[string]int{}
	for i, c := range columns {
		index[c] = i
	}
	return lakeread.ScanFile(ctx, st, name, columns, func(values []any) error {
		hour := start
		if t, ok := values[0].(time.Time); ok && (start.IsZero() || !t.Before(start) && t.Before(end)) {
			hour = t.UTC().Truncate(time.Hour)
		}
		source := audit.SourceOf(s.Name, func(field string) string {
			v, _ := values[index[field]].(string)
			return v
		})
		rows.Add(audit.Hour(hour), source, 1)
		return nil
	})
}

// tablePosition is how far, in record time, the group that landed t last
// has landed every partition: now for a partition landed to its end
// offset, else its watermark. A partition with records (by ends) and
// nothing landed makes the position unknown; an empty one does not count.
func tablePosition(t *lakeread.Table, ends map[int32]int64, now time.Time) (time.Time, bool) {
	if len(t.Groups) == 0 {
		return time.Time{}, false
	}
	g := t.Groups[0]
	var pos time.Time
	for p, at := range g.Offsets {
		landedTo := now
		if end, ok := ends[p]; !ok || at < end {
			wm, ok := lake.WatermarkTime(g.Watermarks[p])
			if !ok {
				return time.Time{}, false
			}
			landedTo = wm
		}
		if pos.IsZero() || landedTo.Before(pos) {
			pos = landedTo
		}
	}
	for p, end := range ends {
		if _, landed := g.Offsets[p]; !landed && end > 0 {
			return time.Time{}, false
		}
	}
	return pos, !pos.IsZero()
}

// completeUpTo marks topic's hours from since whose end is at or before
// upTo complete.
func (l *Lake) completeUpTo(topic string, since, upTo time.Time) {
	m := l.Complete[topic]
	if m == nil {
		m = map[string]bool{}
		l.Complete[topic] = m
	}
	for h := since.UTC().Truncate(time.Hour); !h.Add(time.Hour).After(upTo); h = h.Add(time.Hour) {
		m[audit.Hour(h)] = true
	}
}

// EndOffsets is Tables.EndOffsets through cl. A partition whose end
// offset cannot be listed is left out: its position is its watermark.
func EndOffsets(cl *kgo.Client) func(ctx context.Context, topics []string) (map[string]map[int32]int64, error) {
	return func(ctx context.Context, topics []string) (map[string]map[int32]int64, error) {
		listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
		if err != nil {
			return nil, err
		}
		out := map[string]map[int32]int64{}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				return
			}
			if out[o.Topic] == nil {
				out[o.Topic] = map[int32]int64{}
			}
			out[o.Topic][o.Partition] = o.Offset
		})
		return out, nil
	}
}
