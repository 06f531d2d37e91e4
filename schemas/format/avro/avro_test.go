package avro

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"millrace/schemas/format"
)

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ text, want string }{
		{record(`{"name":"x","type":"strng"}`), `avro: field "x" of record "r": unknown type "strng"`},
		{record(`{"name":"x","type":{"type":"array","items":"Nope"}}`), `avro: the items of field "x" of record "r": unknown type "Nope"`},
		{record(`{"name":"x","type":"int","default":"a"}`), `avro: record field "x": invalid default`},
		{`{"type":"record","name":"r",`, `avro: invalid schema json`},
	}
	for _, tc := range cases {
		_, err := Type.Parse(tc.text, nil, format.DefaultLimits)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want %s…", tc.text, err, tc.want)
		}
		if errors.Is(err, format.ErrLimit) {
			t.Errorf("Parse(%s) = %v, a limit", tc.text, err)
		}
	}
}

// TestParseReferences: a schema uses named types of the schemas it
// references, by full name; the references use each other, given in no
// particular order.
func TestParseReferences(t *testing.T) {
	t.Parallel()
	refs := map[string]string{
		"com.acme.Address": `{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"street","type":"string"},{"name":"country","type":"Country"},{"name":"since","type":{"type":"long","logicalType":"timestamp-millis"},"default":0}]}`,
		"com.acme.Country": `{"type":"enum","name":"Country","namespace":"com.acme","symbols":["FR","NO"]}`,
		"a.Aaa":            `{"type":"record","name":"Aaa","namespace":"a","fields":[{"name":"home","type":"com.acme.Address"}]}`,
	}
	text := `{"type":"record","name":"Customer","namespace":"com.acme","fields":[
		{"name":"home","type":"Address"},
		{"name":"work","type":["null","com.acme.Address"],"default":null},
		{"name":"a","type":"a.Aaa"}]}`
	s, err := Type.Parse(text, refs, format.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	value := map[string]any{
		"home": map[string]any{"street": "Rue 1", "country": "FR"},
		"work": map[string]any{"street": "Gate 2", "country": "NO"},
		"a":    map[string]any{"home": map[string]any{"street": "x", "country": "NO"}},
	}
	data, err := s.Encode(value)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	// A logical type of a referenced schema decodes to its plain value too.
	if work := got.(map[string]any)["work"].(map[string]any); work["country"] != "NO" || work["since"] != int64(0) {
		t.Errorf("decoded %v", got)
	}

	// The normalized form names the referenced types and parses again
	// with the same references.
	normal := s.Canonical(true)
	if strings.Contains(normal, `"street"`) || !strings.Contains(normal, `"type":"com.acme.Address"`) {
		t.Errorf("Canonical(true) = %s, want the referenced types named, not written out", normal)
	}
	again, err := Type.Parse(normal, refs, format.DefaultLimits)
	if err != nil {
		t.Fatalf("the normalized form does not parse: %v", err)
	}
	if again.Canonical(true) != normal {
		t.Errorf("normalizing twice changed it:\n%s\n%s", normal, again.Canonical(true))
	}

	if _, err := Type.Parse(text, nil, format.DefaultLimits); err == nil || !strings.Contains(err.Error(), `of record "Customer": unknown type "`) {
		t.Errorf("Parse without the references = %v", err)
	}
	broken := map[string]string{
		"a.Good": `{"type":"enum","name":"Good","namespace":"a","symbols":["X"]}`,
		"a.Bad":  `{"type":"record","name":"Bad","namespace":"a","fields":[{"name":"x","type":"Nope"}]}`,
	}
	if _, err := Type.Parse(`"a.Good"`, broken, format.DefaultLimits); err == nil ||
		err.Error() != `avro: the referenced schema "a.Bad": field "x" of record "Bad": unknown type "Nope"` {
		t.Errorf("Parse with a broken reference = %v", err)
	}
	cycle := map[string]string{
		"x.A": `{"type":"record","name":"A","namespace":"x","fields":[{"name":"b","type":"x.B"}]}`,
		"x.B": `{"type":"record","name":"B","namespace":"x","fields":[{"name":"a","type":"x.A"}]}`,
	}
	if _, err := Type.Parse(`"x.A"`, cycle, format.DefaultLimits); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("Parse with references in a cycle = %v", err)
	}
}

