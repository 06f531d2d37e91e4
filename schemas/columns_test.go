package schemas

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"millrace/schemas/format"
)

// TestFromColumns: a field per column of its type, every one optional,
// and the record-time column when no field is the event's time.
func TestFromColumns(t *testing.T) {
	t.Parallel()
	cols := []format.Column{{Name: "n", Kind: format.KindInt32}, {Name: "at", Kind: format.KindTimestamp, Unit: format.UnitMillis}}
	s, err := FromColumns("registry", "", cols)
	if err != nil {
		t.Fatal(err)
	}
	if s.TimeField != RecordTimeField || len(s.Fields) != 3 || s.Fields[0].Type != TypeInt64 || s.Fields[0].Required ||
		!s.Fields[2].Required {
		t.Errorf("FromColumns without a time field: %+v", s.Fields)
	}
	if s, err = FromColumns("registry", "at", cols); err != nil || s.TimeField != "at" || len(s.Fields) != 2 {
		t.Errorf("FromColumns with time field at: %v, %v", s, err)
	}
	for _, bad := range [][]format.Column{
		{{Name: "dt", Kind: format.KindString}},
		{{Name: "a", Kind: format.KindString}, {Name: "A", Kind: format.KindString}},
		{{Name: RecordTimeField, Kind: format.KindString}},
	} {
		if _, err := FromColumns("registry", "", bad); err == nil {
			t.Errorf("FromColumns(%v) passed", bad)
		}
	}
}

// TestSetColumns: each kind's decoded values (as the format packages'
// Decode documents them) into its column, and the values that do not fit
// refused with the class a dead letter's reason names.
func TestSetColumns(t *testing.T) {
	t.Parallel()
	ms := format.Column{Name: "t", Kind: format.KindTimestamp, Unit: format.UnitMillis}
	at := time.Date(2024, 5, 1, 10, 0, 0, 123_000_000, time.UTC)
	cases := []struct {
		col   format.Column
		value any
		want  any   // Row.Get's value
		err   error // the class of the refusal
	}{
		{format.Column{Name: "b", Kind: format.KindBool}, true, true, nil},
		{format.Column{Name: "i", Kind: format.KindInt32}, int32(-7), int64(-7), nil},
		{format.Column{Name: "i", Kind: format.KindInt64}, uint64(math.MaxUint64), nil, ErrBadValue},
		{format.Column{Name: "i", Kind: format.KindInt64}, json.Number("12"), int64(12), nil},
		{format.Column{Name: "i", Kind: format.KindInt64}, "12", nil, ErrWrongType},
		{format.Column{Name: "f", Kind: format.KindFloat32}, float32(1.5), 1.5, nil},
		{format.Column{Name: "f", Kind: format.KindFloat64}, int64(3), 3.0, nil},
		{format.Column{Name: "s", Kind: format.KindString}, "x", "x", nil},
		{format.Column{Name: "s", Kind: format.KindString}, int32(1), nil, ErrWrongType},
		{format.Column{Name: "s", Kind: format.KindBytes}, []byte{0xff, 0}, "/wA=", nil},
		{ms, at.UnixMilli(), at, nil},
		{ms, int64(math.MaxInt64), nil, ErrBadTimestamp},
		{format.Column{Name: "t", Kind: format.KindTimestamp, Unit: format.UnitMicros}, at.UnixMicro(), at, nil},
		{format.Column{Name: "t", Kind: format.KindTimestamp, Unit: format.UnitSecondsNanos},
			map[string]any{"seconds": at.Unix(), "nanos": int32(123_000_000)}, at, nil},
		{format.Column{Name: "t", Kind: format.KindTimestamp, Unit: format.UnitSecondsNanos},
			map[string]any{"nanos": int32(-1)}, nil, ErrBadTimestamp},
		{format.Column{Name: "t", Kind: format.KindTimestamp, Unit: format.UnitRFC3339}, "2024-05-01T10:00:00.123Z", at, nil},
		{format.Column{Name: "j", Kind: format.KindJSON}, []any{int32(1), "a"}, `[1,"a"]`, nil},
		{format.Column{Name: "j", Kind: format.KindJSON}, map[string]any{"x": nil}, `{"x":null}`, nil},
		{format.Column{Name: "j", Kind: format.KindJSON}, math.NaN(), nil, ErrBadValue},
	}
	for _, tc := range cases {
		s, err := FromColumns("registry", "", []format.Column{tc.col})
		if err != nil {
			t.Fatal(err)
		}
		row := s.NewRow()
		err = row.SetColumns([]format.Column{tc.col}, map[string]any{tc.col.Name: tc.value})
		if tc.err != nil {
			var ve *ValidationError
			if !errors.Is(err, tc.err) || !errors.As(err, &ve) || ve.Field != tc.col.Name {
				t.Errorf("%v %#v: %v, want %v naming the field", tc.col, tc.value, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v %#v: %v", tc.col, tc.value, err)
			continue
		}
		got := row.Get(tc.col.Name)
		if gt, ok := got.(time.Time); ok {
			if !gt.Equal(tc.want.(time.Time)) {
				t.Errorf("%v %#v: %v, want %v", tc.col, tc.value, got, tc.want)
			}
		} else if got != tc.want {
			t.Errorf("%v %#v: %#v, want %#v", tc.col, tc.value, got, tc.want)
		}
	}
}

// TestSetColumnsTypeChange: a value whose schema gives a column another
// type than the table's is refused, saying both; a column the table lacks
// too, and a field the value lacks is null.
func TestSetColumnsTypeChange(t *testing.T) {
	t.Parallel()
	s, err := FromColumns("registry", "", []format.Column{{Name: "a", Kind: format.KindString}, {Name: "b", Kind: format.KindInt64}})
	if err != nil {
		t.Fatal(err)
	}
	row := s.NewRow()
	err = row.SetColumns([]format.Column{{Name: "a", Kind: format.KindInt64}}, map[string]any{"a": int64(1)})
	if !errors.Is(err, ErrWrongType) || !strings.Contains(err.Error(), "makes it int64, which lands as integer, and the table's column is string") {
		t.Errorf("a string -> int64: %v", err)
	}
	err = row.SetColumns([]format.Column{{Name: "c", Kind: format.KindInt64}}, map[string]any{"c": int64(1)})
	if !errors.Is(err, ErrWrongType) {
		t.Errorf("column c the table lacks: %v", err)
	}
	if err := row.SetColumns([]format.Column{{Name: "a", Kind: format.KindString}}, map[string]any{"a": "x"}); err != nil || row.Has(1) {
		t.Errorf("b absent: %v, set %v", err, row.Has(1))
	}
	// proto3: a scalar without presence is absent on the wire when zero.
	if err := row.SetColumns([]format.Column{{Name: "b", Kind: format.KindInt32}}, map[string]any{}); err != nil || row.Get("b") != int64(0) {
		t.Errorf("b absent, not nullable: %v, %v; want 0", err, row.Get("b"))
	}
	err = row.SetColumns([]format.Column{{Name: "b", Kind: format.KindInt32, Nullable: true}}, map[string]any{})
	if err != nil || row.Has(1) {
		t.Errorf("b absent, nullable: %v, set %v; want null", err, row.Has(1))
	}
}
