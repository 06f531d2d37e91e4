package jsonschema

import (
	"errors"
	"strings"
	"testing"

	"millrace/schemas/format"
)

func TestName(t *testing.T) {
	t.Parallel()
	if Type.Name() != format.JSON {
		t.Errorf("Name() = %q, want %q", Type.Name(), format.JSON)
	}
	if s := mustParse(t, `{}`); s.Type() != Type || s.Text() != `{}` {
		t.Errorf("Type() or Text() does not give back the parse's: %v %q", s.Type(), s.Text())
	}
}

// TestCanonical checks that whitespace never matters and key order matters
// only under normalize.
func TestCanonical(t *testing.T) {
	t.Parallel()
	compact := `{"type":"object","properties":{"a":{"type":"string"}}}`
	spaced := "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"a\": { \"type\": \"string\" }\n  }\n}\n"
	reordered := `{"properties":{"a":{"type":"string"}},"type":"object"}`
	for _, normalize := range []bool{false, true} {
		if a, b := mustParse(t, compact).Canonical(normalize), mustParse(t, spaced).Canonical(normalize); a != b {
			t.Errorf("normalize=%v: whitespace changes the canonical form: %s != %s", normalize, a, b)
		}
	}
	if got := mustParse(t, spaced).Canonical(false); got != compact {
		t.Errorf("Canonical(false) = %s, want %s", got, compact)
	}
	if mustParse(t, compact).Canonical(false) == mustParse(t, reordered).Canonical(false) {
		t.Error("without normalize, key order is part of the canonical form")
	}
	if a, b := mustParse(t, compact).Canonical(true), mustParse(t, reordered).Canonical(true); a != b {
		t.Errorf("normalize does not sort keys: %s != %s", a, b)
	}
	// Numbers keep their spelling; HTML characters are not escaped.
	if got := mustParse(t, `{"pattern":"<a&b>","maximum":1.50}`).Canonical(true); got != `{"maximum":1.50,"pattern":"<a&b>"}` {
		t.Errorf("Canonical(true) = %s", got)
	}
}

