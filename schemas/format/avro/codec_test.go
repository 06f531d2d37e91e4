package avro

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"millrace/schemas/format"
)

// everything has a field of every primitive, an array, a map, unions, an
// enum, a fixed, a nested record, and logical types.
const everything = `{"type":"record","name":"Everything","namespace":"t","fields":[
	{"name":"n","type":"null"},
	{"name":"b","type":"boolean"},
	{"name":"i","type":"int"},
	{"name":"l","type":"long"},
	{"name":"f","type":"float"},
	{"name":"d","type":"double"},
	{"name":"s","type":"string"},
	{"name":"by","type":"bytes"},
	{"name":"arr","type":{"type":"array","items":"long"}},
	{"name":"m","type":{"type":"map","values":"string"}},
	{"name":"u","type":["null","long","double","string"]},
	{"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
	{"name":"fx","type":{"type":"fixed","name":"Four","size":4}},
	{"name":"in","type":{"type":"record","name":"Inner","fields":[
		{"name":"c","type":"Color"},
		{"name":"opt","type":["null","Inner"],"default":null}]}},
	{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
	{"name":"defaulted","type":"string","default":"dflt"}
]}`

// jsonValue decodes text as encoding/json does for Encode's callers.
func jsonValue(t *testing.T, text string, useNumber bool) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustParse(t, everything)
	input := `{"n":null,"b":true,"i":-7,"l":9007199254740993,"f":1.5,"d":-2.25,"s":"héllo","by":"\u0000\u00ff",
		"arr":[1,2,3],"m":{"k":"v"},"u":3,"e":"GREEN","fx":"abcd",
		"in":{"c":"RED","opt":{"c":"GREEN"}},"ts":1700000000123,"dec":"12.34"}`
	want := map[string]any{
		"n": nil, "b": true, "i": int32(-7), "l": int64(9007199254740993), "f": float32(1.5), "d": -2.25,
		"s": "héllo", "by": []byte{0, 0xff}, "arr": []any{int64(1), int64(2), int64(3)},
		"m": map[string]any{"k": "v"}, "u": int64(3), "e": "GREEN", "fx": []byte("abcd"),
		"in":        map[string]any{"c": "RED", "opt": map[string]any{"c": "GREEN", "opt": nil}},
		"ts":        int64(1700000000123),
		"dec":       []byte{0x04, 0xd2}, // 1234, unscaled
		"defaulted": "dflt",
	}
	// json.Number keeps the long above 2^53 exact.
	data, err := s.Encode(jsonValue(t, input, true))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(Encode(v)) =\n%#v\nwant\n%#v", got, want)
	}
	// What Decode returns encodes back to the same bytes.
	again, err := s.Encode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("Encode(Decode(data)) = %x, want %x", again, data)
	}
	if _, err := s.Decode(append(data, 0)); err == nil || !strings.Contains(err.Error(), "1 bytes are left") {
		t.Errorf("Decode with a byte left over = %v", err)
	}
	if _, err := s.Decode(data[:len(data)-3]); err == nil {
		t.Errorf("Decode of a truncated value succeeded")
	}
}

// TestEncodeUnion: nil is null; a one-key object naming a branch is that
// branch; otherwise the first branch in order that the value fits.
func TestEncodeUnion(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `["null","int","long","double",{"type":"enum","name":"E","symbols":["A"]},"string",
		{"type":"record","name":"R","fields":[{"name":"x","type":"int"}]},{"type":"map","values":"int"}]`)
	cases := []struct {
		value  string
		branch byte // the zigzag-encoded branch index the value is written with
	}{
		{`null`, 0},
		{`3`, 2},            // int
		{`3000000000`, 4},   // too big for int: long
		{`3.5`, 6},          // not whole: double
		{`{"double":3}`, 6}, // tagged
		{`"A"`, 8},          // an enum symbol
		{`"B"`, 10},         // not a symbol: string
		{`{"x":1}`, 12},     // fits the record
		{`{"y":1}`, 14},     // not a field of R: the map
		{`{"R":{"x":2}}`, 12},
	}
	for _, tc := range cases {
		data, err := s.Encode(jsonValue(t, tc.value, false))
		if err != nil {
			t.Errorf("Encode(%s): %v", tc.value, err)
			continue
		}
		if data[0] != tc.branch {
			t.Errorf("Encode(%s) took branch %d, want %d", tc.value, data[0]/2, tc.branch/2)
		}
	}
	if _, err := s.Encode(true); err == nil || !strings.Contains(err.Error(), "fits none of the union's branches") {
		t.Errorf("Encode(true) = %v", err)
	}
}

