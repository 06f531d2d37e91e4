// Package jsonschema is the JSON Schema language (schemaType JSON) of the
// schema registry: parsing and compiling a schema with the schemas it
// references, its canonical form, Confluent's compatibility rules between a
// reader and a writer, and validating JSON values against it.
//
// Compiling and validation are santhosh-tekuri/jsonschema's (drafts 4, 6, 7,
// 2019-09 and 2020-12; a schema without $schema is draft-07, Confluent's
// default). Nothing is ever fetched: a $ref resolves to the schema itself, to
// one of the texts the registry passed as references, or to a draft's
// metaschema, which the library embeds; anything else is refused.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"

	"millrace/schemas/format"
)

// Type is the JSON Schema language; the registry holds it under
// format.JSON. It keeps no state.
var Type format.Type = jsonType{}

// jsonType implements format.Type.
type jsonType struct{}

// Name is the registry's schemaType for JSON Schema.
func (jsonType) Name() string { return format.JSON }

// rootURL is where the parsed schema lives for the compiler when it declares
// no $id: references named by a relative URL ("address.json") resolve
// against it. The scheme is one nothing could fetch.
const rootURL = rootBase + "schema.json"

// rootBase is rootURL's directory, cut from the URLs errors name.
const rootBase = "registry:///"

// Parse checks the limits, then compiles text with refs as the only other
// resources. refs is keyed by the reference's name as the registry knows it:
// a relative URL ("address.json", resolved against the schema's $id, or
// against rootURL when it has none) or an absolute one
// ("https://example.com/address.json"). A zero field of limits takes
// format.DefaultLimits' value.
func (jsonType) Parse(text string, refs map[string]string, limits format.Limits) (format.Schema, error) {
	limits = limits.WithDefaults()
	if err := limits.CheckSizes(text, refs); err != nil {
		return nil, err
	}
	doc, err := parseDocument([]byte(text), limits.MaxDepth)
	if err != nil {
		return nil, fmt.Errorf("the schema %w", err)
	}
	compiler := santhosh.NewCompiler()
	compiler.DefaultDraft(santhosh.Draft7)
	loader := &refLoader{refs: map[string]any{}}
	compiler.UseLoader(loader)
	if err := compiler.AddResource(rootURL, doc); err != nil {
		return nil, fmt.Errorf("the schema cannot be registered with the compiler: %v", err)
	}
	base, _ := url.Parse(rootURL)
	// In name order, so that of several bad references the same one is
	// named every time.
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		refText := refs[name]
		refDoc, err := parseDocument([]byte(refText), limits.MaxDepth)
		if err != nil {
			return nil, fmt.Errorf("the referenced schema %q %w", name, err)
		}
		u, err := url.Parse(name)
		if err != nil {
			return nil, fmt.Errorf("the reference name %q is not a URL: %v", name, err)
		}
		loader.refs[name] = refDoc
		if err := compiler.AddResource(base.ResolveReference(u).String(), refDoc); err != nil {
			return nil, fmt.Errorf("the referenced schema %q cannot be registered with the compiler: %v", name, err)
		}
	}
	compiled, err := compiler.Compile(rootURL)
	var missing *santhosh.LoadURLError
	switch {
	case errors.As(err, &missing):
		return nil, fmt.Errorf("the schema refers to %s, which is not among its references, and nothing is fetched: register the schema it names and list it in the references", strings.TrimPrefix(missing.URL, rootBase))
	case err != nil:
		return nil, fmt.Errorf("the schema does not compile: %s", oneLine(err.Error()))
	}
	return &schema{text: text, doc: doc, compiled: compiled}, nil
}

// parseDocument scans data for the limits, then decodes it with numbers
// kept as written (json.Number). The error completes a sentence that starts
// with what was parsed.
func parseDocument(data []byte, maxDepth int) (any, error) {
	if err := scan(data, maxDepth); err != nil {
		return nil, fmt.Errorf("%v: %w", err, format.ErrLimit)
	}
	doc, err := santhosh.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("is not valid JSON: %v", err)
	}
	return doc, nil
}

// refLoader serves the compiler the references it could not find under the
// URLs Parse registered them at: a schema with an $id of its own resolves a
// relative $ref against that $id, so "address.json" may be asked for as
// https://example.com/address.json. It never reads a file or the network.
type refLoader struct {
	refs map[string]any // by reference name, as the registry passed them
}

// Load returns the reference whose relative name ends the URL, the longest
// such name when several do ("v2/address.json" over "address.json"), or
// refuses.
func (l *refLoader) Load(location string) (any, error) {
	if doc, ok := l.refs[location]; ok {
		return doc, nil
	}
	var found any
	longest := -1
	for name, doc := range l.refs {
		u, err := url.Parse(name)
		suffix := "/" + strings.TrimPrefix(name, "/")
		if err == nil && !u.IsAbs() && strings.HasSuffix(location, suffix) && len(suffix) > longest {
			found, longest = doc, len(suffix)
		}
	}
	if longest < 0 {
		return nil, errNotAReference
	}
	return found, nil
}

// errNotAReference is the loader's refusal; Parse words the error.
var errNotAReference = errors.New("not among the references")

// oneLine folds the library's indented multi-line errors into one line.
func oneLine(message string) string {
	lines := strings.Split(message, "\n")
	for i, line := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(line), "- ")
	}
	return strings.Join(lines, "; ")
}

// schema implements format.Schema. Its fields are set once by Parse.
type schema struct {
	text     string
	doc      any // the decoded text, numbers as json.Number
	compiled *santhosh.Schema
}

// Type is the JSON Schema Type.
func (s *schema) Type() format.Type { return Type }

// Text is the schema as registered.
func (s *schema) Text() string { return s.text }

// Canonical without normalize is the text with insignificant whitespace
// removed, everything else as written (key order, string escapes, number
// spellings). With normalize, the document is re-encoded: object keys sorted,
// strings escaped the one way encoding/json escapes them (without HTML
// escaping), numbers as written.
func (s *schema) Canonical(normalize bool) string {
	if !normalize {
		var out bytes.Buffer
		if err := json.Compact(&out, []byte(s.text)); err != nil {
			// Parse accepted the text as JSON, so Compact cannot fail.
			return s.text
		}
		return out.String()
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s.doc); err != nil {
		// The document came from JSON text, so it always encodes.
		return s.text
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// ReadsFrom applies Confluent's JSON Schema rules with s as the update and
// writer as the original (see compat.go).
func (s *schema) ReadsFrom(writer format.Schema) []format.Incompat {
	w, ok := writer.(*schema)
	if !ok {
		return []format.Incompat{{Kind: "TYPE_CHANGED", Path: "#/", Message: "the writer's schema is not a JSON Schema, so a JSON Schema reader cannot be checked against it"}}
	}
	return compare(w.compiled, s.compiled)
}
