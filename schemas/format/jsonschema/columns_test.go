package jsonschema

import (
	"slices"
	"strings"
	"testing"

	"millrace/schemas/format"
)

// TestColumns: each property as its column. JSON Schema's instance types
// (draft 2020-12 core, "Instance Data Model") and the date-time format
// (RFC 3339, validation spec "Dates, Times, and Duration"); a property is
// optional unless "required" lists it.
func TestColumns(t *testing.T) {
	t.Parallel()
	text := `{"type":"object","required":["id","n"],"properties":{
		"id":{"type":"string"},
		"n":{"type":"integer"},
		"x":{"type":"number"},
		"ok":{"type":"boolean"},
		"at":{"type":"string","format":"date-time"},
		"maybe":{"type":["null","integer"]},
		"either":{"type":["string","integer"]},
		"obj":{"type":"object"},
		"list":{"type":"array","items":{"type":"string"}},
		"ref":{"$ref":"#/definitions/s"},
		"any":{}},
		"definitions":{"s":{"type":"string"}}}`
	s, err := Type.Parse(text, nil, format.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.(format.Columnar).Columns()
	if err != nil {
		t.Fatal(err)
	}
	want := []format.Column{
		{Name: "any", Kind: format.KindJSON, Nullable: true},
		{Name: "at", Kind: format.KindTimestamp, Unit: format.UnitRFC3339, Nullable: true},
		{Name: "either", Kind: format.KindJSON, Nullable: true},
		{Name: "id", Kind: format.KindString},
		{Name: "list", Kind: format.KindJSON, Nullable: true},
		{Name: "maybe", Kind: format.KindInt64, Nullable: true},
		{Name: "n", Kind: format.KindInt64},
		{Name: "obj", Kind: format.KindJSON, Nullable: true},
		{Name: "ok", Kind: format.KindBool, Nullable: true},
		{Name: "ref", Kind: format.KindString, Nullable: true},
		{Name: "x", Kind: format.KindFloat64, Nullable: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Columns:\n got %v\nwant %v", got, want)
	}
}

// TestColumnsNotAnObject: only an object's properties are columns.
func TestColumnsNotAnObject(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`{"type":"string"}`, `{"type":["object","null"]}`, `{}`} {
		s, err := Type.Parse(text, nil, format.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.(format.Columnar).Columns(); err == nil || !strings.Contains(err.Error(), "not of type object") {
			t.Errorf("Columns of %s: %v, want an error saying it is not an object", text, err)
		}
	}
}
