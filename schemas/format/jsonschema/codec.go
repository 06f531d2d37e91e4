package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	santhosh "github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxValueDepth bounds the nesting of arrays and objects in a value Decode
// and Encode accept. It is larger than format.Limits' bound on schemas: a
// recursive schema ($ref to itself) describes values of any depth.
const MaxValueDepth = 256

// maxReportedErrors is how many validation failures an error lists.
const maxReportedErrors = 3

// Decode reads one JSON text, validates it and returns it as plain values:
// map[string]any, []any, string, bool, nil, and numbers as int64 when their
// value is integral and fits (1, 1.0 and 1e3 alike, as JSON Schema's
// "integer" counts them), float64 otherwise. Validation sees the numbers as
// written, before that conversion.
//
// Validation costs what the schema asks for: a schema whose combinations
// branch into recursion (anyOf of two branches that both $ref the whole)
// costs time exponential in the value's nesting, as in every JSON Schema
// validator; Parse does not refuse such schemas.
func (s *schema) Decode(data []byte) (any, error) {
	if err := scan(data, MaxValueDepth); err != nil {
		return nil, fmt.Errorf("the value %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return nil, fmt.Errorf("the value is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("the value is not JSON: more follows the first JSON value")
	}
	if err := s.validate(value); err != nil {
		return nil, err
	}
	return plain(value)
}

// Encode validates value, shaped as encoding/json decodes JSON text (Decode's
// results are too), and returns it as compact JSON text.
func (s *schema) Encode(value any) ([]byte, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("the value cannot be written as JSON: %v", err)
	}
	if err := scan(data, MaxValueDepth); err != nil {
		return nil, fmt.Errorf("the value %v", err)
	}
	// Validate what will be sent, decoded as a reader will decode it.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var decoded any
	if err := dec.Decode(&decoded); err != nil {
		return nil, fmt.Errorf("the value cannot be read back as JSON: %v", err)
	}
	if err := s.validate(decoded); err != nil {
		return nil, err
	}
	return data, nil
}

// validate checks value against the schema and turns the library's error
// tree into one sentence naming each failing location and keyword.
func (s *schema) validate(value any) error {
	err := s.compiled.Validate(value)
	if err == nil {
		return nil
	}
	var verr *santhosh.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("the value cannot be validated: %v", err)
	}
	var failures []string
	var walk func(unit santhosh.OutputUnit)
	walk = func(unit santhosh.OutputUnit) {
		if len(unit.Errors) == 0 && unit.Error != nil {
			failures = append(failures, fmt.Sprintf("at %q (schema %q): %s", "/"+strings.TrimPrefix(unit.InstanceLocation, "/"), unit.KeywordLocation, unit.Error))
		}
		for _, child := range unit.Errors {
			walk(child)
		}
	}
	walk(*verr.DetailedOutput())
	more := ""
	if len(failures) > maxReportedErrors {
		more = fmt.Sprintf("; and %d more", len(failures)-maxReportedErrors)
		failures = failures[:maxReportedErrors]
	}
	return fmt.Errorf("the value does not match the schema: %s%s", strings.Join(failures, "; "), more)
}

// plain replaces json.Number by int64 or float64, as Decode documents. The
// depth is bounded by scan, so recursion is.
func plain(value any) (any, error) {
	switch v := value.(type) {
	case json.Number:
		return number(v)
	case map[string]any:
		for key, item := range v {
			converted, err := plain(item)
			if err != nil {
				return nil, err
			}
			v[key] = converted
		}
	case []any:
		for i, item := range v {
			converted, err := plain(item)
			if err != nil {
				return nil, err
			}
			v[i] = converted
		}
	}
	return value, nil
}

// number converts one JSON number: int64 when integral and within int64's
// range, float64 otherwise.
func number(n json.Number) (any, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return nil, fmt.Errorf("the value has the number %s, which is beyond a float64's range", n)
	}
	// -2^63 is exact in float64; 2^63 is the first value above int64's range.
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return int64(f), nil
	}
	return f, nil
}
