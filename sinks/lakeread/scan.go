package lakeread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"millrace/schemas"
	"millrace/store"
)

// batchRows is how many rows the Arrow reader decodes at a time: what one
// file costs in memory beyond its footer, whatever its size.
const batchRows = 1024

// Scanner reads the rows a Query selects, file by file.
type Scanner struct {
	st      store.Store
	q       Query
	files   []string
	columns []string
}

// Open lists the topic's files in the query's range and settles the columns:
// those the query names, each of which must exist in the newest file of the
// range (of the topic, when the range has none; schemas only ever add
// columns, so the newest file has them all), or else every column of that
// file. With Query.Table the files are those the table's current snapshot
// lists and the columns the table's. It fails with ErrNoFiles when the
// topic has no file at all.
func Open(ctx context.Context, st store.Store, q Query) (*Scanner, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	selected, newest, err := files(ctx, st, &q)
	if err != nil {
		return nil, err
	}
	if len(selected) > 0 {
		newest = selected[len(selected)-1]
	}
	// A table's schema has every column its files may have.
	var have []string
	if q.Table != nil {
		have = q.Table.Columns
	} else if have, err = columnsOf(ctx, st, newest); err != nil {
		return nil, err
	}
	s := &Scanner{st: st, q: q, files: selected, columns: have}
	if len(q.Columns) > 0 {
		for _, c := range q.Columns {
			if !contains(have, c) {
				return nil, fmt.Errorf("lakeread: topic %q has no column %q (it has %s)", q.Topic, c, strings.Join(have, ", "))
			}
		}
		s.columns = q.Columns
	}
	return s, nil
}

// Columns returns the names of the values Scan passes, in order.
func (s *Scanner) Columns() []string { return s.columns }

// Files returns how many files lie in the query's range.
func (s *Scanner) Files() int { return len(s.files) }

// errEnough stops a scan once the limit is reached.
var errEnough = errors.New("lakeread: limit reached")

// Scan calls fn with the values of each selected row, in the order of
// Columns, up to the query's limit: file by file in name order (day, hour,
// partition, offset), rows in file order. A column a file lacks (an older
// file, before a field was added) gives nil, as a NULL. fn must not keep the
// slice. An error from fn ends the scan and is returned.
func (s *Scanner) Scan(ctx context.Context, fn func(values []any) error) error {
	remaining := s.q.Limit
	emit := func(values []any) error {
		if err := fn(values); err != nil {
			return err
		}
		if remaining > 0 {
			if remaining--; remaining == 0 {
				return errEnough
			}
		}
		return nil
	}
	for _, f := range s.files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.scanFile(ctx, f, emit); err != nil {
			if errors.Is(err, errEnough) {
				return nil
			}
			return err
		}
	}
	return nil
}

// fileReader opens one published Parquet file with the Arrow reader; close
// releases it.
func fileReader(ctx context.Context, st store.Store, name string) (fr *pqarrow.FileReader, close func(), err error) {
	r, err := st.Open(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	// The Parquet reader wants a Seeker too; a section reader adds one to
	// any ReaderAt (a local file, ranged GETs of an S3 object).
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("lakeread: %s: %w", name, err)
	}
	fr, err = pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batchRows}, memory.DefaultAllocator)
	if err != nil {
		pf.Close()
		r.Close()
		return nil, nil, fmt.Errorf("lakeread: %s: %w", name, err)
	}
	return fr, func() { pf.Close(); r.Close() }, nil
}

// columnsOf returns the top-level columns of a file, in schema order.
func columnsOf(ctx context.Context, st store.Store, name string) ([]string, error) {
	fr, closeFile, err := fileReader(ctx, st, name)
	if err != nil {
		return nil, err
	}
	defer closeFile()
	out := make([]string, len(fr.Manifest.Fields))
	for i, f := range fr.Manifest.Fields {
		out[i] = f.Field.Name
	}
	return out, nil
}

