package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"millrace/schemas/format"
)

// toyType is a stand-in schema language for the registry's tests, so its
// rules are tested without the Avro, Protobuf and JSON Schema types. A toy
// schema is a JSON object {"fields":[{"name":"a","default":1}],
// "uses":["Ref"]}: uses names references that must be given to Parse. A
// reader field the writer lacks, without a default, is incompatible (the
// shape of Avro's READER_FIELD_MISSING_DEFAULT_VALUE).
type toyType struct{ name string }

func toyTypes() map[string]format.Type {
	return map[string]format.Type{format.Avro: toyType{format.Avro}, format.JSON: toyType{format.JSON}}
}

func (t toyType) Name() string { return t.name }

type toyField struct {
	Name    string `json:"name"`
	Default any    `json:"default,omitempty"`
}

type toyBody struct {
	Fields []toyField `json:"fields"`
	Uses   []string   `json:"uses,omitempty"`
}

type toySchema struct {
	typ  toyType
	text string
	body toyBody
}

func (t toyType) Parse(text string, refs map[string]string, limits format.Limits) (format.Schema, error) {
	if len(text) > limits.MaxBytes {
		return nil, fmt.Errorf("the toy schema is larger than %d bytes: %w", limits.MaxBytes, format.ErrLimit)
	}
	var body toyBody
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("the toy schema is not a JSON object of fields: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range body.Fields {
		if f.Name == "" || seen[f.Name] {
			return nil, fmt.Errorf("the toy field name %q is empty or repeated", f.Name)
		}
		seen[f.Name] = true
	}
	for _, u := range body.Uses {
		if _, ok := refs[u]; !ok {
			return nil, fmt.Errorf("the toy schema uses %q, which no reference gives", u)
		}
	}
	return &toySchema{typ: t, text: text, body: body}, nil
}

func (s *toySchema) Type() format.Type { return s.typ }
func (s *toySchema) Text() string      { return s.text }

// Canonical ignores spacing; normalized also ignores field order.
func (s *toySchema) Canonical(normalize bool) string {
	body := s.body
	if normalize {
		body.Fields = slices.Clone(body.Fields)
		slices.SortFunc(body.Fields, func(a, b toyField) int { return strings.Compare(a.Name, b.Name) })
	}
	b, _ := json.Marshal(body)
	return string(b)
}

func (s *toySchema) ReadsFrom(writer format.Schema) []format.Incompat {
	w := writer.(*toySchema)
	var out []format.Incompat
	for i, f := range s.body.Fields {
		if f.Default != nil || slices.ContainsFunc(w.body.Fields, func(g toyField) bool { return g.Name == f.Name }) {
			continue
		}
		out = append(out, format.Incompat{
			Kind:    "READER_FIELD_MISSING_DEFAULT_VALUE",
			Path:    fmt.Sprintf("/fields/%d", i),
			Message: fmt.Sprintf("The field %s has no default and is missing in the writer.", f.Name),
		})
	}
	return out
}

func (s *toySchema) Decode([]byte) (any, error) { return nil, errors.New("toy schemas have no codec") }
func (s *toySchema) Encode(any) ([]byte, error) { return nil, errors.New("toy schemas have no codec") }
