package schemas

import "errors"

// The classes of validation failure; test with errors.Is. A *ValidationError
// wraps exactly one of them.
var (
	// ErrMalformed: the value is not a JSON object (syntax error, trailing data,
	// or a top-level array/string/number).
	ErrMalformed = errors.New("malformed JSON")
	// ErrMissingField: a required field is absent or null.
	ErrMissingField = errors.New("missing required field")
	// ErrWrongType: a field has the wrong JSON type (a number where a string
	// belongs, a fraction where an integer belongs, a non-string label value).
	ErrWrongType = errors.New("wrong type")
	// ErrBadTimestamp: a timestamp is neither RFC 3339 nor integer epoch
	// milliseconds, or is out of range.
	ErrBadTimestamp = errors.New("bad timestamp")
	// ErrBadValue: a value of the right type that the field does not allow
	// (not in the field's enum, a number out of range).
	ErrBadValue = errors.New("bad value")
)

// ValidationError says why a value does not fit a schema. Its Error text is
// the reason the sinks put on dead-letter records and the beacon returns.
type ValidationError struct {
	// Schema is the schema's name.
	Schema string
	// Field is the offending field, or "" for errors about the whole value.
	Field string
	// Err is one of ErrMalformed, ErrMissingField, ErrWrongType, ErrBadTimestamp, ErrBadValue.
	Err error
	// Detail adds specifics (what was found, where).
	Detail string
}

// Error implements error.
func (e *ValidationError) Error() string {
	msg := e.Schema + ": "
	if e.Field != "" {
		msg += "field \"" + e.Field + "\": "
	}
	msg += e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the error class, for errors.Is.
func (e *ValidationError) Unwrap() error { return e.Err }
