package parquet

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	xparquet "github.com/xitongsys/parquet-go/parquet"
	"github.com/xitongsys/parquet-go/reader"
	"github.com/xitongsys/parquet-go/source"

	"millrace/schemas"
)

// FileInfo describes a Parquet file as an independent reader
// (xitongsys/parquet-go) sees it.
type FileInfo struct {
	Path      string
	Size      int64
	Rows      int64
	RowGroups []RowGroupInfo
	Columns   []ColumnInfo
	// Codec is the compression of the column chunks ("ZSTD", "SNAPPY"), or
	// "mixed" when they differ.
	Codec string
	// Metadata is the footer's key-value metadata.
	Metadata map[string]string
	// Schema, SchemaVersion and SchemaFingerprint come from the metadata
	// ("", 0 and "" when absent).
	Schema            string
	SchemaVersion     int
	SchemaFingerprint string
	// TimeColumn is the event-time column (the schema's TimeField, else "ts");
	// MinTime and MaxTime come from its column statistics, when HasTime.
	TimeColumn       string
	HasTime          bool
	MinTime, MaxTime time.Time
}

// RowGroupInfo describes one row group.
type RowGroupInfo struct {
	Rows             int64
	CompressedBytes  int64
	UncompressedSize int64
}

// ColumnInfo describes one leaf column.
type ColumnInfo struct {
	Path       string // dotted, e.g. "fields.key_value.key"
	Type       string // physical type
	Logical    string // logical or converted type, "" if none
	Repetition string
	Dictionary bool // some chunk is dictionary-encoded
}

// Inspect reads the footer of the Parquet file at path.
func Inspect(path string) (*FileInfo, error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return InspectReader(path, f, size)
}

