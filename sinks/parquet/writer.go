// Package parquet turns decoded events into Parquet files: a Writer that
// buffers rows in Arrow builders and writes row groups through pqarrow, and
// Inspect, which reads a file back with xitongsys/parquet-go (an independent
// implementation) for `millrace lake inspect` and tests.
package parquet

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"millrace/schemas"
)

// Key-value metadata written to every file besides the schema's name, version
// and fingerprint (schemas.MetaSchemaName, MetaSchemaVersion,
// MetaSchemaFingerprint).
const (
	// MetaTopic is the Kafka topic the rows came from.
	MetaTopic = "millrace.topic"
	// MetaPartition is the partition, in decimal.
	MetaPartition = "millrace.partition"
	// MetaFirstOffset and MetaLastOffset bound the offsets of the file's rows.
	MetaFirstOffset = "millrace.first_offset"
	MetaLastOffset  = "millrace.last_offset"
	// MetaMinTime and MetaMaxTime bound the rows' event times (record time when
	// an event has none), RFC 3339 UTC.
	MetaMinTime = "millrace.min_time"
	MetaMaxTime = "millrace.max_time"
)

// Options configures a Writer. The zero value is usable.
type Options struct {
	// Compression is "snappy" (default) or "zstd". zstd files are smaller
	// and take a little more CPU to write (see docs/benchmarks.md, Sinks).
	Compression string
	// RowGroupRows closes a row group at this many rows. Default 1,000,000.
	RowGroupRows int
	// RowGroupBytes closes a row group when the buffered rows' estimated
	// uncompressed size reaches it. It bounds the memory a writer holds.
	// Default 32 MiB.
	RowGroupBytes int64
	// Allocator for the Parquet encoder's buffers and the Arrow buffers of
	// the columns that are not strings (string and JSON columns are built in
	// Go slices); default memory.DefaultAllocator.
	Allocator memory.Allocator
}

const (
	defaultRowGroupRows  = 1_000_000
	defaultRowGroupBytes = 32 << 20
)

// Validate rejects impossible settings.
func (o *Options) Validate() error {
	switch o.Compression {
	case "", "zstd", "snappy":
	default:
		return fmt.Errorf("parquet: compression %q: want zstd or snappy", o.Compression)
	}
	if o.RowGroupRows < 0 || o.RowGroupBytes < 0 {
		return errors.New("parquet: row group limits cannot be negative")
	}
	return nil
}

// Writer writes rows of one schema to one Parquet file. Rows are buffered in
// Arrow builders, encoded in batches into an in-memory row group, and the row
// group is written out once full, so a writer holds at most about one row
// group (compressed) plus one batch of memory. Not safe for concurrent use.
type Writer struct {
	schema  *schemas.Schema
	opts    Options
	out     *countingWriter
	fw      *pqarrow.FileWriter
	builder *schemas.Builder
	row     *schemas.Row
	rows    int64
	meta    map[string]string
	minTime time.Time
	maxTime time.Time
	err     error // sticky: after a failed write the file is unusable
	closed  bool
	// Rows and estimated uncompressed bytes already handed to the current
	// (buffered, still in memory) row group, and whether the next batch must
	// start a new one.
	groupRows  int
	groupBytes int64
	newGroup   bool
	metaKeys   []string // insertion order, for stable files
}

