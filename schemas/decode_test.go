package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func mustDecode(t *testing.T, s *Schema, in string) *Row {
	t.Helper()
	r := s.NewRow()
	if err := r.Decode([]byte(in)); err != nil {
		t.Fatalf("Decode(%s): %v", in, err)
	}
	return r
}

func TestDecodeLogLine(t *testing.T) {
	r := mustDecode(t, Log, `{"event_id":"0123456789abcdef0123456789abcdef","ts":"2024-05-01T10:20:30.123456789Z",
		"host":"web-1","source":"/var/log/app.log","offset":12345,"line":"GET /x \"q\" \u00e9\ud83d\ude00",
		"truncated":false,"invalid_utf8":true,"fields":{"env":"prod","dc":"eu"}}`)
	want := map[string]any{
		"event_id":     "0123456789abcdef0123456789abcdef",
		"ts":           time.Date(2024, 5, 1, 10, 20, 30, 123456000, time.UTC),
		"host":         "web-1",
		"source":       "/var/log/app.log",
		"offset":       int64(12345),
		"line":         "GET /x \"q\" é😀",
		"truncated":    false,
		"invalid_utf8": true,
		"fields":       map[string]string{"env": "prod", "dc": "eu"},
		"extra":        nil,
	}
	for name, w := range want {
		if got := r.Get(name); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", name, got, w)
		}
	}
}

func TestDecodeClickTimestamps(t *testing.T) {
	cases := []struct {
		in   string
		want time.Time
	}{
		{`"2024-05-01T10:20:30Z"`, time.Date(2024, 5, 1, 10, 20, 30, 0, time.UTC)},
		{`"2024-05-01T12:20:30.5+02:00"`, time.Date(2024, 5, 1, 10, 20, 30, 5e8, time.UTC)},
		{`1714558830123`, time.Date(2024, 5, 1, 10, 20, 30, 123e6, time.UTC)},
		{`1714558830123.5`, time.Date(2024, 5, 1, 10, 20, 30, 123500e3, time.UTC)},
		{`1.714558830123e12`, time.Date(2024, 5, 1, 10, 20, 30, 123e6, time.UTC)},
		{`0`, time.Unix(0, 0).UTC()},
	}
	for _, c := range cases {
		r := mustDecode(t, Click, `{"type":"click","ts":`+c.in+`}`)
		got, ok := r.Time()
		if !ok || !got.Equal(c.want) {
			t.Errorf("ts %s: got %v %v, want %v", c.in, got, ok, c.want)
		}
	}
	r := mustDecode(t, Click, `{"type":"click"}`)
	if _, ok := r.Time(); ok {
		t.Error("absent ts reported present")
	}
	fallback := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := r.TimeOr(fallback); !got.Equal(fallback) {
		t.Errorf("TimeOr = %v", got)
	}
}

