package iceberg

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// DeadLetterSuffix ends the name of a topic's dead-letter table: records of
// topic "clicks" the table cannot take land in "clicks~dlq", as Redpanda's
// Iceberg topics name theirs.
const DeadLetterSuffix = "~dlq"

// The dead-letter table's columns.
const (
	// DeadLetterTopic is the topic the record came from (string).
	DeadLetterTopic = "topic"
	// DeadLetterPartition is the Kafka partition the record came from (int).
	DeadLetterPartition = "partition"
	// DeadLetterOffset is the record's offset in it (long); for a skipped
	// batch, its first skipped offset.
	DeadLetterOffset = "offset"
	// DeadLetterLastOffset is a skipped batch's last offset (long; null
	// for a single record): the sink skipped offset through last_offset.
	DeadLetterLastOffset = "last_offset"
	// DeadLetterRaw is the record's value as the sink read it (binary;
	// null for a skipped batch, whose records could not be read).
	DeadLetterRaw = "raw"
	// DeadLetterReason says why the table could not take it (string).
	DeadLetterReason = "reason"
	// DeadLetterTime is the Kafka record's timestamp (timestamptz; a
	// batch's first timestamp, null when its header could not be read),
	// not the time it was dead-lettered: a roll replayed after a crash must
	// write the same rows, as every other file of the sink does.
	DeadLetterTime = "time"
)

// DeadLetterSchema is the schema of a dead-letter table. Topic, partition
// and offset are required: they are how a record is found again.
func DeadLetterSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: DeadLetterTopic, Type: iceberg.PrimitiveTypes.String, Required: true,
			Doc: "Kafka topic of the record"},
		iceberg.NestedField{ID: 2, Name: DeadLetterPartition, Type: iceberg.PrimitiveTypes.Int32, Required: true,
			Doc: "Kafka partition of the record"},
		iceberg.NestedField{ID: 3, Name: DeadLetterOffset, Type: iceberg.PrimitiveTypes.Int64, Required: true,
			Doc: "offset of the record in its partition (a skipped batch's first offset)"},
		iceberg.NestedField{ID: 4, Name: DeadLetterLastOffset, Type: iceberg.PrimitiveTypes.Int64,
			Doc: "a skipped batch's last offset; null for one record"},
		iceberg.NestedField{ID: 5, Name: DeadLetterRaw, Type: iceberg.PrimitiveTypes.Binary,
			Doc: "the record's value, as read"},
		iceberg.NestedField{ID: 6, Name: DeadLetterReason, Type: iceberg.PrimitiveTypes.String, Required: true,
			Doc: "why the topic's table could not take the record"},
		iceberg.NestedField{ID: 7, Name: DeadLetterTime, Type: iceberg.PrimitiveTypes.TimestampTz,
			Doc: "the Kafka record's timestamp"},
	)
}

// DeadLetterTable loads topic's dead-letter table (topic + DeadLetterSuffix),
// creating it when it does not exist. It is unpartitioned: dead letters
// are few, time-partitioned files of them would be mostly tiny, and a
// skipped batch whose header could not be read has no time to partition
// by. Its rolls commit with CommitRoll like the topic's own.
func (c *Catalog) DeadLetterTable(ctx context.Context, topic string) (*table.Table, error) {
	sc := DeadLetterSchema()
	return c.loadOrCreate(ctx, topic+DeadLetterSuffix, sc, func() (iceberg.PartitionSpec, error) {
		return PartitionSpec(PartitionNone, sc, "", "")
	})
}

// DeadLetterRow is one row of a dead-letter table.
type DeadLetterRow struct {
	Topic     string
	Partition int32
	Offset    int64
	// LastOffset is a skipped batch's last offset; -1 for one record.
	LastOffset int64
	Raw        []byte // nil for a skipped batch
	Reason     string
	Time       time.Time // zero when unknown
}

// WriteDeadLetters writes rows, in order, as a Parquet file of tbl (a
// dead-letter table) to w, and returns the file's footer and size for
// DataFile. The file carries no field IDs: the table's name mapping reads
// it, as it reads the sink's data files.
func WriteDeadLetters(w io.Writer, tbl *table.Table, rows []DeadLetterRow) (*metadata.FileMetaData, int64, error) {
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		return nil, 0, fmt.Errorf("iceberg: the dead-letter schema: %w", err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, r := range rows {
		for i, f := range sc.Fields() {
			appendDeadLetterField(b.Field(i), f.Name, r)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	// The writer closes what it writes to when it can: the caller's object
	// is published or aborted by the caller, never closed here.
	counter := &countingWriter{w: writeOnly{w}}
	pw, err := pqarrow.NewFileWriter(sc, counter,
		parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithStats(true)),
		pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, 0, fmt.Errorf("iceberg: dead-letter file: %w", err)
	}
	if err := pw.Write(rec); err != nil {
		pw.Close()
		return nil, 0, fmt.Errorf("iceberg: dead-letter file: %w", err)
	}
	if err := pw.Close(); err != nil {
		return nil, 0, fmt.Errorf("iceberg: dead-letter file: %w", err)
	}
	footer, err := pw.FileMetadata()
	if err != nil {
		return nil, 0, err
	}
	return footer, counter.n, nil
}

// appendDeadLetterField appends r's value of column name to fb. Columns
// the table has beyond DeadLetterSchema's (none today) read as null.
func appendDeadLetterField(fb array.Builder, name string, r DeadLetterRow) {
	switch name {
	case DeadLetterTopic:
		fb.(*array.StringBuilder).Append(r.Topic)
	case DeadLetterPartition:
		fb.(*array.Int32Builder).Append(r.Partition)
	case DeadLetterOffset:
		fb.(*array.Int64Builder).Append(r.Offset)
	case DeadLetterLastOffset:
		if r.LastOffset < 0 {
			fb.AppendNull()
		} else {
			fb.(*array.Int64Builder).Append(r.LastOffset)
		}
	case DeadLetterRaw:
		if r.Raw == nil {
			fb.AppendNull()
		} else {
			fb.(*array.BinaryBuilder).Append(r.Raw)
		}
	case DeadLetterReason:
		fb.(*array.StringBuilder).Append(r.Reason)
	case DeadLetterTime:
		if r.Time.IsZero() {
			fb.AppendNull()
		} else {
			fb.(*array.TimestampBuilder).Append(arrow.Timestamp(r.Time.UnixMicro()))
		}
	default:
		fb.AppendNull()
	}
}

// writeOnly hides every method of its writer but Write (countingWriter
// forwards Close).
type writeOnly struct{ io.Writer }
