package avro

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	lib "github.com/twmb/avro"
)

// Decode reads one value written with s, all of data. Records come back as
// map[string]any, arrays as []any, maps as map[string]any, a union as its
// branch's value, an enum as its symbol (string), bytes and fixed as
// []byte; int as int32, long as int64, float as float32, double as float64.
// Logical types come back as their underlying Avro value: a date or
// time-millis as int32, a timestamp or time-micros as int64 (since the
// epoch, in the type's unit), a decimal as its unscaled two's-complement
// bytes, a uuid as its string or fixed bytes, a duration as its 12 bytes.
// Bytes left over after the value are an error: the value was written with
// another schema.
//
// The library bounds what malformed input can make it allocate (a block
// count is held against the bytes left) and reports a short or bad input
// as an error.
func (s *schema) Decode(data []byte) (any, error) {
	var v any
	rest, err := s.codec.Decode(data, &v)
	if err != nil {
		return nil, fmt.Errorf("avro: the value does not decode with this schema: %s", strings.TrimPrefix(err.Error(), "avro: "))
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("avro: %d bytes are left after the value; it was written with another schema", len(rest))
	}
	return v, nil
}

// Encode writes value, shaped as encoding/json decodes JSON text (or as
// Decode returns values), in Avro's binary encoding.
//
// Numbers (float64, json.Number, or Go integers and floats) become the
// schema's int, long, float or double; an int or long must be a whole
// number in range, a float must be in float's range. A date, time or
// timestamp may also be given as an RFC 3339 string, a decimal as a number
// or a numeric string, a uuid on fixed(16) as its hex-and-dashes string. Bytes and fixed take []byte, or a string read as
// Avro's JSON encoding writes bytes: one code point (up to U+00FF) per byte.
// A record is an object whose keys are all its fields' names; a missing
// field takes its default (a ["null", …] field without one, null).
//
// A union takes, in this order:
//   - nil: the null branch;
//   - an object with one key naming a branch (its full or short name, or a
//     type name such as "long" or "array"), as Avro's JSON encoding writes a
//     union: that branch, with the key's value;
//   - anything else: the first branch, in the schema's order, that the value
//     fits: by its JSON type, for a number by its range and being whole, for
//     a string in an enum by being a symbol, for a record by its keys being
//     fields and holding every field without a default.
func (s *schema) Encode(value any) ([]byte, error) {
	v, err := s.convert(s.tree, "", value, "")
	if err != nil {
		return nil, err
	}
	out, err := s.codec.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("avro: %s", strings.TrimPrefix(err.Error(), "avro: "))
	}
	return out, nil
}

