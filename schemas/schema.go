// Package schemas defines millrace's event schemas — log line, click and metric
// sample — once, in Go: their fields, the Arrow schema each maps to, a fast
// decoder from the JSON value of a Kafka record to a row, and the validation the
// beacon and the sinks share.
//
// # Column mapping
//
// Every field becomes one column. Required fields are non-nullable columns;
// optional fields are nullable, and an absent or null JSON value becomes a null.
// Timestamps are timestamp[us] with time zone UTC (Parquet TIMESTAMP(MICROS,
// isAdjustedToUTC=true)). String maps (`fields` of a log line, `labels` of a
// metric sample) are map<string,string> with non-null values: DuckDB reads them
// as MAP(VARCHAR, VARCHAR) (`labels['code']`) and xitongsys/parquet-go reads
// them into a Go map[string]string, so no engine has to parse JSON to filter on
// a label. Free-form objects (`properties` of a click) are JSON text in a string
// column, because their values are of any type.
//
// # Unknown fields
//
// Each schema has one catch-all JSON column (`properties` for clicks, `extra`
// for log lines and metric samples). Top-level fields the schema does not know
// are folded into it as members of a JSON object, never dropped. When a folded
// field's name is already a member of the object (a click that sends both
// `properties.plan` and a top-level `plan`), the top-level one is renamed with
// leading underscores (`_plan`) until unique, so both values survive.
//
// # Evolution
//
// A schema has a version, written to every Parquet file's key-value metadata.
// The rules (enforced by [CheckEvolution]):
//   - a new version may only add fields, and only optional ones;
//   - existing fields keep their name, type and requiredness, and are never
//     removed or reordered.
//
// So old files stay readable next to new ones (engines that union by name see
// the new column as null in old files), an old producer's events still decode
// (the new field is simply null), and a new producer's events still decode on
// an old sink (the new field lands in the catch-all column).
//
// Users add fields without recompiling: [ParseFieldDecl] reads a declaration
// such as "campaign:string" and [Schema.Extend] appends the fields as optional
// columns, a version each. Every file also carries the schema's
// [Schema.Fingerprint], since the version alone does not say which fields a
// sink added.
package schemas

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// Type is the logical type of a field.
type Type int

// The field types.
const (
	// TypeString is a JSON string; a string column.
	TypeString Type = iota + 1
	// TypeInt64 is a JSON integer; an int64 column.
	TypeInt64
	// TypeFloat64 is a JSON number (or the strings "NaN", "+Inf", "-Inf", which
	// JSON cannot spell but Prometheus samples carry); a float64 column.
	TypeFloat64
	// TypeBool is a JSON boolean; a bool column.
	TypeBool
	// TypeTimestamp is an RFC 3339 string or an integer of epoch milliseconds;
	// a timestamp[us, UTC] column.
	TypeTimestamp
	// TypeStringMap is a JSON object whose values are strings; a
	// map<string,string> column.
	TypeStringMap
	// TypeJSON is a JSON object kept as its JSON text; a string column.
	TypeJSON
)