// NewWriter starts a Parquet file for schema on w. Nothing is written to w
// until the first row group is flushed.
func NewWriter(w io.Writer, schema *schemas.Schema, opts Options) (*Writer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.RowGroupRows == 0 {
		opts.RowGroupRows = defaultRowGroupRows
	}
	if opts.RowGroupBytes == 0 {
		opts.RowGroupBytes = defaultRowGroupBytes
	}
	mem := opts.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	codec, pageSize := compress.Codecs.Snappy, int64(snappyPageSize)
	if opts.Compression == "zstd" {
		codec, pageSize = compress.Codecs.Zstd, zstdPageSize
	}
	props := []parquet.WriterProperty{
		parquet.WithAllocator(mem),
		parquet.WithCompression(codec),
		// Dictionary encoding only where values repeat: for unique columns (ids,
		// timestamps, floats) it doubled the write time and grew the files.
		parquet.WithDictionaryDefault(false),
		// The writer cuts row groups itself (by rows and bytes); pqarrow must
		// not cut them earlier.
		parquet.WithMaxRowGroupLength(math.MaxInt64),
		parquet.WithCreatedBy("millrace"),
		parquet.WithDataPageSize(pageSize),
	}
	for _, f := range schema.Fields {
		if !f.Dictionary {
			continue
		}
		if f.Type == schemas.TypeStringMap {
			props = append(props,
				parquet.WithDictionaryFor(f.Name+".key_value.key", true),
				parquet.WithDictionaryFor(f.Name+".key_value.value", true))
		} else {
			props = append(props, parquet.WithDictionaryFor(f.Name, true))
		}
	}
	out := &countingWriter{w: w}
	arrowProps := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem))
	fw, err := pqarrow.NewFileWriter(schema.Arrow(), out, parquet.NewWriterProperties(props...), arrowProps)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	wr := &Writer{schema: schema, opts: opts, out: out, fw: fw,
		builder: schema.NewBuilder(mem), row: schema.NewRow(), meta: map[string]string{}}
	wr.SetMetadata(schemas.MetaSchemaName, schema.Name)
	wr.SetMetadata(schemas.MetaSchemaVersion, strconv.Itoa(schema.Version))
	wr.SetMetadata(schemas.MetaSchemaFingerprint, schema.Fingerprint())
	return wr, nil
}

// Schema returns the writer's schema.
func (w *Writer) Schema() *schemas.Schema { return w.schema }

// Append decodes a JSON event and adds it. A *schemas.ValidationError means the
// event does not fit the schema (route it to the dead-letter topic; the writer
// is unaffected); any other error is a write failure and is sticky.
// recordTime stands in for the event time in the file's time bounds when the
// event has none.
func (w *Writer) Append(value []byte, recordTime time.Time) error {
	if w.err != nil {
		return w.err
	}
	if err := w.row.Decode(value); err != nil {
		return err
	}
	return w.AppendRow(w.row, recordTime)
}

// AppendRow adds a row decoded by the caller (who may have needed its event
// time first to choose the file). The row is copied; the caller may reuse it.
func (w *Writer) AppendRow(row *schemas.Row, recordTime time.Time) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("parquet: append to a closed writer")
	}
	if row.Schema() != w.schema {
		return fmt.Errorf("parquet: row of schema %s appended to a %s writer", row.Schema().Name, w.schema.Name)
	}
	t := row.TimeOr(recordTime).UTC()
	if w.rows == 0 || t.Before(w.minTime) {
		w.minTime = t
	}
	if w.rows == 0 || t.After(w.maxTime) {
		w.maxTime = t
	}
	w.builder.Append(row)
	w.rows++
	groupRows := w.groupRows + w.builder.Len()
	groupBytes := w.groupBytes + w.builder.Bytes()
	if groupRows >= w.opts.RowGroupRows || groupBytes >= w.opts.RowGroupBytes {
		return w.Flush()
	}
	if w.builder.Len() >= batchRows {
		return w.writeBatch()
	}
	return nil
}

// batchRows is the size of the Arrow record batches handed to pqarrow. Row
// groups are built from several batches: pqarrow's level encoders grow their
// buffers in small steps, so one huge record per row group spent most of the
// time copying (measured: 2x slower at 200k rows).
const batchRows = 8192

// Target sizes of a Parquet data page, by codec (measured on the benchmark's
// click events, with DuckDB running between the timed runs).
const (
	// snappyPageSize: with 64 KiB pages the encoder's page buffers are
	// reused page after page instead of growing to a whole column chunk by
	// copying; 10-15% less CPU than 8 MiB pages and 1% larger files. (1 MiB
	// pages were slower than both.)
	snappyPageSize = 64 << 10
	// zstdPageSize: large pages, because zstd compresses each page alone
	// and Arrow v15, where this was measured, built a new zstd encoder for
	// every page (arrow-go v18 takes them from a pool). Pages under
	// zstd's 128 KiB block size skip its 16 MiB window buffer and wrote 25%
	// faster, but the files were 3.3 times larger; 1 MiB pages cost as
	// much CPU as 8 MiB and made files 8% larger.
	zstdPageSize = 8 << 20
)

