package lakeread

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// valueOf returns row i of a column as a plain Go value: nil for NULL,
// string, int64, float64, bool, time.Time (UTC) for a timestamp,
// map[string]any for a map (the `fields` and `labels` columns), and for any
// other type what Arrow gives for JSON.
func valueOf(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Boolean:
		return a.Value(i)
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC()
	case *array.Map:
		keys, items := a.Keys(), a.Items()
		start, end := a.ValueOffsets(i)
		m := make(map[string]any, end-start)
		for j := int(start); j < int(end); j++ {
			if k, ok := valueOf(keys, j).(string); ok {
				m[k] = valueOf(items, j)
			}
		}
		return m
	case *array.Dictionary:
		return valueOf(a.Dictionary(), a.GetValueIndex(i))
	}
	return a.GetOneForMarshal(i)
}
