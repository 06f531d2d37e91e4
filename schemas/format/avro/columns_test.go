package avro

import (
	"slices"
	"strings"
	"testing"

	"millrace/schemas/format"
)

// TestColumns: each Avro type as its column (the primitive and logical
// types of the Avro specification 1.11, "Primitive Types" and "Logical
// Types"; a union with null is how the spec spells an optional field).
func TestColumns(t *testing.T) {
	t.Parallel()
	text := `{"type":"record","name":"r","namespace":"n","fields":[
		{"name":"b","type":"boolean"},
		{"name":"i","type":"int"},
		{"name":"l","type":"long"},
		{"name":"f","type":"float"},
		{"name":"d","type":"double"},
		{"name":"s","type":"string"},
		{"name":"by","type":"bytes"},
		{"name":"fx","type":{"type":"fixed","name":"F","size":4}},
		{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},
		{"name":"e2","type":"E"},
		{"name":"ms","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"us","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
		{"name":"local","type":{"type":"long","logicalType":"local-timestamp-millis"}},
		{"name":"date","type":{"type":"int","logicalType":"date"}},
		{"name":"opt","type":["null","string"],"default":null},
		{"name":"either","type":["string","long"]},
		{"name":"rec","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},
		{"name":"optrec","type":["null","Inner"],"default":null},
		{"name":"arr","type":{"type":"array","items":"int"}},
		{"name":"m","type":{"type":"map","values":"string"}}]}`
	s, err := Type.Parse(text, nil, format.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.(format.Columnar).Columns()
	if err != nil {
		t.Fatal(err)
	}
	want := []format.Column{
		{Name: "b", Kind: format.KindBool},
		{Name: "i", Kind: format.KindInt32},
		{Name: "l", Kind: format.KindInt64},
		{Name: "f", Kind: format.KindFloat32},
		{Name: "d", Kind: format.KindFloat64},
		{Name: "s", Kind: format.KindString},
		{Name: "by", Kind: format.KindBytes},
		{Name: "fx", Kind: format.KindBytes},
		{Name: "e", Kind: format.KindString},
		{Name: "e2", Kind: format.KindString},
		{Name: "ms", Kind: format.KindTimestamp, Unit: format.UnitMillis},
		{Name: "us", Kind: format.KindTimestamp, Unit: format.UnitMicros, Nullable: true},
		{Name: "local", Kind: format.KindInt64},
		{Name: "date", Kind: format.KindInt32},
		{Name: "opt", Kind: format.KindString, Nullable: true},
		{Name: "either", Kind: format.KindJSON},
		{Name: "rec", Kind: format.KindJSON},
		{Name: "optrec", Kind: format.KindJSON, Nullable: true},
		{Name: "arr", Kind: format.KindJSON},
		{Name: "m", Kind: format.KindJSON},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Columns:\n got %v\nwant %v", got, want)
	}
}

// TestColumnsNotARecord: only a record has fields to be columns.
func TestColumnsNotARecord(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`"string"`, `{"type":"array","items":"int"}`, `["null","string"]`} {
		s, err := Type.Parse(text, nil, format.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.(format.Columnar).Columns(); err == nil || !strings.Contains(err.Error(), "not a record") {
			t.Errorf("Columns of %s: %v, want an error saying it is not a record", text, err)
		}
	}
}