// String names the type as the documentation and errors spell it.
func (t Type) String() string {
	switch t {
	case TypeString:
		return "string"
	case TypeInt64:
		return "integer"
	case TypeFloat64:
		return "number"
	case TypeBool:
		return "boolean"
	case TypeTimestamp:
		return "timestamp"
	case TypeStringMap:
		return "object of strings"
	case TypeJSON:
		return "object"
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Field describes one field of an event and its column.
type Field struct {
	// Name is the JSON member name and the column name.
	Name string
	// Type is the field's logical type.
	Type Type
	// Required fields must be present and non-null; their columns are
	// non-nullable.
	Required bool
	// Doc is a one-line description for users and for `lake inspect`.
	Doc string
	// Enum, when not empty, lists the only values a string field may take.
	Enum []string
	// MaxBytes, when not 0, bounds a string field's value, or a string
	// map's keys and values together, in bytes: a field that becomes a key
	// or a label downstream (a metric's name, labels and source, a click's
	// type) must not let one event hold a megabyte of it. A longer value
	// is refused with ErrBadValue, so the event is dead-lettered with the
	// reason.
	MaxBytes int
	// Dictionary marks string columns whose values repeat (hosts, event types,
	// URLs), where Parquet dictionary encoding pays; unique values (ids, lines)
	// are cheaper without it.
	Dictionary bool
	// CatchAll marks the JSON column that unknown top-level fields fold into.
	// At most one field of a schema has it, and it must be of TypeJSON.
	CatchAll bool
	// Since is the schema version that added the field (1 for the originals).
	Since int
}

// Schema is one event schema. Build it with [New]; a Schema is immutable and
// safe for concurrent use.
type Schema struct {
	// Name is the schema's name: "log", "click" or "metric", or "registry"
	// for one built from a registry schema's columns (FromColumns).
	Name string
	// Version increases whenever a field is added.
	Version int
	// TimeField names the timestamp field that is the event's time.
	TimeField string
	// Fields lists the fields in column order.
	Fields []Field

	index       map[string]int
	byLength    [][]int // field indices by name length, for the decoder's lookup
	plainName   []bool  // by field: the name needs no escaping in JSON (see guessKey)
	checked     []int   // indices of the fields that are required or have an enum
	catchAll    int     // index of the catch-all field, or -1
	time        int     // index of TimeField
	arrow       *arrow.Schema
	fingerprint string
}

// Parquet key-value metadata keys written by the sinks (values are strings).
const (
	// MetaSchemaName holds the schema's name.
	MetaSchemaName = "millrace.schema"
	// MetaSchemaVersion holds the schema's version in decimal.
	MetaSchemaVersion = "millrace.schema_version"
	// MetaSchemaFingerprint holds the schema's Fingerprint, which tells apart
	// schemas of one version that added different fields (see Extend).
	MetaSchemaFingerprint = "millrace.schema_fingerprint"
)

// New checks the field list and returns the schema. It is used for the
// built-in schemas and by tests that model a future version.
func New(name string, version int, timeField string, fields []Field) (*Schema, error) {
	s := &Schema{Name: name, Version: version, TimeField: timeField, Fields: fields,
		index: make(map[string]int, len(fields)), catchAll: -1, time: -1}
	if name == "" || version < 1 {
		return nil, fmt.Errorf("schemas: a schema needs a name and a version >= 1")
	}
	for i, f := range fields {
		if f.Name == "" || f.Type < TypeString || f.Type > TypeJSON {
			return nil, fmt.Errorf("schemas: %s: field %d needs a name and a known type", name, i)
		}
		if _, dup := s.index[f.Name]; dup {
			return nil, fmt.Errorf("schemas: %s: field %q defined twice", name, f.Name)
		}
		if f.Since < 1 || f.Since > version {
			return nil, fmt.Errorf("schemas: %s: field %q: Since must be between 1 and the schema version", name, f.Name)
		}
		s.index[f.Name] = i
		if f.Required || len(f.Enum) > 0 || f.MaxBytes > 0 {
			s.checked = append(s.checked, i)
		}
		for len(s.byLength) <= len(f.Name) {
			s.byLength = append(s.byLength, nil)
		}
		s.byLength[len(f.Name)] = append(s.byLength[len(f.Name)], i)
		s.plainName = append(s.plainName, isPlainJSON(f.Name))
		if f.CatchAll {
			if f.Type != TypeJSON || f.Required || s.catchAll >= 0 {
				return nil, fmt.Errorf("schemas: %s: the catch-all field must be a single optional JSON field", name)
			}
			s.catchAll = i
		}
		if len(f.Enum) > 0 && f.Type != TypeString {
			return nil, fmt.Errorf("schemas: %s: field %q: only string fields take an enum", name, f.Name)
		}
		if f.MaxBytes > 0 && f.Type != TypeString && f.Type != TypeStringMap {
			return nil, fmt.Errorf("schemas: %s: field %q: only string and string map fields take MaxBytes", name, f.Name)
		}
	}
	i, ok := s.index[timeField]
	if !ok || fields[i].Type != TypeTimestamp {
		return nil, fmt.Errorf("schemas: %s: time field %q must be a timestamp field", name, timeField)
	}
	s.time = i
	s.fingerprint = s.computeFingerprint()
	s.arrow = s.buildArrow()
	return s, nil
}

// isPlainJSON reports whether name is written in a JSON string as its own
// bytes: valid UTF-8 without quotes, backslashes or control characters.
func isPlainJSON(name string) bool {
	return utf8.ValidString(name) && !strings.ContainsFunc(name, func(c rune) bool { return c == '"' || c == '\\' || c < ' ' })
}

func mustNew(name string, version int, timeField string, fields []Field) *Schema {
	s, err := New(name, version, timeField, fields)
	if err != nil {
		panic(err) // only reached for the built-in tables below, checked by tests
	}
	return s
}

// Field returns the field named name.
func (s *Schema) Field(name string) (Field, bool) {
	i, ok := s.index[name]
	if !ok {
		return Field{}, false
	}
	return s.Fields[i], true
}

// lookup is index[string(name)] for the decoder: comparing the few names of
// the same length costs less than hashing every member name.
func (s *Schema) lookup(name []byte) (int, bool) {
	if len(name) < len(s.byLength) {
		for _, i := range s.byLength[len(name)] {
			if string(name) == s.Fields[i].Name {
				return i, true
			}
		}
	}
	return 0, false
}

// FieldIndex returns the column index of the field named name, or -1.
func (s *Schema) FieldIndex(name string) int {
	if i, ok := s.index[name]; ok {
		return i
	}
	return -1
}

// CatchAll returns the name of the catch-all column, or "" when the schema has none.
func (s *Schema) CatchAll() string {
	if s.catchAll < 0 {
		return ""
	}
	return s.Fields[s.catchAll].Name
}

// Arrow returns the Arrow schema; its metadata carries the schema's name,
// version and fingerprint.
func (s *Schema) Arrow() *arrow.Schema { return s.arrow }

// TimestampType is the Arrow type of every timestamp column.
var TimestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// ArrowType returns the Arrow type of a field.
func (f Field) ArrowType() arrow.DataType {
	switch f.Type {
	case TypeInt64:
		return arrow.PrimitiveTypes.Int64
	case TypeFloat64:
		return arrow.PrimitiveTypes.Float64
	case TypeBool:
		return arrow.FixedWidthTypes.Boolean
	case TypeTimestamp:
		return TimestampType
	case TypeStringMap:
		m := arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)
		// Non-null values: the JSON decoder rejects null label values, and a
		// required value is what xitongsys/parquet-go's map[string]string reads.
		m.SetItemNullable(false)
		return m
	default:
		return arrow.BinaryTypes.String
	}
}

func (s *Schema) buildArrow() *arrow.Schema {
	fields := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		fields[i] = arrow.Field{Name: f.Name, Type: f.ArrowType(), Nullable: !f.Required}
	}
	md := arrow.NewMetadata(
		[]string{MetaSchemaName, MetaSchemaVersion, MetaSchemaFingerprint},
		[]string{s.Name, strconv.Itoa(s.Version), s.fingerprint})
	return arrow.NewSchema(fields, &md)
}