func TestEncodeErrors(t *testing.T) {
	t.Parallel()
	s := mustParse(t, record(`{"name":"i","type":"int"}`, `{"name":"f","type":"float"}`, `{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}`))
	cases := []struct{ value, want string }{
		{`{"i":1.5,"f":1,"e":"A"}`, `at /i (int): 1.5 is not a whole number`},
		{`{"i":3000000000,"f":1,"e":"A"}`, `at /i (int): 3000000000 does not fit in 32 bits`},
		{`{"i":1,"f":1e300,"e":"A"}`, `at /f (float): 1e+300 is out of a float's range`},
		{`{"i":1,"f":1,"e":"B"}`, `at /e: "B" is not a symbol of enum "E"`},
		{`{"i":1,"f":1,"e":"A","typo":1}`, `record "r" has no field "typo"`},
		{`{"i":"1","f":1,"e":"A"}`, `at /i (int): needs a number, not a string`},
		{`{"f":1,"e":"A"}`, `record "r" needs field "i", which has no default`},
	}
	for _, tc := range cases {
		_, err := s.Encode(jsonValue(t, tc.value, false))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Encode(%s) = %v, want it to say %s", tc.value, err, tc.want)
		}
	}
}

// FuzzDecode: no input makes Decode panic, and what it accepts encodes back.
func FuzzDecode(f *testing.F) {
	s, err := Type.Parse(everything, nil, format.DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	for _, value := range []string{
		`{"n":null,"b":false,"i":0,"l":0,"f":0,"d":0,"s":"","by":"","arr":[],"m":{},"u":null,"e":"RED","fx":"wxyz","in":{"c":"RED"},"ts":0,"dec":"0"}`,
		`{"n":null,"b":true,"i":-7,"l":123456789,"f":1.5,"d":-2.25,"s":"hé","by":"\u0001","arr":[1,-2],"m":{"a":"b","c":"d"},"u":"x","e":"GREEN","fx":"abcd","in":{"c":"GREEN","opt":{"c":"RED"}},"ts":1,"dec":"-1.5"}`,
	} {
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			f.Fatal(err)
		}
		data, err := s.Encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := s.Decode(data)
		if err != nil {
			return
		}
		if _, err := s.Encode(v); err != nil {
			t.Fatalf("Decode(%x) = %#v, which does not encode: %v", data, v, err)
		}
	})
}

// TestDecodeDeepRecursion: a recursive schema lets each input byte open a
// level; the library's depth bound refuses it with an error.
func TestDecodeDeepRecursion(t *testing.T) {
	t.Parallel()
	s := mustParse(t, `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`)
	data := append(bytes.Repeat([]byte{2}, 100_000), 0)
	if _, err := s.Decode(data); err == nil {
		t.Fatal("Decode of 100,000 levels succeeded")
	}
}

// TestEncodeLogical: logical types take their plain value or their usual
// text, and decode to the plain value.
func TestEncodeLogical(t *testing.T) {
	t.Parallel()
	s := mustParse(t, record(
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}`,
		`{"name":"day","type":{"type":"int","logicalType":"date"}}`,
		`{"name":"id","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}}`,
		`{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}}`))
	data, err := s.Encode(jsonValue(t, `{"ts":"1970-01-01T00:00:01.5Z","day":"1970-01-03T00:00:00Z",
		"id":"00112233-4455-6677-8899-aabbccddeeff","amount":-1.5}`, false))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"ts": int64(1500), "day": int32(2),
		"id":     []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff},
		"amount": []byte{0xff, 0x6a}, // -150
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode = %#v, want %#v", got, want)
	}
}
