package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// mergedRowGroupSize is the buffered size at which a merged file starts a
// new row group: large enough that readers skip by row group, small enough
// that a merge holds little in memory.
const mergedRowGroupSize = 64 << 20

// parquetFile is a data file opened for reading.
type parquetFile struct {
	src    iceio.File
	reader *file.Reader
	arrow  *pqarrow.FileReader
}

func openParquet(fs iceio.IO, location string) (*parquetFile, error) {
	src, err := fs.Open(location)
	if err != nil {
		return nil, err
	}
	rdr, err := file.NewParquetReader(src)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("iceberg: read %s: %w", location, err)
	}
	arr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		rdr.Close() // closes src too
		return nil, fmt.Errorf("iceberg: read %s: %w", location, err)
	}
	return &parquetFile{src: src, reader: rdr, arrow: arr}, nil
}

func (p *parquetFile) Close() error { return p.reader.Close() }

// schemaKey names a Parquet file's Arrow schema with its field IDs, so
// only files written under one table schema are merged together.
func schemaKey(fs iceio.IO, location string) (string, error) {
	p, err := openParquet(fs, location)
	if err != nil {
		return "", err
	}
	defer p.Close()
	sc, err := p.arrow.Schema()
	if err != nil {
		return "", fmt.Errorf("iceberg: schema of %s: %w", location, err)
	}
	var b strings.Builder
	for _, f := range sc.Fields() {
		fmt.Fprintf(&b, "%s:%s:%t:%s;", f.Name, f.Type, f.Nullable, f.Metadata)
	}
	return b.String(), nil
}

// mergeFiles writes the rows of bin's files, in order and unchanged, to
// one Parquet file at mergedLocation(bin), with the first file's schema and
// compression, and describes it for the replace.
func mergeFiles(ctx context.Context, tbl *table.Table, bin []iceberg.DataFile) (iceberg.DataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, errors.New("iceberg: the table's file IO cannot write")
	}
	location := mergedLocation(bin)
	first, err := openParquet(fs, bin[0].FilePath())
	if err != nil {
		return nil, err
	}
	sc, err := first.arrow.Schema()
	codec := compressionOf(first.reader)
	first.Close()
	if err != nil {
		return nil, err
	}
	// Two compactions of one bin (two workers, or a retry) write the same
	// name. On a filesystem each writes a temporary file and renames it
	// into place, so a committed file is replaced whole, by the same bytes,
	// and never seen half rewritten. An object store's put is whole by
	// itself (and its rename is a copy).
	writeTo := location
	renamer, canRename := fs.(iceio.RenameIO)
	canRename = canRename && (strings.HasPrefix(location, "file:") || !strings.Contains(location, "://"))
	if canRename {
		suffix, err := commitID()
		if err != nil {
			return nil, err
		}
		writeTo = location + ".tmp-" + suffix
	}
	out, err := wfs.Create(writeTo)
	if err != nil {
		return nil, fmt.Errorf("iceberg: create %s: %w", writeTo, err)
	}
	done := false
	defer func() {
		if !done && canRename {
			_ = fs.Remove(writeTo) // best effort: the orphan sweep gets what stays
		}
	}()
	counter := &countingWriter{w: out}
	w, err := pqarrow.NewFileWriter(sc, counter,
		parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithStats(true)),
		pqarrow.DefaultWriterProps())
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("iceberg: write %s: %w", location, err)
	}
	for _, df := range bin {
		if err := copyRows(ctx, fs, df.FilePath(), sc, w); err != nil {
			w.Close()
			return nil, fmt.Errorf("iceberg: merge %s into %s: %w", df.FilePath(), location, err)
		}
	}
	if err := w.Close(); err != nil { // closes out too
		return nil, fmt.Errorf("iceberg: write %s: %w", location, err)
	}
	footer, err := w.FileMetadata()
	if err != nil {
		return nil, err
	}
	if canRename {
		if err := renamer.Rename(writeTo, location); err != nil {
			return nil, fmt.Errorf("iceberg: rename %s into place: %w", writeTo, err)
		}
	}
	done = true
	return DataFile(tbl, location, counter.n, footer)
}

// copyRows appends the rows of the file at location, whose schema must be
// sc, to w.
func copyRows(ctx context.Context, fs iceio.IO, location string, sc *arrow.Schema, w *pqarrow.FileWriter) error {
	p, err := openParquet(fs, location)
	if err != nil {
		return err
	}
	defer p.Close()
	got, err := p.arrow.Schema()
	if err != nil {
		return err
	}
	if !got.Equal(sc) {
		return fmt.Errorf("its schema %v is not the bin's %v", got, sc)
	}
	rr, err := p.arrow.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		if err := w.WriteBuffered(rr.RecordBatch()); err != nil {
			return err
		}
		if w.RowGroupTotalBytesWritten() >= mergedRowGroupSize {
			w.NewBufferedRowGroup()
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// compressionOf is the codec of a file's first column chunk: what the sink
// chose for it, kept for the merged file.
func compressionOf(r *file.Reader) compress.Compression {
	md := r.MetaData()
	if md.NumRowGroups() == 0 || md.Schema.NumColumns() == 0 {
		return compress.Codecs.Snappy
	}
	cc, err := md.RowGroup(0).ColumnChunk(0)
	if err != nil {
		return compress.Codecs.Snappy
	}
	return cc.Compression()
}

// countingWriter counts the bytes written through it: the merged file's
// size, without a stat the file IO may not offer.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Close() error {
	if cl, ok := c.w.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}
