package schemas

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Builder accumulates rows of one schema in Arrow builders and hands them out as
// record batches. Not safe for concurrent use.
type Builder struct {
	schema  *Schema
	rb      *array.RecordBuilder // the columns that are not strings
	columns []columnAppender
	strings []*stringColumn // per field; nil where the field is not a string or JSON column
	rows    int
	bytes   int64
}

// stringColumn accumulates a string or JSON column as the Arrow layout itself
// (value offsets, the values' bytes, a validity bitmap) in Go slices. Arrow's
// StringBuilder cost more than the decoding of the strings: a call chain per
// value, and buffers cleared twice when reserved (by the allocator and again
// by the builder). The slices are handed to the record and never reused: the
// Parquet writer's statistics keep references into a record's values until its
// row group is written.
type stringColumn struct {
	offsets []int32 // offsets[i], offsets[i+1] delimit value i; starts with 0
	data    []byte
	valid   []byte // bit i set: value i is not null; in step with offsets
	nulls   int
}

// reset starts an empty column with room for rows values and dataLen bytes.
func (c *stringColumn) reset(rows, dataLen int) {
	c.offsets = make([]int32, 1, rows+1)
	c.data = make([]byte, 0, dataLen)
	c.valid = make([]byte, 0, (rows+7)/8)
	c.nulls = 0
}

func (c *stringColumn) append(v *value) {
	i := len(c.offsets) - 1
	if i%8 == 0 {
		c.valid = append(c.valid, 0)
	}
	if v.set {
		c.data = append(c.data, v.buf...)
		c.valid[i/8] |= 1 << (i % 8)
	} else {
		c.nulls++
	}
	c.offsets = append(c.offsets, int32(len(c.data)))
}

// newArray returns the column as an Arrow array of typ.
func (c *stringColumn) newArray(typ arrow.DataType) arrow.Array {
	rows := len(c.offsets) - 1
	var valid *memory.Buffer
	if c.nulls > 0 {
		valid = memory.NewBufferBytes(c.valid)
	}
	data := array.NewData(typ, rows, []*memory.Buffer{valid,
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.offsets)),
		memory.NewBufferBytes(c.data)}, nil, c.nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// columnAppender appends one field's value (or a null) to its column builder.
type columnAppender func(v *value)

// NewBuilder returns a builder for the schema. Call Release when done.
func (s *Schema) NewBuilder(mem memory.Allocator) *Builder {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := &Builder{schema: s, rb: array.NewRecordBuilder(mem, s.arrow)}
	b.columns = make([]columnAppender, len(s.Fields))
	b.strings = make([]*stringColumn, len(s.Fields))
	for i := range s.Fields {
		b.columns[i] = b.appenderFor(i)
	}
	return b
}

func (b *Builder) appenderFor(i int) columnAppender {
	fb := b.rb.Field(i)
	switch b.schema.Fields[i].Type {
	case TypeInt64:
		ib := fb.(*array.Int64Builder)
		return func(v *value) {
			if !v.set {
				ib.AppendNull()
				return
			}
			ib.Append(v.num)
		}
	case TypeFloat64:
		fl := fb.(*array.Float64Builder)
		return func(v *value) {
			if !v.set {
				fl.AppendNull()
				return
			}
			fl.Append(v.float)
		}
	case TypeBool:
		bb := fb.(*array.BooleanBuilder)
		return func(v *value) {
			if !v.set {
				bb.AppendNull()
				return
			}
			bb.Append(v.bool)
		}
	case TypeTimestamp:
		tb := fb.(*array.TimestampBuilder)
		return func(v *value) {
			if !v.set {
				tb.AppendNull()
				return
			}
			tb.Append(arrow.Timestamp(v.num))
		}
	case TypeStringMap:
		mb := fb.(*array.MapBuilder)
		kb := mb.KeyBuilder().(*array.StringBuilder)
		vb := mb.ItemBuilder().(*array.StringBuilder)
		return func(v *value) {
			if !v.set {
				mb.AppendNull()
				return
			}
			mb.Append(true)
			for j := 0; j < len(v.spans); j += 4 {
				kb.BinaryBuilder.Append(v.buf[v.spans[j]:v.spans[j+1]])
				vb.BinaryBuilder.Append(v.buf[v.spans[j+2]:v.spans[j+3]])
			}
		}
	default: // TypeString, TypeJSON
		c := &stringColumn{}
		c.reset(0, 0)
		b.strings[i] = c
		return c.append
	}
}

// Append adds the row. The row must be of the builder's schema.
func (b *Builder) Append(r *Row) {
	for i, app := range b.columns {
		v := &r.vals[i]
		app(v)
		b.bytes += 8 + int64(len(v.buf))
	}
	b.rows++
}

// Len is the number of rows appended since the last NewRecord.
func (b *Builder) Len() int { return b.rows }

// Bytes estimates the uncompressed size of the rows appended since the last
// NewRecord: their payload bytes plus 8 per value.
func (b *Builder) Bytes() int64 { return b.bytes }

// NewRecord returns the rows appended so far as a record batch (the caller
// releases it) and starts a new, empty one.
func (b *Builder) NewRecord() arrow.RecordBatch {
	// NewRecord hands the builders' buffers to the record and leaves them
	// empty; growing them again by doubling, batch after batch, cost more
	// than the appends (copying and clearing). The next batch is sized like
	// this one, so reserve that much at once.
	rows := b.rows
	fields := b.rb.Fields()
	columns := make([]arrow.Array, len(fields))
	for i, fb := range fields {
		if c := b.strings[i]; c != nil {
			columns[i] = c.newArray(b.schema.arrow.Field(i).Type)
			c.reset(rows, len(c.data))
			continue
		}
		columns[i] = fb.NewArray()
		fb.Reserve(rows)
	}
	rec := array.NewRecordBatch(b.schema.arrow, columns, int64(rows))
	for _, col := range columns {
		col.Release()
	}
	b.rows, b.bytes = 0, 0
	return rec
}

// Release frees the builders' memory.
func (b *Builder) Release() { b.rb.Release() }
