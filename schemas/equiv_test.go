package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// checkAgainstEncodingJSON compares the click decoder with encoding/json on
// one input: what one rejects as malformed the other rejects too (the decoder
// also refuses non-objects and nesting deeper than maxDepth), and an accepted
// event has the string values encoding/json reads, with every unknown member
// kept in properties.
func checkAgainstEncodingJSON(t *testing.T, r *Row, data []byte) {
	t.Helper()
	err := r.Decode(data)
	var m map[string]json.RawMessage
	jsonErr := json.Unmarshal(data, &m)
	if err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("untyped error %v for %q", err, data)
		}
		if errors.Is(err, ErrMalformed) && jsonErr == nil && m != nil && nesting(data) <= maxDepth {
			t.Fatalf("decoder: %v; encoding/json reads the object %q", err, data)
		}
		return
	}
	if jsonErr != nil {
		t.Fatalf("decoder accepted %q; encoding/json: %v", data, jsonErr)
	}
	for _, f := range Click.Fields {
		raw, ok := m[f.Name]
		if f.Type != TypeString {
			continue
		}
		var want *string
		if ok {
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("%s: encoding/json: %v", f.Name, err)
			}
		}
		got, _ := r.Get(f.Name).(string)
		if (want == nil) != !r.Has(Click.FieldIndex(f.Name)) || (want != nil && *want != got) {
			t.Fatalf("%s: decoder %q (set %v), encoding/json %q (set %v), input %q", f.Name, got, r.Has(Click.FieldIndex(f.Name)), deref(want), want != nil, data)
		}
	}
	var props map[string]any
	if p, ok := r.Get("properties").(string); ok {
		if err := json.Unmarshal([]byte(p), &props); err != nil {
			t.Fatalf("properties %q: %v", p, err)
		}
	}
	for k, raw := range m {
		if _, known := Click.Field(k); known {
			continue
		}
		var want any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		found := false
		for name := k; !found && len(name) <= len(k)+8; name = "_" + name {
			v, ok := props[name]
			found = ok && reflect.DeepEqual(v, want)
		}
		if !found {
			t.Fatalf("unknown member %q = %s not kept in properties %v (input %q)", k, raw, props, data)
		}
	}
}

// nesting is the deepest nesting of objects and arrays in valid JSON.
func nesting(data []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// trickyPieces are the parts random strings are built from: escapes of every
// kind, surrogate pairs whole, split, reversed and lone, invalid and
// truncated UTF-8, and ASCII runs of every length around the scanner's
// 8-byte steps. breakingPieces make the JSON invalid (a raw quote, backslash
// or control character, a bad escape); randomString uses them rarely.
var (
	trickyPieces = []string{
		`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u00e9`, `\u20AC`, `\u0000`, `\u001f`,
		`\ud83d\ude00`, `\ud83d`, `\ude00`, `\ude00\ud83d`, `\ud83d\u0041`, `\ud83dx`, `\ud83d\ud83d\ude00`,
		"\xff", "\xc3", "\xc3\xa9", "\xe2\x82", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\x7f",
		"é", "😀", "\u2028", "'",
		"a", "ab", "abcdefg", "abcdefgh", "abcdefghi", "0123456789abcdef", "0123456789abcdefghijklmnopqrstu",
	}
	breakingPieces = []string{`"`, `\`, `\u12`, `\uZZZZ`, `\x`, `\ud83d\`, "\x00", "\x1f", "\t", "\n"}
)

func randomString(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.Intn(6); n > 0; n-- {
		if rng.Intn(40) == 0 {
			b.WriteString(breakingPieces[rng.Intn(len(breakingPieces))])
		} else {
			b.WriteString(trickyPieces[rng.Intn(len(trickyPieces))])
		}
	}
	return b.String()
}

// randomEvent builds a click event whose strings are random; most are valid
// JSON, some are not (a raw quote or control character, a bad escape).
func randomEvent(rng *rand.Rand) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"` + randomString(rng) + `"`)
	for _, k := range []string{"url", "title", "user_agent", "session_id", "plan", "type", "n\\u0061me", "ip", "t\\u0079pe", "urls"} {
		if rng.Intn(3) == 0 {
			continue
		}
		b.WriteString(`, "` + k + `" : `)
		switch rng.Intn(6) {
		case 0:
			b.WriteString("null")
		case 1:
			b.WriteString(`{"x":["` + randomString(rng) + `",1.5e3,true]}`)
		default:
			b.WriteString(`"` + randomString(rng) + `"`)
		}
	}
	if rng.Intn(3) == 0 {
		b.WriteString(`,"properties":{"plan":"` + randomString(rng) + `","` + randomString(rng) + `":2}`)
	}
	b.WriteString("}")
	return b.Bytes()
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	r := Click.NewRow()
	accepted := 0
	for i := 0; i < 50000; i++ {
		ev := randomEvent(rng)
		checkAgainstEncodingJSON(t, r, ev)
		if r.Decode(ev) == nil {
			accepted++
		}
	}
	// Both paths must have been exercised.
	if accepted < 5000 || accepted > 45000 {
		t.Errorf("%d of 50000 random events accepted; the generator needs rebalancing", accepted)
	}
}

// FuzzDecodeMatchesEncodingJSON runs the comparison on fuzzed input, seeded
// with random events; `go test -fuzz DecodeMatches ./schemas` explores further.
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 50; i++ {
		f.Add(randomEvent(rng))
	}
	f.Add([]byte(`{"type":"` + strings.Repeat("[", 300) + `"}`))
	f.Add([]byte(`{"type":"x","p":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`))
	r := Click.NewRow()
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstEncodingJSON(t, r, data)
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