// TestParseLimits: what exceeds Limits is refused with ErrLimit, and a
// hostile nesting is refused by the scan, quickly, before any parsing.
func TestParseLimits(t *testing.T) {
	t.Parallel()
	deepRecords := func(levels int) string {
		text := `"int"`
		for i := range levels {
			text = `{"type":"record","name":"r` + strings.Repeat("x", i) + `","fields":[{"name":"f","type":` + text + `}]}`
		}
		return text
	}
	deepArrays := func(levels int) string {
		return strings.Repeat(`{"type":"array","items":`, levels) + `"int"` + strings.Repeat("}", levels)
	}
	// chain is references a.R1 … a.Rn, each using the one before.
	chain := func(n int) map[string]string {
		refs := map[string]string{"a.R1": `{"type":"record","name":"R1","namespace":"a","fields":[]}`}
		for i := 2; i <= n; i++ {
			refs[fmt.Sprintf("a.R%d", i)] = fmt.Sprintf(`{"type":"record","name":"R%d","namespace":"a","fields":[{"name":"p","type":"R%d"}]}`, i, i-1)
		}
		return refs
	}
	small := format.Limits{MaxBytes: 1 << 20, MaxDepth: 8}
	cases := []struct {
		name   string
		text   string
		refs   map[string]string
		limits format.Limits
	}{
		{"100,000 nested arrays", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), nil, format.DefaultLimits},
		{"100,000 nested objects", strings.Repeat(`{"type":`, 100_000) + `"int"` + strings.Repeat("}", 100_000), nil, format.DefaultLimits},
		{"a deep default", record(`{"name":"x","type":"int","default":` + strings.Repeat("[", 10_000) + `]}`), nil, format.DefaultLimits},
		{"records deeper than the limit", deepRecords(9), nil, small},
		{"arrays deeper than the limit", deepArrays(9), nil, small},
		{"text over MaxBytes", record(`{"name":"x","type":"int"}`), nil, format.Limits{MaxBytes: 20, MaxDepth: 8}},
		{"references over MaxBytes", `"int"`, map[string]string{"a.A": strings.Repeat(" ", 600) + `"int"`, "a.B": strings.Repeat(" ", 600) + `"int"`},
			format.Limits{MaxBytes: 1000, MaxDepth: 8}},
		{"a deep reference", `"int"`, map[string]string{"a.A": strings.Repeat("[", 100_000)}, format.DefaultLimits},
		{"references chained deeper than the limit", `"a.R9"`, chain(9), small},
	}
	for _, tc := range cases {
		start := time.Now()
		_, err := Type.Parse(tc.text, tc.refs, tc.limits)
		if !errors.Is(err, format.ErrLimit) {
			t.Errorf("%s: Parse = %v, want ErrLimit", tc.name, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: refused after %v", tc.name, took)
		}
	}
	for _, ok := range []string{deepRecords(8), deepArrays(8)} {
		if _, err := Type.Parse(ok, nil, small); err != nil {
			t.Errorf("Parse at the limit: %v", err)
		}
	}
	if _, err := Type.Parse(`"a.R8"`, chain(8), small); err != nil {
		t.Errorf("Parse with references chained at the limit: %v", err)
	}
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	base := mustParse(t, `{"type":"record","name":"r","namespace":"n","fields":[{"name":"a","type":"int","default":1}]}`)
	spaced := mustParse(t, "{ \"type\" : \"record\",\n\t\"name\": \"r\", \"namespace\":\"n\",\n \"fields\": [ {\"name\":\"a\", \"type\":\"int\", \"default\": 1} ] }")
	reordered := mustParse(t, `{"fields":[{"default":1,"type":"int","name":"a"}],"name":"n.r","type":"record"}`)
	otherDefault := mustParse(t, `{"type":"record","name":"r","namespace":"n","fields":[{"name":"a","type":"int","default":2}]}`)
	otherScale := mustParse(t, record(`{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":3}}`))
	scale2 := mustParse(t, record(`{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}`))

	if base.Canonical(false) != spaced.Canonical(false) {
		t.Errorf("whitespace changed Canonical(false):\n%s\n%s", base.Canonical(false), spaced.Canonical(false))
	}
	if base.Canonical(false) != reordered.Canonical(false) {
		t.Errorf("key order and namespace spelling count without normalize (Java's printer, which Confluent compares by, fixes both):\n%s\n%s",
			base.Canonical(false), reordered.Canonical(false))
	}
	if base.Canonical(true) != reordered.Canonical(true) || base.Canonical(true) != spaced.Canonical(true) {
		t.Errorf("normalize did not make key order and namespace spelling one form:\n%s\n%s", base.Canonical(true), reordered.Canonical(true))
	}
	want := `{"name":"n.r","type":"record","fields":[{"name":"a","type":"int","default":1}]}`
	if got := base.Canonical(true); got != want {
		t.Errorf("Canonical(true) = %s, want %s", got, want)
	}
	// What Parsing Canonical Form drops but changes how data is read
	// keeps two registrations apart.
	if base.Canonical(true) == otherDefault.Canonical(true) {
		t.Errorf("a different default normalized to the same form")
	}
	if otherScale.Canonical(true) == scale2.Canonical(true) {
		t.Errorf("a different decimal scale normalized to the same form")
	}
}