// timeColumn returns the index among the manifest's fields of the file's
// event-time column — the time field of the schema its footer names, else
// "ts" — or -1 when the file has no such timestamp column.
func timeColumn(fr *pqarrow.FileReader) int {
	name := "ts"
	if v := fr.ParquetReader().MetaData().KeyValueMetadata().FindValue(schemas.MetaSchemaName); v != nil {
		if s, err := schemas.ByName(*v); err == nil {
			name = s.TimeField
		}
	}
	for i, f := range fr.Manifest.Fields {
		if f.Field.Name == name && f.Field.Type.ID() == arrow.TIMESTAMP {
			return i
		}
	}
	return -1
}

// scanFile passes the selected rows of one file to emit.
func (s *Scanner) scanFile(ctx context.Context, name string, emit func([]any) error) error {
	fr, closeFile, err := fileReader(ctx, s.st, name)
	if err != nil {
		return err
	}
	defer closeFile()

	fieldIndex := map[string]int{}
	for i, f := range fr.Manifest.Fields {
		fieldIndex[f.Field.Name] = i
	}
	ranged := !s.q.From.IsZero() || !s.q.To.IsZero()
	timeField := -1
	if ranged {
		timeField = timeColumn(fr)
	}
	// Read only the leaves of the wanted columns and of the time column.
	wanted := map[int]bool{}
	for _, c := range s.columns {
		if i, ok := fieldIndex[c]; ok {
			wanted[i] = true
		}
	}
	if timeField >= 0 {
		wanted[timeField] = true
	}
	var leaves []int
	for i := range wanted {
		leaves = appendLeaves(leaves, &fr.Manifest.Fields[i])
	}
	values := make([]any, len(s.columns))
	if len(leaves) == 0 {
		// None of the columns is in this file and nothing to filter on:
		// its rows are all NULL.
		for n := fr.ParquetReader().NumRows(); n > 0; n-- {
			if err := emit(values); err != nil {
				return err
			}
		}
		return nil
	}
	sort.Ints(leaves)
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return fmt.Errorf("lakeread: %s: %w", name, err)
	}
	defer rr.Release()

	arrays := make([]arrow.Array, len(s.columns))
	for rr.Next() {
		rec := rr.RecordBatch()
		for i, c := range s.columns {
			arrays[i] = nil
			if j := rec.Schema().FieldIndices(c); len(j) > 0 {
				arrays[i] = rec.Column(j[0])
			}
		}
		var times *array.Timestamp
		if timeField >= 0 {
			if j := rec.Schema().FieldIndices(fr.Manifest.Fields[timeField].Field.Name); len(j) > 0 {
				times, _ = rec.Column(j[0]).(*array.Timestamp)
			}
		}
		for row := 0; row < int(rec.NumRows()); row++ {
			// A row without a time (a click sent without ts) was landed
			// by its record time, in a directory the range kept.
			if times != nil && !times.IsNull(row) && !s.q.inRange(valueOf(times, row).(time.Time)) {
				continue
			}
			for i, a := range arrays {
				values[i] = nil
				if a != nil {
					values[i] = valueOf(a, row)
				}
			}
			if err := emit(values); err != nil {
				return err
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("lakeread: %s: %w", name, err)
	}
	return nil
}

// appendLeaves appends the Parquet leaf columns under a field. A node
// without children is a leaf: the manifest leaves ColIndex at 0, not -1, on
// some inner nodes (a map's key_value group), so IsLeaf cannot tell.
func appendLeaves(leaves []int, f *pqarrow.SchemaField) []int {
	if len(f.Children) == 0 {
		return append(leaves, f.ColIndex)
	}
	for i := range f.Children {
		leaves = appendLeaves(leaves, &f.Children[i])
	}
	return leaves
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ScanFile calls fn with the values of columns of every row of the one
// Parquet file name in st, in file order; a column the file lacks gives
// nil. It is Scan for a caller that picked the file itself (the audit
// counting a table's data file by its rows).
func ScanFile(ctx context.Context, st store.Store, name string, columns []string, fn func(values []any) error) error {
	s := &Scanner{st: st, files: []string{name}, columns: columns}
	return s.Scan(ctx, fn)
}
