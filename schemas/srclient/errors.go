package srclient

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"
)

// The classes of failure, for errors.Is. A consumer dead-letters a record
// whose error is ErrNotFramed, ErrUnknownSchema or ErrUndecodable (the
// record will never decode, however often it is retried) and retries on
// ErrUnavailable (the registry will answer later).
var (
	// ErrNotFramed: the value does not begin with Confluent's magic byte 0
	// and a 4-byte schema ID.
	ErrNotFramed = errors.New("the value is not in Confluent's wire format (magic byte 0 and a 4-byte schema ID)")
	// ErrUnknownSchema: the registry has no such schema ID, subject or
	// version (404).
	ErrUnknownSchema = errors.New("the schema registry does not know the schema")
	// ErrUndecodable: the registry's schema does not parse here (a type
	// this client lacks, a reference that does not resolve), or the value
	// does not decode with it.
	ErrUndecodable = errors.New("the value cannot be decoded with its schema")
	// ErrUnavailable: the registry could not be reached or did not answer
	// usefully (a transport error, a timeout, 5xx, 401/403, 429).
	ErrUnavailable = errors.New("the schema registry is unavailable")
)

// Error is a failure of the client with its class (one of the Err
// variables above) and what happened.
type Error struct {
	// Class is ErrNotFramed, ErrUnknownSchema, ErrUndecodable or
	// ErrUnavailable.
	Class error
	// Err is the cause.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

// Is matches the class.
func (e *Error) Is(target error) bool { return target == e.Class }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func classed(class error, format string, args ...any) error {
	return &Error{Class: class, Err: fmt.Errorf(format, args...)}
}

// classify wraps an error of the sr client in its class: 404s are unknown
// schemas; any other answer, or none, is the registry being unavailable,
// except a 422 (the request itself is wrong), left as it is.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode == http.StatusNotFound:
			return &Error{Class: ErrUnknownSchema, Err: fmt.Errorf("%s: %s", what, re.Message)}
		case re.StatusCode == http.StatusUnprocessableEntity || re.StatusCode == http.StatusConflict:
			return fmt.Errorf("%s: %s", what, re.Message)
		}
		return &Error{Class: ErrUnavailable, Err: fmt.Errorf("%s: the registry answered %d: %s", what, re.StatusCode, re.Error())}
	}
	return &Error{Class: ErrUnavailable, Err: fmt.Errorf("%s: %w", what, err)}
}