// openFile opens a local file and returns its size.
func openFile(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// InspectReader reads the footer of a Parquet file of size bytes read from r
// (a local file, an object in S3); name is the file's name in the result and
// in errors.
func InspectReader(name string, r io.ReaderAt, size int64) (info *FileInfo, err error) {
	// xitongsys/parquet-go panics on some malformed footers instead of
	// returning an error; a bad file must not take the CLI or a test down.
	defer func() {
		if r := recover(); r != nil {
			info, err = nil, fmt.Errorf("parquet: %s: unreadable footer: %v", name, r)
		}
	}()
	pr := &reader.ParquetReader{PFile: newAtFile(name, r, size)}
	if err := pr.ReadFooter(); err != nil {
		return nil, fmt.Errorf("parquet: %s: %w", name, err)
	}
	return describe(name, size, pr.Footer), nil
}

// InspectDir inspects every *.parquet file under dir, in path order, skipping
// temporary files (names starting with ".").
func InspectDir(dir string) ([]*FileInfo, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.HasPrefix(d.Name(), ".") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	infos := make([]*FileInfo, 0, len(paths))
	for _, p := range paths {
		info, err := Inspect(p)
		if err != nil {
			return infos, err
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func describe(path string, size int64, footer *xparquet.FileMetaData) *FileInfo {
	info := &FileInfo{Path: path, Size: size, Rows: footer.NumRows, Metadata: map[string]string{}}
	for _, kv := range footer.KeyValueMetadata {
		if kv.Value != nil {
			info.Metadata[kv.Key] = *kv.Value
		}
	}
	info.Schema = info.Metadata[schemas.MetaSchemaName]
	info.SchemaVersion, _ = strconv.Atoi(info.Metadata[schemas.MetaSchemaVersion])
	info.SchemaFingerprint = info.Metadata[schemas.MetaSchemaFingerprint]
	info.TimeColumn = "ts"
	if s, err := schemas.ByName(info.Schema); err == nil {
		info.TimeColumn = s.TimeField
	}

	// Leaf columns in schema order, with the unit of the time column.
	unit := int64(0) // multiplier to nanoseconds
	var walk func(i int, prefix string) int
	walk = func(i int, prefix string) int {
		el := footer.Schema[i]
		name := el.Name
		if prefix != "" {
			name = prefix + "." + el.Name
		}
		if el.GetNumChildren() > 0 {
			next := i + 1
			for c := int32(0); c < el.GetNumChildren(); c++ {
				next = walk(next, name)
			}
			return next
		}
		col := ColumnInfo{Path: name, Repetition: el.GetRepetitionType().String()}
		if el.Type != nil {
			col.Type = el.Type.String()
		}
		switch {
		case el.LogicalType != nil && el.LogicalType.TIMESTAMP != nil:
			ts := el.LogicalType.TIMESTAMP
			col.Logical = "TIMESTAMP(" + timeUnitName(ts.Unit) + ", utc=" + strconv.FormatBool(ts.IsAdjustedToUTC) + ")"
			if name == info.TimeColumn {
				unit = timeUnitNanos(ts.Unit)
			}
		case el.ConvertedType != nil:
			col.Logical = el.ConvertedType.String()
			if name == info.TimeColumn {
				switch *el.ConvertedType {
				case xparquet.ConvertedType_TIMESTAMP_MICROS:
					unit = 1000
				case xparquet.ConvertedType_TIMESTAMP_MILLIS:
					unit = 1e6
				}
			}
		}
		info.Columns = append(info.Columns, col)
		return i + 1
	}
	if len(footer.Schema) > 0 {
		next := 1
		for c := int32(0); c < footer.Schema[0].GetNumChildren(); c++ {
			next = walk(next, "")
		}
	}

	codecs := map[string]bool{}
	dict := map[string]bool{}
	var minT, maxT int64
	for _, rg := range footer.RowGroups {
		rgi := RowGroupInfo{Rows: rg.NumRows, UncompressedSize: rg.TotalByteSize}
		for _, cc := range rg.Columns {
			md := cc.MetaData
			if md == nil {
				continue
			}
			rgi.CompressedBytes += md.TotalCompressedSize
			codecs[md.Codec.String()] = true
			p := strings.Join(md.PathInSchema, ".")
			for _, e := range md.Encodings {
				if e == xparquet.Encoding_PLAIN_DICTIONARY || e == xparquet.Encoding_RLE_DICTIONARY {
					dict[p] = true
				}
			}
			if p != info.TimeColumn || unit == 0 || md.Statistics == nil {
				continue
			}
			lo, hi := md.Statistics.MinValue, md.Statistics.MaxValue
			if lo == nil || hi == nil {
				lo, hi = md.Statistics.Min, md.Statistics.Max
			}
			if len(lo) != 8 || len(hi) != 8 {
				continue
			}
			l, h := int64(binary.LittleEndian.Uint64(lo)), int64(binary.LittleEndian.Uint64(hi))
			if !info.HasTime || l < minT {
				minT = l
			}
			if !info.HasTime || h > maxT {
				maxT = h
			}
			info.HasTime = true
		}
		info.RowGroups = append(info.RowGroups, rgi)
	}
	for i := range info.Columns {
		info.Columns[i].Dictionary = dict[info.Columns[i].Path]
	}
	if info.HasTime {
		info.MinTime = time.Unix(0, minT*unit).UTC()
		info.MaxTime = time.Unix(0, maxT*unit).UTC()
	}
	switch len(codecs) {
	case 0:
	case 1:
		for c := range codecs {
			info.Codec = c
		}
	default:
		info.Codec = "mixed"
	}
	return info
}

func timeUnitName(u *xparquet.TimeUnit) string {
	switch {
	case u == nil:
		return "?"
	case u.MILLIS != nil:
		return "MILLIS"
	case u.MICROS != nil:
		return "MICROS"
	case u.NANOS != nil:
		return "NANOS"
	}
	return "?"
}

func timeUnitNanos(u *xparquet.TimeUnit) int64 {
	switch {
	case u == nil:
		return 0
	case u.MILLIS != nil:
		return 1e6
	case u.MICROS != nil:
		return 1e3
	case u.NANOS != nil:
		return 1
	}
	return 0
}

// WriteText prints the description for a terminal, as `millrace lake inspect` shows it.
func (info *FileInfo) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "file: %s (%d bytes)\n", info.Path, info.Size)
	if info.Schema != "" {
		fmt.Fprintf(&b, "schema: %s v%d", info.Schema, info.SchemaVersion)
		if info.SchemaFingerprint != "" {
			fmt.Fprintf(&b, " (fingerprint %s)", info.SchemaFingerprint)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "rows: %d\nrow groups: %d\ncodec: %s\n", info.Rows, len(info.RowGroups), info.Codec)
	for i, rg := range info.RowGroups {
		fmt.Fprintf(&b, "  row group %d: %d rows, %d bytes compressed, %d uncompressed\n", i, rg.Rows, rg.CompressedBytes, rg.UncompressedSize)
	}
	if info.HasTime {
		fmt.Fprintf(&b, "%s: min %s max %s\n", info.TimeColumn,
			info.MinTime.Format(time.RFC3339Nano), info.MaxTime.Format(time.RFC3339Nano))
	}
	b.WriteString("columns:\n")
	for _, c := range info.Columns {
		fmt.Fprintf(&b, "  %s %s %s", c.Path, c.Repetition, c.Type)
		if c.Logical != "" {
			fmt.Fprintf(&b, " %s", c.Logical)
		}
		if c.Dictionary {
			b.WriteString(" dict")
		}
		b.WriteString("\n")
	}
	keys := make([]string, 0, len(info.Metadata))
	for k := range info.Metadata {
		if k != "ARROW:schema" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		b.WriteString("metadata:\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s = %s\n", k, info.Metadata[k])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadRows reads every row of the Parquet file at path into values of T, a
// struct with xitongsys/parquet-go tags. Tags must match each column's
// nullability exactly (required: plain field; optional: pointer with
// repetitiontype=OPTIONAL); a mismatch, which the library would panic on, is
// returned as an error.
func ReadRows[T any](path string) (rows []T, err error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	defer func() {
		if r := recover(); r != nil {
			rows, err = nil, fmt.Errorf("parquet: read %s: %v (struct tags must match the file's schema)", path, r)
		}
	}()
	pr, err := reader.NewParquetReader(newAtFile(path, f, size), new(T), 1)
	if err != nil {
		return nil, fmt.Errorf("parquet: read %s: %w", path, err)
	}
	defer pr.ReadStop()
	rows = make([]T, pr.GetNumRows())
	if len(rows) == 0 {
		return rows, nil
	}
	if err := pr.Read(&rows); err != nil {
		return nil, fmt.Errorf("parquet: read %s: %w", path, err)
	}
	return rows, nil
}

// atFile adapts an io.ReaderAt of known size to xitongsys/parquet-go's
// source.ParquetFile, without pulling in parquet-go-source and its cloud
// SDKs. Each handle has its own position; closing one closes nothing (the
// caller owns r).
type atFile struct {
	*io.SectionReader
	name string
	r    io.ReaderAt
	size int64
}

func newAtFile(name string, r io.ReaderAt, size int64) *atFile {
	return &atFile{SectionReader: io.NewSectionReader(r, 0, size), name: name, r: r, size: size}
}

// Open returns another handle on the same bytes: the reader opens one per
// column. Column chunks stored in other files (a path in the footer) are
// refused: the lake never writes them, and a footer must not make the
// reader open arbitrary paths.
func (f *atFile) Open(name string) (source.ParquetFile, error) {
	if name != "" {
		return nil, fmt.Errorf("parquet: %s: column chunk in another file (%s) is not supported", f.name, name)
	}
	return newAtFile(f.name, f.r, f.size), nil
}

// Create is part of the interface; this adapter only reads.
func (f *atFile) Create(string) (source.ParquetFile, error) {
	return nil, fmt.Errorf("parquet: %s: read-only", f.name)
}

// Write is part of the interface; this adapter only reads.
func (f *atFile) Write([]byte) (int, error) {
	return 0, fmt.Errorf("parquet: %s: read-only", f.name)
}

// Close is a no-op: the caller closes the underlying reader.
func (f *atFile) Close() error { return nil }