func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name   string
		schema *Schema
		in     string
		class  error
		field  string
	}{
		{"not json", Click, `nope`, ErrMalformed, ""},
		{"array", Click, `[{"type":"click"}]`, ErrMalformed, ""},
		{"truncated", Click, `{"type":"cli`, ErrMalformed, ""},
		{"trailing", Click, `{"type":"click"} x`, ErrMalformed, ""},
		{"trailing comma", Click, `{"type":"click",}`, ErrMalformed, ""},
		{"bad escape", Click, `{"type":"c\qk"}`, ErrMalformed, ""},
		{"raw newline in string", Click, "{\"type\":\"a\nb\"}", ErrMalformed, ""},
		{"too deep", Click, `{"type":"c","properties":{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}}`, ErrMalformed, ""},
		{"missing type", Click, `{"url":"https://x"}`, ErrMissingField, "type"},
		{"null type", Click, `{"type":null}`, ErrMissingField, "type"},
		{"type number", Click, `{"type":5}`, ErrWrongType, "type"},
		{"properties array", Click, `{"type":"c","properties":[1]}`, ErrWrongType, "properties"},
		{"properties string", Click, `{"type":"c","properties":"{}"}`, ErrWrongType, "properties"},
		{"ts garbage", Click, `{"type":"c","ts":"yesterday"}`, ErrBadTimestamp, "ts"},
		{"ts no zone", Click, `{"type":"c","ts":"2024-05-01T10:20:30"}`, ErrBadTimestamp, "ts"},
		{"ts bool", Click, `{"type":"c","ts":true}`, ErrBadTimestamp, "ts"},
		{"ts huge", Click, `{"type":"c","ts":1e300}`, ErrBadTimestamp, "ts"},
		{"ts feb 30", Click, `{"type":"c","ts":"2024-02-30T00:00:00Z"}`, ErrBadTimestamp, "ts"},
		{"log missing line", Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":1}`, ErrMissingField, "line"},
		{"log offset fraction", Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":1.5,"line":""}`, ErrWrongType, "offset"},
		{"log offset string", Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":"1","line":""}`, ErrWrongType, "offset"},
		{"log offset overflow", Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":99999999999999999999,"line":""}`, ErrWrongType, "offset"},
		{"log truncated string", Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":1,"line":"","truncated":"no"}`, ErrWrongType, "truncated"},
		{"log fields number value", Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":1,"line":"","fields":{"a":1}}`, ErrWrongType, "fields"},
		{"metric bad kind", Metric, `{"name":"x","kind":"meter","value":1,"ts":"2024-05-01T10:20:30Z"}`, ErrBadValue, "kind"},
		{"metric value string", Metric, `{"name":"x","kind":"gauge","value":"1","ts":"2024-05-01T10:20:30Z"}`, ErrWrongType, "value"},
		{"metric value overflow", Metric, `{"name":"x","kind":"gauge","value":1e999,"ts":"2024-05-01T10:20:30Z"}`, ErrBadValue, "value"},
		{"metric missing ts", Metric, `{"name":"x","kind":"gauge","value":1}`, ErrMissingField, "ts"},
		{"metric labels null value", Metric, `{"name":"x","kind":"gauge","value":1,"ts":"2024-05-01T10:20:30Z","labels":{"a":null}}`, ErrWrongType, "labels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.schema, []byte(c.in))
			if !errors.Is(err, c.class) {
				t.Fatalf("got %v, want class %v", err, c.class)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("%T is not a *ValidationError", err)
			}
			if ve.Field != c.field || ve.Schema != c.schema.Name {
				t.Errorf("field %q schema %q, want %q %q (%v)", ve.Field, ve.Schema, c.field, c.schema.Name, err)
			}
			if !strings.Contains(err.Error(), c.class.Error()) {
				t.Errorf("message %q does not name the class", err)
			}
		})
	}
}

func TestValidInputs(t *testing.T) {
	for _, in := range []string{
		`{"type":"page_view"}`,
		` {"type" : "click" , "ts" : null , "properties" : { } } `,
		`{"type":"x","properties":{"a":[1,2,{"b":null}],"c":-1.5e-3,"d":true}}`,
		`{"type":"x","user_id":"\u0000\ud800"}`,
	} {
		if err := ValidateClick([]byte(in)); err != nil {
			t.Errorf("ValidateClick(%s) = %v", in, err)
		}
	}
	r := mustDecode(t, Metric, `{"name":"up","kind":"gauge","value":"NaN","ts":"2024-05-01T10:20:30Z"}`)
	if v := r.Get("value").(float64); !math.IsNaN(v) {
		t.Errorf("NaN decoded as %v", v)
	}
	r = mustDecode(t, Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":1e3,"line":"`+"\xff"+`"}`)
	if r.Get("offset") != int64(1000) || r.Get("line") != "\uFFFD" {
		t.Errorf("offset %v line %q", r.Get("offset"), r.Get("line"))
	}
}

func TestUnknownFieldsFoldIntoCatchAll(t *testing.T) {
	cases := []struct {
		schema *Schema
		in     string
		want   map[string]any // the catch-all column, parsed
	}{
		{Click, `{"type":"c","plan":"pro","n":2}`, map[string]any{"plan": "pro", "n": 2.0}},
		{Click, `{"type":"c","properties":{"a":1},"b":[true]}`, map[string]any{"a": 1.0, "b": []any{true}}},
		{Click, `{"type":"c","properties":{},"b":{"x":"y"}}`, map[string]any{"b": map[string]any{"x": "y"}}},
		// A top-level name that collides with a property keeps both values.
		{Click, `{"plan":"top","type":"c","properties":{"plan":"inner","_plan":1}}`,
			map[string]any{"plan": "inner", "_plan": 1.0, "__plan": "top"}},
		// Property names are compared unescaped.
		{Click, `{"plan":"top","type":"c","properties":{"pl\u0061n":"inner"}}`,
			map[string]any{"plan": "inner", "_plan": "top"}},
		// A folded name can collide with one folded before it.
		{Click, `{"type":"c","_x":1,"x":2,"properties":{"x":0}}`,
			map[string]any{"x": 0.0, "_x": 1.0, "__x": 2.0}},
		{Log, `{"event_id":"a","ts":"2024-05-01T10:20:30Z","source":"/x","offset":1,"line":"l","pid":42}`,
			map[string]any{"pid": 42.0}},
		{Metric, `{"name":"x","kind":"gauge","value":1,"ts":"2024-05-01T10:20:30Z","unit":"s\n"}`,
			map[string]any{"unit": "s\n"}},
	}
	for _, c := range cases {
		r := mustDecode(t, c.schema, c.in)
		text, _ := r.Get(c.schema.CatchAll()).(string)
		var got map[string]any
		if err := json.Unmarshal([]byte(text), &got); err != nil {
			t.Fatalf("%s: catch-all %q is not JSON: %v", c.in, text, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: catch-all %v, want %v", c.in, got, c.want)
		}
	}
	// Without unknown fields the properties text is kept as sent.
	r := mustDecode(t, Click, `{"type":"c","properties":{"a": 1}}`)
	if got := r.Get("properties"); got != `{"a": 1}` {
		t.Errorf("properties = %q", got)
	}
}

// TestFoldingAllocatesNothing: a row that has decoded an event with unknown
// members decodes the next one like it without allocating, as the sink
// decodes every event of a site that sends its own top-level fields.
func TestFoldingAllocatesNothing(t *testing.T) {
	r := Click.NewRow()
	ev := []byte(`{"type":"c","properties":{"plan":"inner","n":1},"plan":"top","extra":[1,2]}`)
	if err := r.Decode(ev); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.Decode(ev) }); n != 0 {
		t.Fatalf("%v allocations per decode", n)
	}
}

func TestRowReuse(t *testing.T) {
	r := Click.NewRow()
	if err := r.Decode([]byte(`{"type":"c","url":"u","extra":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Decode([]byte(`{"type":"d"}`)); err != nil {
		t.Fatal(err)
	}
	if r.Get("url") != nil || r.Get("properties") != nil || r.Get("type") != "d" {
		t.Errorf("values leaked from the previous event: url=%v properties=%v", r.Get("url"), r.Get("properties"))
	}
}

// TestKeyOrderChanges decodes events whose members come in changing orders
// with one row, so the decoder's guess of the next member name (learned from
// the previous event) is wrong as often as right.
func TestKeyOrderChanges(t *testing.T) {
	r := Click.NewRow()
	events := []struct {
		in        string
		typ, url  string
		urlIsNull bool
	}{
		{in: `{"type":"a","url":"u1","title":"t"}`, typ: "a", url: "u1"},
		{in: `{"type":"b","url":"u2","title":"t"}`, typ: "b", url: "u2"},
		{in: `{"url":"u3","type":"c"}`, typ: "c", url: "u3"},
		// A name the guess is a prefix of, and an escaped name: neither may
		// be taken for the guessed field.
		{in: `{"url":"u4","types":"x","type":"d"}`, typ: "d", url: "u4"},
		{in: `{"url":"u5","t\u0079pe":"e"}`, typ: "e", url: "u5"},
		{in: `{"type":"f","urlx":"u6"}`, typ: "f", urlIsNull: true},
		{in: `{"type":"g","url":"u7"}`, typ: "g", url: "u7"},
	}
	for _, e := range events {
		if err := r.Decode([]byte(e.in)); err != nil {
			t.Fatalf("%s: %v", e.in, err)
		}
		if got := r.Get("type"); got != e.typ {
			t.Errorf("%s: type %v, want %q", e.in, got, e.typ)
		}
		if got := r.Get("url"); (e.urlIsNull && got != nil) || (!e.urlIsNull && got != e.url) {
			t.Errorf("%s: url %v, want %q (null %v)", e.in, got, e.url, e.urlIsNull)
		}
		if p := r.Get("properties"); e.urlIsNull && p != `{"urlx":"u6"}` {
			t.Errorf("%s: properties %v", e.in, p)
		}
	}
}

// TestEscapedFieldNames checks that a field whose name needs escaping in
// JSON is only matched by its escaped spelling, also once the decoder has
// seen it: its raw bytes in the input spell another name.
func TestEscapedFieldNames(t *testing.T) {
	s, err := New("x", 1, "ts", []Field{
		{Name: "ts", Type: TypeTimestamp, Since: 1},
		{Name: `a\b`, Type: TypeString, Since: 1},
		{Name: "extra", Type: TypeJSON, CatchAll: true, Since: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := s.NewRow()
	for range 2 {
		if err := r.Decode([]byte(`{"ts":1,"a\\b":"field"}`)); err != nil {
			t.Fatal(err)
		}
		if got := r.Get(`a\b`); got != "field" {
			t.Fatalf(`a\b = %v`, got)
		}
	}
	// "a\b" in JSON is an a and a backspace: not the field.
	if err := r.Decode([]byte(`{"ts":1,"a\b":"other"}`)); err != nil {
		t.Fatal(err)
	}
	if got, extra := r.Get(`a\b`), r.Get("extra"); got != nil || extra != `{"a\u0008":"other"}` {
		t.Errorf(`a\b = %v, extra = %v`, got, extra)
	}
}

func TestAppendJSONRoundTrip(t *testing.T) {
	inputs := []struct {
		schema *Schema
		in     string
	}{
		{Click, `{"event_id":"018f","type":"click","url":"https://e.com/?q=\"x\"","ts":1714558830123,"received_at":"2024-05-01T10:20:31Z","properties":{"k":[1,2]},"zz":"folded"}`},
		{Log, `{"event_id":"a","ts":"2024-05-01T10:20:30.000001Z","host":"h","source":"/x","offset":7,"line":"tab\there\u0001","truncated":true,"fields":{"a":"b"}}`},
		{Metric, `{"name":"x","kind":"counter","value":-Infinity}`}, // invalid, skipped below
		{Metric, `{"name":"x","kind":"counter","value":"-Inf","labels":{},"ts":"2024-05-01T10:20:30Z","source":"h:c"}`},
		{Metric, `{"name":"x","kind":"summary","value":0.1,"ts":"2024-05-01T10:20:30Z"}`},
	}
	for _, c := range inputs {
		r := c.schema.NewRow()
		if err := r.Decode([]byte(c.in)); err != nil {
			continue
		}
		out := r.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("AppendJSON gave invalid JSON %s", out)
		}
		r2 := mustDecode(t, c.schema, string(out))
		for _, f := range c.schema.Fields {
			a, b := r.Get(f.Name), r2.Get(f.Name)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: %s %#v after round trip, was %#v", c.schema.Name, f.Name, b, a)
			}
		}
		if out2 := r2.AppendJSON(nil); string(out2) != string(out) {
			t.Errorf("not canonical:\n%s\n%s", out, out2)
		}
	}
}

func TestSet(t *testing.T) {
	r := mustDecode(t, Click, `{"type":"click","ts":1714558830123}`)
	now := time.Date(2024, 5, 1, 10, 20, 31, 0, time.UTC)
	for name, v := range map[string]any{"event_id": "id-1", "received_at": now, "ip": "203.0.113.0"} {
		if err := r.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	if r.Get("received_at") != now || r.Get("event_id") != "id-1" {
		t.Errorf("Set values not read back: %v %v", r.Get("received_at"), r.Get("event_id"))
	}
	if err := r.Set("type", nil); !errors.Is(err, ErrMissingField) {
		t.Errorf("clearing type: %v", err)
	}
	if err := r.Set("ts", "now"); !errors.Is(err, ErrWrongType) {
		t.Errorf("wrong Go type: %v", err)
	}
	if err := r.Set("properties", `[1]`); !errors.Is(err, ErrWrongType) {
		t.Errorf("non-object properties: %v", err)
	}
	if err := r.Set("nope", "x"); err == nil {
		t.Error("unknown field accepted")
	}
	if err := Metric.NewRow().Set("kind", "meter"); !errors.Is(err, ErrBadValue) {
		t.Errorf("enum: %v", err)
	}
}

func FuzzDecodeClick(f *testing.F) {
	for _, s := range []string{`{"type":"c"}`, `{"type":"c","ts":1,"properties":{"a":[{}]},"x":null}`,
		`{"type":"\ud83d\ude00","plan":1,"properties":{"plan":2}}`, `{`, `{"type":1e5}`} {
		f.Add([]byte(s))
	}
	r := Click.NewRow()
	f.Fuzz(func(t *testing.T, data []byte) {
		err := r.Decode(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		out := r.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("AppendJSON invalid: %q from %q", out, data)
		}
		if p, ok := r.Get("properties").(string); ok && !json.Valid([]byte(p)) {
			t.Fatalf("properties invalid: %q", p)
		}
		if err := Click.NewRow().Decode(out); err != nil {
			t.Fatalf("re-decode %q: %v", out, err)
		}
	})
}

// TestAppendJSONStringEveryByte puts every byte value, and runes that need
// care, at every position of a string longer than the 8-byte fast path, so
// each lands in every lane of it and in the byte-at-a-time tail.
func TestAppendJSONStringEveryByte(t *testing.T) {
	const filler = "abcdefghijklmnopqrstu"
	var specials []string
	for b := 0; b < 256; b++ {
		specials = append(specials, string([]byte{byte(b)}))
	}
	specials = append(specials, "é", "\u2028", "\u2029", "\xe2\x80", "😀", `\"`, "\x00\xff")
	for _, sp := range specials {
		for pos := 0; pos <= len(filler); pos++ {
			in := filler[:pos] + sp + filler[pos:]
			out, valid := AppendJSONStringValid(nil, in)
			if valid != utf8.ValidString(in) {
				t.Fatalf("%q: reported valid=%v", in, valid)
			}
			if !json.Valid(out) || !utf8.Valid(out) {
				t.Fatalf("%q: invalid output %q", in, out)
			}
			if bytes.Contains(out, []byte("\u2028")) || bytes.Contains(out, []byte("\u2029")) {
				t.Fatalf("%q: line separator left raw in %q", in, out)
			}
			var got string
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%q: %v", in, err)
			}
			// Each invalid byte becomes one U+FFFD, as converting to runes does.
			if want := string([]rune(in)); got != want {
				t.Fatalf("%q encoded as %q, decodes to %q, want %q", in, out, got, want)
			}
		}
	}
}

func BenchmarkAppendJSONString(b *testing.B) {
	line := "2026-11-25T10:00:00.000123Z INFO request id=123456 path=/api/v1/items/17 status=200 took=12ms abcdefghijklmnopqrstuvwxyzabcdefghijklmn"
	var dst []byte
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		dst = AppendJSONString(dst[:0], line)
	}
}

// TestMaxBytes: a metric name, label set or click type past its bound is
// refused with ErrBadValue, by Decode and by Set alike.
func TestMaxBytes(t *testing.T) {
	long := strings.Repeat("n", MaxLabelBytes+1)
	for name, raw := range map[string]string{
		"name":   `{"name":"` + long + `","kind":"gauge","value":1,"ts":"2026-12-02T03:00:00Z"}`,
		"labels": `{"name":"m","kind":"gauge","value":1,"ts":"2026-12-02T03:00:00Z","labels":{"a":"` + strings.Repeat("v", MaxLabelSetBytes) + `"}}`,
		"source": `{"name":"m","kind":"gauge","value":1,"ts":"2026-12-02T03:00:00Z","source":"` + long + `"}`,
	} {
		err := Metric.NewRow().Decode([]byte(raw))
		if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), "more than the") {
			t.Errorf("%s past its bound: %v", name, err)
		}
	}
	ok := `{"name":"` + long[:MaxLabelBytes] + `","kind":"gauge","value":1,"ts":"2026-12-02T03:00:00Z"}`
	if err := Metric.NewRow().Decode([]byte(ok)); err != nil {
		t.Errorf("a name of exactly %d bytes: %v", MaxLabelBytes, err)
	}
	row := Click.NewRow()
	if err := row.Set("type", long); !errors.Is(err, ErrBadValue) {
		t.Errorf("Set of a long click type: %v", err)
	}
}

// TestSetMapInKeyOrder: a map set on a row comes out in key order, so the
// same sample is the same bytes whichever way Go iterates the map.
func TestSetMapInKeyOrder(t *testing.T) {
	labels := map[string]string{}
	for _, k := range []string{"job", "code", "instance", "zone", "a", "method", "le", "path"} {
		labels[k] = k + "-value"
	}
	want := `"labels":{"a":"a-value","code":"code-value","instance":"instance-value","job":"job-value","le":"le-value","method":"method-value","path":"path-value","zone":"zone-value"}`
	for range 20 {
		r := Metric.NewRow()
		if err := r.Set("labels", labels); err != nil {
			t.Fatal(err)
		}
		if got := string(r.AppendJSON(nil)); !strings.Contains(got, want) {
			t.Fatalf("%s, want the labels in key order: %s", got, want)
		}
	}
}