// writeBatch encodes the rows in the Arrow builders into the current row group,
// which pqarrow keeps in memory, compressed, until it is closed.
func (w *Writer) writeBatch() error {
	if w.builder.Len() == 0 {
		return nil
	}
	if w.newGroup {
		// Closing the previous group writes it out. pqarrow's unchecked
		// NewBufferedRowGroup panics on a failed write (v15's dropped the
		// error); the counting writer's sticky error is checked as well, as
		// Close does.
		err := w.fw.NewBufferedRowGroupChecked()
		w.newGroup = false
		if err == nil {
			err = w.out.err
		}
		if err != nil {
			w.err = fmt.Errorf("parquet: write row group: %w", err)
			return w.err
		}
	}
	w.groupRows += w.builder.Len()
	w.groupBytes += w.builder.Bytes()
	rec := w.builder.NewRecord()
	defer rec.Release()
	if err := w.fw.WriteBuffered(rec); err != nil {
		w.err = fmt.Errorf("parquet: write row group: %w", err)
		return w.err
	}
	return nil
}

// Flush ends the current row group: appends call it when a row group is full
// (RowGroupRows or RowGroupBytes); calling it early makes smaller row groups.
// The group's bytes reach the io.Writer when the next group starts or at Close.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.writeBatch(); err != nil {
		return err
	}
	if w.groupRows > 0 {
		w.newGroup = true
		w.groupRows, w.groupBytes = 0, 0
	}
	return nil
}

// SetMetadata sets a key-value pair of the file's footer (the lake sets topic,
// partition and offsets before Close). Later values replace earlier ones.
func (w *Writer) SetMetadata(key, value string) {
	if _, ok := w.meta[key]; !ok {
		w.metaKeys = append(w.metaKeys, key)
	}
	w.meta[key] = value
}

// SetSource records where the rows came from in the footer metadata.
func (w *Writer) SetSource(topic string, partition int32, firstOffset, lastOffset int64) {
	w.SetMetadata(MetaTopic, topic)
	w.SetMetadata(MetaPartition, strconv.FormatInt(int64(partition), 10))
	w.SetMetadata(MetaFirstOffset, strconv.FormatInt(firstOffset, 10))
	w.SetMetadata(MetaLastOffset, strconv.FormatInt(lastOffset, 10))
}

// Rows is the number of rows appended.
func (w *Writer) Rows() int64 { return w.rows }

// Bytes estimates the file's size so far, for roll-by-size decisions: bytes
// written, plus the compressed size of the row group held in memory, plus an
// uncompressed estimate of the rows not yet encoded. After Close it is exact.
func (w *Writer) Bytes() int64 {
	if w.closed {
		return w.out.n
	}
	return w.out.n + w.fw.RowGroupTotalCompressedBytes() + w.builder.Bytes()
}

// TimeRange returns the smallest and largest event time appended.
func (w *Writer) TimeRange() (min, max time.Time) { return w.minTime, w.maxTime }

// Footer is the footer Close wrote: the row groups and the column
// statistics a table's data file entry takes, without reading the file
// back.
func (w *Writer) Footer() (*metadata.FileMetaData, error) {
	if !w.closed || w.err != nil {
		return nil, errors.New("parquet: footer of a writer not closed cleanly")
	}
	return w.fw.FileMetadata()
}

// Close flushes the last row group and writes the footer. It does not close
// the underlying io.Writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	defer w.builder.Release()
	if err := w.Flush(); err != nil {
		return err
	}
	if w.rows > 0 {
		w.SetMetadata(MetaMinTime, w.minTime.Format(time.RFC3339Nano))
		w.SetMetadata(MetaMaxTime, w.maxTime.Format(time.RFC3339Nano))
	}
	for _, k := range w.metaKeys {
		if err := w.fw.AppendKeyValueMetadata(k, w.meta[k]); err != nil {
			w.err = fmt.Errorf("parquet: metadata: %w", err)
			return w.err
		}
	}
	if err := w.fw.Close(); err != nil {
		w.err = fmt.Errorf("parquet: close: %w", err)
		return w.err
	}
	if err := w.out.err; err != nil {
		w.err = fmt.Errorf("parquet: close: %w", err)
		return w.err
	}
	return nil
}

// countingWriter counts the bytes written through it and keeps the first
// error: after a failed write the file has a hole, so every later write fails
// too instead of producing a file that looks whole.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}