// convert turns a JSON-shaped value into the Go value the library encodes
// for n, unions written as the library's tagged form ({branch: value}) so
// the branch chosen here is the one written.
func (s *schema) convert(n *lib.SchemaNode, ns string, v any, at string) (any, error) {
	n, ns, ok := s.names.resolve(n, ns)
	if !ok {
		return nil, fmt.Errorf("avro: at %s: the schema names an undefined type", where(at))
	}
	fail := func(want string) error {
		return fmt.Errorf("avro: at %s: %s is %s, not %s", where(at), describeType(n), want, jsonType(v))
	}
	switch k := kind(n.Type); k {
	case "null":
		if v != nil {
			return nil, fail("null")
		}
		return nil, nil
	case "boolean":
		if _, ok := v.(bool); !ok {
			return nil, fail("a boolean")
		}
		return v, nil
	case "int", "long":
		if str, ok := v.(string); ok && isTimeLogical(n.LogicalType) {
			return str, nil
		}
		bits := 32
		if k == "long" {
			bits = 64
		}
		i, err := whole(v, bits)
		if err != nil {
			return nil, fmt.Errorf("avro: at %s (%s): %w", where(at), describeType(n), err)
		}
		if bits == 32 {
			return int32(i), nil
		}
		return i, nil
	case "float", "double":
		f, err := floating(v, k == "float")
		if err != nil {
			return nil, fmt.Errorf("avro: at %s (%s): %w", where(at), describeType(n), err)
		}
		if k == "float" {
			return float32(f), nil
		}
		return f, nil
	case "string":
		if _, ok := v.(string); !ok {
			return nil, fail("a string")
		}
		return v, nil
	case "bytes", "fixed":
		switch t := v.(type) {
		case []byte:
			return t, nil
		case string:
			if n.LogicalType == "decimal" || n.LogicalType == "uuid" {
				return t, nil
			}
			return codePoints(t, at)
		case float64, json.Number:
			if n.LogicalType == "decimal" {
				return t, nil
			}
		}
		return nil, fail("bytes")
	case "enum":
		sym, ok := v.(string)
		if !ok {
			return nil, fail("a symbol")
		}
		if !slices.Contains(n.Symbols, sym) {
			return nil, fmt.Errorf("avro: at %s: %q is not a symbol of enum %q", where(at), sym, fullName(n))
		}
		return sym, nil
	case "array":
		items, ok := v.([]any)
		if !ok {
			return nil, fail("an array")
		}
		out := make([]any, len(items))
		for i, item := range items {
			c, err := s.convert(n.Items, ns, item, at+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case "map":
		entries, ok := v.(map[string]any)
		if !ok {
			return nil, fail("an object")
		}
		out := make(map[string]any, len(entries))
		for key, e := range entries {
			c, err := s.convert(n.Values, ns, e, at+"/"+key)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
		return out, nil
	case "record":
		return s.record(n, ns, v, at)
	case "union":
		return s.union(n, ns, v, at)
	}
	return nil, fmt.Errorf("avro: at %s: type %q cannot be encoded", where(at), n.Type)
}

func (s *schema) record(n *lib.SchemaNode, ns string, v any, at string) (any, error) {
	entries, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("avro: at %s: %s is an object, not %s", where(at), describeType(n), jsonType(v))
	}
	out := make(map[string]any, len(entries))
	for key, e := range entries {
		i := slices.IndexFunc(n.Fields, func(f lib.SchemaField) bool { return f.Name == key })
		if i < 0 {
			return nil, fmt.Errorf("avro: at %s: record %q has no field %q", where(at), fullName(n), key)
		}
		c, err := s.convert(&n.Fields[i].Type, ns, e, at+"/"+key)
		if err != nil {
			return nil, err
		}
		out[key] = c
	}
	for i := range n.Fields {
		f := &n.Fields[i]
		if _, present := entries[f.Name]; present || f.HasDefault {
			continue
		}
		// The library fills null for a missing ["null", T] field.
		t, _, ok := s.names.resolve(&f.Type, ns)
		if ok && kind(t.Type) == "union" && len(t.Branches) > 0 && t.Branches[0].Type == "null" {
			continue
		}
		return nil, fmt.Errorf("avro: at %s: record %q needs field %q, which has no default", where(at), fullName(n), f.Name)
	}
	return out, nil
}

func (s *schema) union(n *lib.SchemaNode, ns string, v any, at string) (any, error) {
	branches := make([]*lib.SchemaNode, len(n.Branches))
	spaces := make([]string, len(n.Branches))
	for i := range n.Branches {
		b, bns, ok := s.names.resolve(&n.Branches[i], ns)
		if !ok {
			return nil, fmt.Errorf("avro: at %s: the schema names an undefined type", where(at))
		}
		branches[i], spaces[i] = b, bns
	}
	pick := func(i int, v any) (any, error) {
		c, err := s.convert(branches[i], spaces[i], v, at)
		if err != nil {
			return nil, err
		}
		if kind(branches[i].Type) == "null" {
			return nil, nil
		}
		return map[string]any{branchTag(branches[i]): c}, nil
	}
	if tagged, ok := v.(map[string]any); ok && len(tagged) == 1 {
		for key, inner := range tagged {
			for i, b := range branches {
				if key == branchTag(b) || (isNamedKind(b.Type) && key == shortName(fullName(b))) {
					return pick(i, inner)
				}
			}
		}
	}
	for i, b := range branches {
		if fits(b, v) {
			return pick(i, v)
		}
	}
	kinds := make([]string, len(branches))
	for i, b := range branches {
		kinds[i] = describeType(b)
	}
	return nil, fmt.Errorf("avro: at %s: %s fits none of the union's branches [%s]", where(at), jsonType(v), strings.Join(kinds, ", "))
}

// fits reports whether v is shaped for branch b, without converting it:
// picking a branch costs no more than looking at v's top.
func fits(b *lib.SchemaNode, v any) bool {
	switch k := kind(b.Type); k {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "int", "long":
		if _, ok := v.(string); ok {
			return isTimeLogical(b.LogicalType)
		}
		bits := 32
		if k == "long" {
			bits = 64
		}
		_, err := whole(v, bits)
		return err == nil
	case "float", "double":
		_, err := floating(v, k == "float")
		return err == nil
	case "string":
		_, ok := v.(string)
		return ok
	case "bytes", "fixed":
		switch v.(type) {
		case string, []byte:
			return true
		case float64, json.Number:
			return b.LogicalType == "decimal"
		}
		return false
	case "enum":
		sym, ok := v.(string)
		return ok && slices.Contains(b.Symbols, sym)
	case "array":
		_, ok := v.([]any)
		return ok
	case "map":
		_, ok := v.(map[string]any)
		return ok
	case "record":
		entries, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for key := range entries {
			if !slices.ContainsFunc(b.Fields, func(f lib.SchemaField) bool { return f.Name == key }) {
				return false
			}
		}
		for _, f := range b.Fields {
			if _, present := entries[f.Name]; !present && !f.HasDefault {
				return false
			}
		}
		return true
	}
	return false
}

// branchTag is the name the library's tagged union form gives a branch.
func branchTag(b *lib.SchemaNode) string {
	if isNamedKind(b.Type) {
		return fullName(b)
	}
	return kind(b.Type)
}

func isTimeLogical(logical string) bool {
	return logical == "date" || strings.HasPrefix(logical, "time") || strings.HasPrefix(logical, "local-timestamp")
}

// whole reads v as a whole number that fits in a signed integer of bits.
func whole(v any, bits int) (int64, error) {
	var i int64
	switch t := v.(type) {
	case int32:
		i = int64(t)
	case int64:
		i = t
	case int:
		i = int64(t)
	case json.Number:
		if parsed, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			i = parsed
			break
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", t)
		}
		return whole(f, bits)
	case float32:
		return whole(float64(t), bits)
	case float64:
		if t != math.Trunc(t) || math.IsInf(t, 0) {
			return 0, fmt.Errorf("%v is not a whole number", t)
		}
		if t < -(1<<63) || t >= 1<<63 {
			return 0, fmt.Errorf("%v does not fit in %d bits", t, bits)
		}
		i = int64(t)
	default:
		return 0, fmt.Errorf("needs a number, not %s", jsonType(v))
	}
	if bits == 32 && (i < math.MinInt32 || i > math.MaxInt32) {
		return 0, fmt.Errorf("%d does not fit in 32 bits", i)
	}
	return i, nil
}

// floating reads v as a number; narrow says it must fit in a float32.
func floating(v any, narrow bool) (float64, error) {
	var f float64
	switch t := v.(type) {
	case float64:
		f = t
	case float32:
		f = float64(t)
	case int32:
		f = float64(t)
	case int64:
		f = float64(t)
	case int:
		f = float64(t)
	case json.Number:
		parsed, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", t)
		}
		f = parsed
	default:
		return 0, fmt.Errorf("needs a number, not %s", jsonType(v))
	}
	if narrow && !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
		return 0, fmt.Errorf("%v is out of a float's range", f)
	}
	return f, nil
}

// codePoints reads a string as Avro's JSON encoding writes bytes.
func codePoints(s, at string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			return nil, fmt.Errorf("avro: at %s: bytes are written one code point up to U+00FF per byte; %q is not", where(at), r)
		}
		out = append(out, byte(r))
	}
	return out, nil
}

func where(at string) string {
	if at == "" {
		return "the top"
	}
	return at
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, float32, json.Number, int, int32, int64:
		return "a number"
	case string:
		return "a string"
	case []byte:
		return "bytes"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}