// TestParseReferences resolves $ref to schemas given as references, by a
// relative name, by a relative name under the schema's own $id, and by an
// absolute URL.
func TestParseReferences(t *testing.T) {
	t.Parallel()
	address := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`
	cases := []struct{ name, text, refName string }{
		{"relative", `{"type":"object","properties":{"home":{"$ref":"address.json"}}}`, "address.json"},
		{"relative under $id", `{"$id":"https://example.com/customer.json","type":"object","properties":{"home":{"$ref":"address.json"}}}`, "address.json"},
		{"absolute", `{"type":"object","properties":{"home":{"$ref":"https://example.com/address.json"}}}`, "https://example.com/address.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Type.Parse(tc.text, map[string]string{tc.refName: address}, format.DefaultLimits)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if _, err := s.Decode([]byte(`{"home":{"city":"Oslo"}}`)); err != nil {
				t.Errorf("a value matching the referenced schema is refused: %v", err)
			}
			if _, err := s.Decode([]byte(`{"home":{"city":7}}`)); err == nil {
				t.Error("a value breaking the referenced schema is accepted")
			}
		})
	}
}

// TestParseReferenceLongestName checks that a $ref resolved against the
// schema's $id picks the reference whose name matches the most of the URL.
func TestParseReferenceLongestName(t *testing.T) {
	t.Parallel()
	refs := map[string]string{"address.json": `{"type":"string"}`, "v2/address.json": `{"type":"integer"}`}
	s, err := Type.Parse(`{"$id":"https://example.com/v2/customer.json","properties":{"a":{"$ref":"address.json"}}}`, refs, format.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode([]byte(`{"a":7}`)); err != nil {
		t.Errorf("the $ref resolved to the shorter name: %v", err)
	}
}

// TestParseUnresolvableReference checks that a $ref to anything not given
// is refused, saying so, without fetching: the URLs would fail or hang if
// anything tried.
func TestParseUnresolvableReference(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{"address.json", "https://example.com/address.json", "file:///etc/passwd"} {
		_, err := Type.Parse(`{"properties":{"home":{"$ref":"`+ref+`"}}}`, nil, format.DefaultLimits)
		if err == nil || !strings.Contains(err.Error(), "not among its references") || !strings.Contains(err.Error(), ref) {
			t.Errorf("$ref %q: err = %v, want a refusal naming the missing reference", ref, err)
		}
	}
	_, err := Type.Parse(`{"$schema":"https://example.com/my-meta","type":"string"}`, nil, format.DefaultLimits)
	if err == nil {
		t.Error("an unknown $schema is accepted")
	}
}

// TestParseInvalid checks that malformed text and invalid schemas are
// refused with a sentence and not as a limit.
func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, text := range []string{``, `{`, `{"type":"string"} x`, `{"type":5}`, `{"minLength":-1}`, `{"pattern":"("}`} {
		_, err := Type.Parse(text, nil, format.DefaultLimits)
		if err == nil {
			t.Errorf("Parse(%q) accepted", text)
		} else if errors.Is(err, format.ErrLimit) {
			t.Errorf("Parse(%q) = %v, a limit refusal", text, err)
		}
	}
	if _, err := Type.Parse(`{}`, map[string]string{"a.json": `{`}, format.DefaultLimits); err == nil || !strings.Contains(err.Error(), `"a.json"`) {
		t.Errorf("a malformed reference: err = %v, want one naming it", err)
	}
}

// TestParseLimits checks every limit refusal wraps ErrLimit, including a
// nesting 100,000 deep (refused by the scan, before any recursion).
func TestParseLimits(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	deepObject := strings.Repeat(`{"not":`, 100) + `{}` + strings.Repeat("}", 100)
	small := format.Limits{MaxBytes: 64, MaxDepth: 8}
	cases := []struct {
		name, text string
		refs       map[string]string
		limits     format.Limits
	}{
		{"text too large", `{"description":"` + strings.Repeat("x", 100) + `"}`, nil, small},
		{"references too large", `{}`, map[string]string{"a.json": `{"description":"` + strings.Repeat("x", 40) + `"}`, "b.json": `{"description":"` + strings.Repeat("x", 40) + `"}`}, small},
		{"array nesting", `{"enum":` + deep + `}`, nil, format.DefaultLimits},
		{"subschema nesting", deepObject, nil, format.DefaultLimits},
		{"nesting in a reference", `{}`, map[string]string{"a.json": deep}, format.DefaultLimits},
		{"huge exponent", `{"maximum":1e-99999999}`, nil, format.DefaultLimits},
		{"long number", `{"maximum":1` + strings.Repeat("0", 200) + `}`, nil, format.DefaultLimits},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Type.Parse(tc.text, tc.refs, tc.limits)
			if !errors.Is(err, format.ErrLimit) {
				t.Errorf("err = %v, want one wrapping ErrLimit", err)
			}
		})
	}
	// Strings may hold brackets and escaped quotes without counting.
	if _, err := Type.Parse(`{"description":"[[[[[[[[[[\"{{{{{{{{{{"}`, nil, small); err != nil {
		t.Errorf("brackets inside a string count as nesting: %v", err)
	}
}

// FuzzParse feeds Parse arbitrary text: it may refuse it, never panic, and
// a schema it accepts reads itself compatibly.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{openA, closedA, person, `{"oneOf":[{"type":"string"},{"$ref":"#"}]}`,
		`{"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"integer"}}`,
		`{"patternProperties":{"^x":{"type":"string"}},"dependencies":{"a":["b"],"c":{"required":["d"]}}}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Type.Parse(text, nil, format.Limits{MaxBytes: 1 << 12, MaxDepth: 16})
		if err != nil {
			return
		}
		if incompat := s.ReadsFrom(s); len(incompat) != 0 {
			t.Errorf("%s does not read itself: %v", text, incompat)
		}
		s.Canonical(true)
	})
}
