package protobuf

import (
	"slices"
	"strings"
	"testing"

	"millrace/schemas/format"
)

// TestColumns: each field of the first message as its column; presence
// (protobuf.dev, "Field Presence": proto3 optional, oneof members and
// messages have it, implicit scalars, repeated fields and maps do not)
// makes a column nullable.
func TestColumns(t *testing.T) {
	t.Parallel()
	text := `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
enum Status { NEW = 0; PAID = 1; }
message Order {
  bool b = 1;
  int32 i32 = 2;
  sint64 s64 = 3;
  uint32 u32 = 4;
  fixed64 f64 = 5;
  float f = 6;
  double d = 7;
  string s = 8;
  bytes by = 9;
  Status status = 10;
  google.protobuf.Timestamp at = 11;
  optional string note = 12;
  Item item = 13;
  repeated string tags = 14;
  map<string, int64> counts = 15;
  oneof pay { string card = 16; int64 points = 17; }
}
message Item { string sku = 1; }`
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
		{Name: "i32", Kind: format.KindInt32},
		{Name: "s64", Kind: format.KindInt64},
		{Name: "u32", Kind: format.KindInt64},
		{Name: "f64", Kind: format.KindInt64},
		{Name: "f", Kind: format.KindFloat32},
		{Name: "d", Kind: format.KindFloat64},
		{Name: "s", Kind: format.KindString},
		{Name: "by", Kind: format.KindBytes},
		{Name: "status", Kind: format.KindString},
		{Name: "at", Kind: format.KindTimestamp, Unit: format.UnitSecondsNanos, Nullable: true},
		{Name: "note", Kind: format.KindString, Nullable: true},
		{Name: "item", Kind: format.KindJSON, Nullable: true},
		{Name: "tags", Kind: format.KindJSON},
		{Name: "counts", Kind: format.KindJSON},
		{Name: "card", Kind: format.KindString, Nullable: true},
		{Name: "points", Kind: format.KindInt64, Nullable: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Columns:\n got %v\nwant %v", got, want)
	}
}

// TestColumnsNoMessage: a file of enums only has no row shape.
func TestColumnsNoMessage(t *testing.T) {
	t.Parallel()
	s, err := Type.Parse(`syntax = "proto3"; enum E { A = 0; }`, nil, format.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.(format.Columnar).Columns(); err == nil || !strings.Contains(err.Error(), "no message") {
		t.Errorf("Columns: %v, want an error saying there is no message", err)
	}
}