// TestNormalizedParses: the normalized form is a schema: it parses, and
// normalizing it again changes nothing.
func TestNormalizedParses(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		everything,
		`{"type":"record","name":"L","namespace":"x","doc":"a list","aliases":["Old"],"fields":[
			{"name":"v","type":{"type":"int","x-unit":"ms"},"doc":"value","aliases":["w"],"order":"descending"},
			{"name":"bytes","type":"bytes","default":"\u00ff\u0000"},
			{"name":"f","type":"float","default":1.5},
			{"name":"e","type":{"type":"enum","name":"E","namespace":"y","symbols":["A","B"],"default":"B"}},
			{"name":"e2","type":"y.E"},
			{"name":"fx","type":{"type":"fixed","name":"D","size":8,"logicalType":"decimal","precision":10,"scale":0}},
			{"name":"next","type":["null","L"],"default":null}],"x-owner":{"b":1,"a":[true,null]}}`,
		`["null",{"type":"map","values":{"type":"array","items":"string"}}]`,
		`{"type":"record","name":"R","namespace":"x","fields":[{"name":"g","type":{"type":"fixed","name":"G","namespace":"","size":2}}]}`,
	} {
		s := mustParse(t, text)
		normal := s.Canonical(true)
		again := mustParse(t, normal)
		if again.Canonical(true) != normal {
			t.Errorf("normalizing twice changed it:\n%s\n%s", normal, again.Canonical(true))
		}
		if found := again.ReadsFrom(s); len(found) > 0 {
			t.Errorf("the normalized form does not read the original: %v", found)
		}
	}
}

// FuzzParse: no schema text makes Parse, Canonical or ReadsFrom panic, and
// an accepted schema's normalized form parses again.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		everything,
		record(`{"name":"x","type":"strng"}`),
		`["null",{"type":"map","values":{"type":"array","items":"string"}}]`,
		`{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"],"default":null}]}`,
		`{"type":"enum","name":"E","symbols":["A","B"],"default":"A","aliases":["F"]}`,
		`{"type":"fixed","name":"a.F","size":16,"logicalType":"uuid"}`,
	} {
		f.Add(seed)
	}
	reference := mustParseFuzz(f, everything)
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Type.Parse(text, nil, format.Limits{MaxBytes: 1 << 16, MaxDepth: 16})
		if err != nil {
			return
		}
		s.Canonical(false)
		s.ReadsFrom(reference)
		reference.ReadsFrom(s)
		s.ReadsFrom(s)
		if _, err := Type.Parse(s.Canonical(true), nil, format.DefaultLimits); err != nil {
			t.Fatalf("the normalized form of %s does not parse: %v\n%s", text, err, s.Canonical(true))
		}
	})
}

func mustParseFuzz(f *testing.F, text string) format.Schema {
	s, err := Type.Parse(text, nil, format.DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	return s
}
