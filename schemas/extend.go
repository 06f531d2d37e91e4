package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Declared fields: a user adds optional typed fields to a built-in schema
// without recompiling (`millrace sink --field campaign:string`, or `fields:` in
// a sink's config). Each declaration is "name:type" with one of these types.
var declaredTypes = map[string]Type{
	"string":    TypeString,
	"int64":     TypeInt64,
	"double":    TypeFloat64,
	"bool":      TypeBool,
	"timestamp": TypeTimestamp,
}

// reservedNames are column names a declared field may not take: the Hive
// partition columns engines add from the directory names (dt=…/hr=…).
var reservedNames = []string{"dt", "hr"}

// ParseFieldDecl parses a declared field, "name:type", where type is string,
// int64, double, bool or timestamp (as the schema's own timestamps: RFC 3339
// or epoch milliseconds on input). The name must be a plain identifier
// (letters, digits, underscores; not starting with a digit), so every engine
// can name the column without quoting. String fields are dictionary-encoded:
// added fields are usually categories (a campaign, a plan, an experiment arm),
// and Parquet falls back to plain pages when the values turn out unique.
func ParseFieldDecl(decl string) (Field, error) {
	name, typ, ok := strings.Cut(decl, ":")
	if !ok {
		return Field{}, fmt.Errorf("schemas: field %q: want name:type", decl)
	}
	if !isIdentifier(name) {
		return Field{}, fmt.Errorf("schemas: field %q: the name must be letters, digits and underscores, not starting with a digit", decl)
	}
	t, ok := declaredTypes[typ]
	if !ok {
		return Field{}, fmt.Errorf("schemas: field %q: type %q: want string, int64, double, bool or timestamp", decl, typ)
	}
	return Field{Name: name, Type: t, Dictionary: t == TypeString, Doc: "declared field (" + typ + ")"}, nil
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Extend returns the schema with fields appended as optional columns, one
// version per field: the first added field is version s.Version+1, and the
// schema's version is s.Version+len(fields). Declaring fields in the order
// they appear over time (only ever appending to the list) therefore makes
// each schema a valid evolution of the one before (see CheckEvolution). The
// version alone does not say which fields were added (two sinks may add
// different ones); the fingerprint does.
//
// A name may not repeat an existing field's name, even in another case
// (DuckDB and Hive match column names case-insensitively), nor a Hive
// partition column (dt, hr). Required, CatchAll and Enum are not allowed:
// added fields are always optional, so events without them stay valid.
// With no fields, Extend returns s itself.
func (s *Schema) Extend(fields ...Field) (*Schema, error) {
	if len(fields) == 0 {
		return s, nil
	}
	all := append(append(make([]Field, 0, len(s.Fields)+len(fields)), s.Fields...), fields...)
	for i := len(s.Fields); i < len(all); i++ {
		f := &all[i]
		if f.Required || f.CatchAll || len(f.Enum) > 0 {
			return nil, fmt.Errorf("schemas: %s: added field %q must be optional, without an enum, and not a catch-all", s.Name, f.Name)
		}
		for _, r := range reservedNames {
			if strings.EqualFold(f.Name, r) {
				return nil, fmt.Errorf("schemas: %s: field %q would hide the Hive partition column %s", s.Name, f.Name, r)
			}
		}
		for _, g := range all[:i] {
			if strings.EqualFold(f.Name, g.Name) {
				return nil, fmt.Errorf("schemas: %s: field %q is already a column (%q)", s.Name, f.Name, g.Name)
			}
		}
		f.Since = s.Version + i - len(s.Fields) + 1
	}
	return New(s.Name, s.Version+len(fields), s.TimeField, all)
}

// Fingerprint identifies the schema's columns: 16 hex digits of a SHA-256
// over its name and every field's name, type, requiredness and role, in
// order. Two schemas with the same fingerprint write the same columns. It is
// written to every Parquet file's metadata beside the version.
func (s *Schema) Fingerprint() string { return s.fingerprint }

func (s *Schema) computeFingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", s.Name)
	for _, f := range s.Fields {
		fmt.Fprintf(h, "%s\x00%s\x00%t\x00%t\n", f.Name, f.Type, f.Required, f.CatchAll)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
