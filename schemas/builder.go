package schemas

import (
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// Builder accumulates rows of one schema in Arrow builders and hands them out as
// record batches. Not safe for concurrent use.
type Builder struct {
	schema  *Schema
	rb      *array.RecordBuilder
	columns []columnAppender
	strings []*array.StringBuilder // the string and JSON columns' builders
	rows    int
	bytes   int64
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
	for i, f := range s.Fields {
		b.columns[i] = b.appenderFor(i)
		if f.Type == TypeString || f.Type == TypeJSON {
			b.strings = append(b.strings, b.rb.Field(i).(*array.StringBuilder))
		}
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
		sb := fb.(*array.StringBuilder)
		return func(v *value) {
			if !v.set {
				sb.AppendNull()
				return
			}
			sb.BinaryBuilder.Append(v.buf)
		}
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
func (b *Builder) NewRecord() arrow.Record {
	// NewRecord hands the builders' buffers to the record and leaves them
	// empty; growing them again by doubling, batch after batch, cost more
	// than the appends (copying and clearing). The next batch is sized like
	// this one, so reserve that much at once.
	rows := b.rows
	var data [16]int
	dataLens := data[:0]
	for _, sb := range b.strings {
		dataLens = append(dataLens, sb.DataLen())
	}
	rec := b.rb.NewRecord()
	b.rows, b.bytes = 0, 0
	for _, fb := range b.rb.Fields() {
		fb.Reserve(rows)
	}
	for i, sb := range b.strings {
		sb.ReserveData(dataLens[i])
	}
	return rec
}

// Release frees the builders' memory.
func (b *Builder) Release() { b.rb.Release() }
