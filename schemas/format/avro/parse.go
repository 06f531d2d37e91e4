package avro

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"millrace/internal/jsondepth"
	"millrace/schemas/format"

	lib "github.com/twmb/avro"
)

// logicalTypes are the logical types the library converts (to time.Time,
// *big.Rat, time.Duration, [16]byte, Duration).
var logicalTypes = []string{
	"date", "time-millis", "time-micros",
	"timestamp-millis", "timestamp-micros", "timestamp-nanos",
	"local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos",
	"decimal", "big-decimal", "uuid", "duration",
}

// rawLogical registers, per logical type, a custom type without callbacks:
// the library's documented way to decode the underlying Avro value instead
// of the converted one. Decode thus returns a timestamp-millis as the int64
// on the wire and a decimal as its two's-complement bytes, values the
// registry's clients can print and re-encode without knowing Go's time or
// big-number types. Encoding keeps the library's logical encoders, which
// take the plain value as well as an RFC 3339 time or a decimal number.
var rawLogical = func() []lib.SchemaOpt {
	opts := make([]lib.SchemaOpt, len(logicalTypes))
	for i, name := range logicalTypes {
		opts[i] = lib.CustomType{LogicalType: name}
	}
	return opts
}()

// jsonDepthPerLevel is how many JSON levels one level of schema nesting may
// take: a record in a union in a field is the record's object, its "fields"
// array, the field's object and the union's array.
const jsonDepthPerLevel = 4

// Parse parses text with the named types of refs (keyed by full name; the
// order among them is worked out here) available to it.
//
// Limits are checked before the library reads anything: the sizes, then the
// JSON nesting of every text, refused beyond jsonDepthPerLevel×MaxDepth+4
// levels, so a hostile `[[[[…` or a deep default costs one pass over its
// bytes. After parsing, the schema's own nesting (records, arrays and maps
// in each other) is held against MaxDepth. A zero Limits field takes
// format.DefaultLimits' value.
func (avroType) Parse(text string, refs map[string]string, limits format.Limits) (format.Schema, error) {
	limits = limits.WithDefaults()
	if err := limits.CheckSizes(text, refs); err != nil {
		return nil, fmt.Errorf("avro: %w", err)
	}
	maxJSON := jsonDepthPerLevel*limits.MaxDepth + 4
	if err := checkJSONDepth(text, maxJSON); err != nil {
		return nil, fmt.Errorf("avro: the schema %w", err)
	}
	refKeys := make([]string, 0, len(refs))
	for name := range refs {
		refKeys = append(refKeys, name)
	}
	slices.Sort(refKeys)
	for _, name := range refKeys {
		if err := checkJSONDepth(refs[name], maxJSON); err != nil {
			return nil, fmt.Errorf("avro: the referenced schema %q %w", name, err)
		}
	}

	order, defined, err := refOrder(refs, refKeys, limits.MaxDepth)
	if err != nil {
		return nil, err
	}
	var cache lib.SchemaCache
	if err := parseRefs(&cache, refs, order); err != nil {
		return nil, err
	}
	codec, err := cache.Parse(text, rawLogical...)
	if err != nil {
		return nil, fmt.Errorf("avro: %s", describe(text, err))
	}
	tree := codec.Root()
	index, depth := indexNames(tree)
	if depth > limits.MaxDepth {
		return nil, fmt.Errorf("avro: the schema nests records, arrays and maps %d deep, more than the limit of %d: %w", depth, limits.MaxDepth, format.ErrLimit)
	}
	return &schema{text: text, codec: codec, tree: tree, names: index, refNames: defined}, nil
}

// parseRefs gives cache the named types of refs. It parses them as one
// text, the fields of a record of its own, because a SchemaCache parse
// costs time in proportion to the types already cached: a thousand
// references parsed one by one cost a million steps, parsed together a
// thousand. When they fail together, each is parsed alone, in order, to
// name the one at fault.
func parseRefs(cache *lib.SchemaCache, refs map[string]string, order []string) error {
	if len(order) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"millrace_references","fields":[`)
	for i, key := range order {
		// A text that is not one JSON value could change the record
		// around it.
		if !json.Valid([]byte(refs[key])) {
			return fmt.Errorf("avro: the referenced schema %q is not JSON", key)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"r%d","type":%s}`, i, refs[key])
	}
	b.WriteString(`]}`)
	_, together := cache.Parse(b.String(), rawLogical...)
	if together == nil {
		return nil
	}
	var alone lib.SchemaCache
	for _, key := range order {
		if _, err := alone.Parse(refs[key], rawLogical...); err != nil {
			return fmt.Errorf("avro: the referenced schema %q: %s", key, describe(refs[key], err))
		}
	}
	return fmt.Errorf("avro: the referenced schemas do not parse together: %s", together)
}

// checkJSONDepth refuses text whose arrays and objects nest deeper than
// limit, before the parser recurses into it.
func checkJSONDepth(text string, limit int) error {
	if at, deeper := jsondepth.Exceeds(text, limit); deeper {
		return fmt.Errorf("nests JSON arrays and objects more than %d deep (at byte %d): %w", limit, at, format.ErrLimit)
	}
	return nil
}

// describe turns a library parse error into the sentence the registry
// answers with. The library names an unknown type without saying where it
// is used; the text is scanned for the first use of that name.
func describe(text string, err error) string {
	msg := err.Error()
	for _, unknown := range []string{`unknown type "`, `unknown named type "`} {
		i := strings.Index(msg, unknown)
		if i < 0 {
			continue
		}
		rest := msg[i+len(unknown):]
		j := strings.IndexByte(rest, '"')
		if j < 0 {
			break
		}
		name := rest[:j]
		if _, used, scanErr := scanTypes(text); scanErr == nil {
			for _, u := range used {
				if u.name == name {
					return fmt.Sprintf("%s: unknown type %q", u.where, name)
				}
			}
		}
		break
	}
	return msg
}
