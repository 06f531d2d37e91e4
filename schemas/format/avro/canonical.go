package avro

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	lib "github.com/twmb/avro"
)

// Canonical is the form registrations are compared by, with or without
// normalize: the form Confluent's normalize=true writes for Avro, the
// Parsing Canonical Form's shape (full names, no namespace attribute, each
// named type written once, fixed key order) keeping what Parsing Canonical
// Form drops but a registry must not: logical types, defaults, aliases,
// docs, field order and custom properties (sorted by key). Plain Parsing
// Canonical Form, which the library gives, would make two schemas that
// differ in a default or a decimal's scale one schema with one ID,
// although they resolve differently. Types defined by the referenced
// schemas stay names, so the normalized text parses with the same
// references.
//
// Without normalize Confluent compares the schema as Java's Avro prints it
// back, which fixes the key order and the spelling of names too, so the
// same form serves: a client that reprints a schema with its keys in
// another order (python-avro's, before it registers) gets the schema's ID,
// not a new one.
func (s *schema) Canonical(bool) string {
	w := normalWriter{names: s.names, refNames: s.refNames, written: make(map[string]bool)}
	w.node(s.tree, "")
	return w.b.String()
}

type normalWriter struct {
	b        strings.Builder
	names    *names
	refNames map[string]bool
	written  map[string]bool // named types already written out
}

func (w *normalWriter) node(n *lib.SchemaNode, ns string) {
	def, childNS, ok := w.names.resolve(n, ns)
	if !ok {
		w.value(n.Type)
		return
	}
	switch k := kind(def.Type); k {
	case "union":
		w.b.WriteByte('[')
		for i := range def.Branches {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.node(&def.Branches[i], childNS)
		}
		w.b.WriteByte(']')
	case "array", "map":
		w.b.WriteString(`{"type":"` + k + `"`)
		if k == "array" {
			w.b.WriteString(`,"items":`)
			w.node(def.Items, childNS)
		} else {
			w.b.WriteString(`,"values":`)
			w.node(def.Values, childNS)
		}
		w.props(def.Props)
		w.b.WriteByte('}')
	case "record", "enum", "fixed":
		full := fullName(def)
		if w.refNames[full] || w.written[full] {
			w.value(full)
			return
		}
		w.written[full] = true
		w.b.WriteString(`{"name":`)
		w.value(full)
		if childNS == "" && ns != "" {
			// A name without a dot is read in the enclosing namespace;
			// this type is of the null namespace and must say so.
			w.b.WriteString(`,"namespace":""`)
		}
		w.b.WriteString(`,"type":"` + k + `"`)
		switch k {
		case "enum":
			w.key("symbols")
			w.value(def.Symbols)
		case "fixed":
			w.key("size")
			w.b.WriteString(strconv.Itoa(def.Size))
			w.logical(def)
		case "record":
			w.key("fields")
			w.b.WriteByte('[')
			for i := range def.Fields {
				if i > 0 {
					w.b.WriteByte(',')
				}
				w.field(&def.Fields[i], childNS)
			}
			w.b.WriteByte(']')
		}
		if def.Doc != "" {
			w.key("doc")
			w.value(def.Doc)
		}
		if len(def.Aliases) > 0 {
			aliases := make([]string, len(def.Aliases))
			for i, a := range def.Aliases {
				aliases[i] = qualify(a, childNS)
			}
			slices.Sort(aliases)
			w.key("aliases")
			w.value(aliases)
		}
		if def.HasEnumDefault {
			w.key("default")
			w.value(def.EnumDefault)
		}
		w.props(def.Props)
		w.b.WriteByte('}')
	default:
		if def.LogicalType == "" && len(def.Props) == 0 {
			w.value(k)
			return
		}
		w.b.WriteString(`{"type":"` + k + `"`)
		w.logical(def)
		w.props(def.Props)
		w.b.WriteByte('}')
	}
}

func (w *normalWriter) field(f *lib.SchemaField, ns string) {
	w.b.WriteString(`{"name":`)
	w.value(f.Name)
	w.key("type")
	w.node(&f.Type, ns)
	if f.Order != "" && f.Order != "ascending" {
		w.key("order")
		w.value(f.Order)
	}
	if f.Doc != "" {
		w.key("doc")
		w.value(f.Doc)
	}
	if len(f.Aliases) > 0 {
		aliases := slices.Clone(f.Aliases)
		slices.Sort(aliases)
		w.key("aliases")
		w.value(aliases)
	}
	if f.HasDefault {
		w.key("default")
		w.value(f.Default)
	}
	w.props(f.Props)
	w.b.WriteByte('}')
}

func (w *normalWriter) logical(n *lib.SchemaNode) {
	if n.LogicalType == "" {
		return
	}
	w.key("logicalType")
	w.value(n.LogicalType)
	if n.LogicalType == "decimal" {
		w.key("precision")
		w.b.WriteString(strconv.Itoa(n.Precision))
		if n.Scale != 0 {
			w.key("scale")
			w.b.WriteString(strconv.Itoa(n.Scale))
		}
	}
}

func (w *normalWriter) props(props map[string]any) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.key(k)
		w.value(props[k])
	}
}

func (w *normalWriter) key(k string) {
	w.b.WriteByte(',')
	w.value(k)
	w.b.WriteByte(':')
}

// value writes a default or a property as JSON: objects with sorted keys,
// bytes and fixed values as Avro's JSON writes them (one code point per
// byte), floats in their shortest form.
func (w *normalWriter) value(v any) {
	switch t := v.(type) {
	case nil:
		w.b.WriteString("null")
	case bool:
		w.b.WriteString(strconv.FormatBool(t))
	case string:
		quoted, _ := json.Marshal(t)
		w.b.Write(quoted)
	case []string:
		w.b.WriteByte('[')
		for i, s := range t {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(s)
		}
		w.b.WriteByte(']')
	case []byte:
		runes := make([]rune, len(t))
		for i, c := range t {
			runes[i] = rune(c)
		}
		w.value(string(runes))
	case int32:
		w.b.WriteString(strconv.FormatInt(int64(t), 10))
	case int64:
		w.b.WriteString(strconv.FormatInt(t, 10))
	case int:
		w.b.WriteString(strconv.Itoa(t))
	case float32:
		w.float(float64(t), 32)
	case float64:
		w.float(t, 64)
	case json.Number:
		w.b.WriteString(t.String())
	case []any:
		w.b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(e)
		}
		w.b.WriteByte(']')
	case map[string]any:
		w.b.WriteByte('{')
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.value(k)
			w.b.WriteByte(':')
			w.value(t[k])
		}
		w.b.WriteByte('}')
	default:
		quoted, err := json.Marshal(t)
		if err != nil {
			quoted, _ = json.Marshal(err.Error())
		}
		w.b.Write(quoted)
	}
}

// float writes f as JSON. JSON has no NaN or infinity; Avro's JSON
// encoding spells them as strings, and so does this.
func (w *normalWriter) float(f float64, bits int) {
	switch {
	case math.IsNaN(f):
		w.value("NaN")
	case math.IsInf(f, 1):
		w.value("Infinity")
	case math.IsInf(f, -1):
		w.value("-Infinity")
	default:
		w.b.WriteString(strconv.FormatFloat(f, 'g', -1, bits))
	}
}