// CheckEvolution reports whether next is a valid later version of prev under the
// evolution rules in the package documentation.
func CheckEvolution(prev, next *Schema) error {
	if prev.Name != next.Name {
		return fmt.Errorf("schemas: %s and %s are different schemas", prev.Name, next.Name)
	}
	if next.Version <= prev.Version {
		return fmt.Errorf("schemas: %s: version %d does not follow %d", next.Name, next.Version, prev.Version)
	}
	if len(next.Fields) < len(prev.Fields) {
		return fmt.Errorf("schemas: %s v%d removes fields of v%d", next.Name, next.Version, prev.Version)
	}
	for i, p := range prev.Fields {
		n := next.Fields[i]
		if n.Name != p.Name || n.Type != p.Type || n.Required != p.Required || n.CatchAll != p.CatchAll {
			return fmt.Errorf("schemas: %s v%d changes field %q of v%d (name, type, requiredness and order are fixed)",
				next.Name, next.Version, p.Name, prev.Version)
		}
	}
	for _, n := range next.Fields[len(prev.Fields):] {
		if n.Required {
			return fmt.Errorf("schemas: %s v%d adds required field %q: old producers would fail; new fields must be optional",
				next.Name, next.Version, n.Name)
		}
		if n.Since <= prev.Version {
			return fmt.Errorf("schemas: %s v%d: new field %q must have Since > %d", next.Name, next.Version, n.Name, prev.Version)
		}
	}
	return nil
}
