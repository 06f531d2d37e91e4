package jsonschema

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"millrace/schemas/format"
)

// person is the schema of the codec tests.
const person = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 8},
    "age": {"type": "integer", "minimum": 0},
    "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "alive": {"type": "boolean"},
    "note": {"type": ["string", "null"]}
  },
  "required": ["name"],
  "additionalProperties": false
}`

// TestDecode checks the plain values Decode returns, numbers included.
func TestDecode(t *testing.T) {
	t.Parallel()
	s := mustParse(t, person)
	got, err := s.Decode([]byte(`{"name":"ada","age":36,"score":1.5,"tags":["x"],"alive":true,"note":null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "ada", "age": int64(36), "score": 1.5, "tags": []any{"x"}, "alive": true, "note": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode = %#v, want %#v", got, want)
	}
	numbers := map[string]any{
		`1`: int64(1), `1.0`: int64(1), `1e3`: int64(1000), `-0`: int64(0), `0.25`: 0.25,
		`9223372036854775807`: int64(9223372036854775807), `9223372036854775808`: 9223372036854775808.0,
		`-9223372036854775808`: int64(-9223372036854775808), `1e300`: 1e300,
	}
	anything := mustParse(t, `{}`)
	for text, want := range numbers {
		if got, err := anything.Decode([]byte(text)); err != nil || got != want {
			t.Errorf("Decode(%s) = %#v, %v; want %#v", text, got, err, want)
		}
	}
}

// TestDecodeRefuses checks that invalid values are errors naming where and
// which keyword failed, and that garbage and hostile input are refused.
func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	s := mustParse(t, person)
	cases := []struct{ value, wants string }{
		{`{"age":3}`, `"/required"`},
		{`{"name":"a very long name"}`, `"/name" (schema "/properties/name/maxLength")`},
		{`{"name":"ada","age":-1}`, `"/properties/age/minimum"`},
		{`{"name":"ada","age":1.5}`, `"/properties/age/type"`},
		{`{"name":"ada","extra":1}`, `"/additionalProperties"`},
		{`{"name":"ada","tags":[1]}`, `"/tags/0"`},
		{`{"name":`, "not JSON"},
		{`{"name":"ada"} {}`, "not JSON"},
		{``, "not JSON"},
		{`{"name":"ada","score":1e999}`, "beyond a float64's range"},
		{`{"name":"ada","score":1e99999}`, "exponent"},
		{strings.Repeat("[", 100_000), "deep"},
	}
	for _, tc := range cases {
		_, err := s.Decode([]byte(tc.value))
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("Decode(%.40s) = %v, want an error with %s", tc.value, err, tc.wants)
		}
	}
}

// TestEncode checks that Encode validates and that what it writes decodes
// to the same values.
func TestEncode(t *testing.T) {
	t.Parallel()
	s := mustParse(t, person)
	var value any
	if err := json.Unmarshal([]byte(`{"name":"ada","age":36,"score":2.5,"tags":["a","b"],"note":"hi"}`), &value); err != nil {
		t.Fatal(err)
	}
	data, err := s.Encode(value)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := s.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Encode(decoded)
	if err != nil {
		t.Fatalf("Encode of Decode's result: %v", err)
	}
	if string(again) != string(data) {
		t.Errorf("round trip changed the value: %s != %s", again, data)
	}
	if want := (map[string]any{"name": "ada", "age": int64(36), "score": 2.5, "tags": []any{"a", "b"}, "note": "hi"}); !reflect.DeepEqual(decoded, want) {
		t.Errorf("Decode(Encode) = %#v, want %#v", decoded, want)
	}
	if _, err := s.Encode(map[string]any{"name": 7}); err == nil || !strings.Contains(err.Error(), "/properties/name/type") {
		t.Errorf("Encode of an invalid value: %v", err)
	}
	if _, err := s.Encode(map[string]any{"name": "x", "score": json.Number("1e99999")}); err == nil {
		t.Error("Encode accepts a number beyond the bounds")
	}
	if _, err := s.Encode(func() {}); err == nil {
		t.Error("Encode accepts a value JSON cannot hold")
	}
}

// FuzzDecode feeds Decode arbitrary bytes: it may refuse them, never panic,
// and what it accepts must encode again.
func FuzzDecode(f *testing.F) {
	s, err := Type.Parse(`{"$defs":{"v":{"anyOf":[{"type":["string","number","boolean","null"]},`+
		`{"type":"array","items":{"$ref":"#/$defs/v"}},{"type":"object","additionalProperties":{"$ref":"#/$defs/v"}}]}},`+
		`"$ref":"#/$defs/v"}`, nil, format.DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{"a":[1,2.5,"x",null,true]}`, `[[[]]]`, `1e308`, `"\u0000"`, `{"a":`, `-0.0e-0`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		value, err := s.Decode(data)
		if err != nil {
			return
		}
		if _, err := s.Encode(value); err != nil && !errors.Is(err, format.ErrLimit) {
			t.Errorf("Decode(%q) accepted a value Encode refuses: %v", data, err)
		}
	})
}
