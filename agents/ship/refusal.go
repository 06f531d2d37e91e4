package ship

import (
	"errors"
	"net/http"
)

// Refusal says why an HTTP request's records were not all acknowledged and
// which status answers it: 503 (retry later), 413 (a record, or the
// request, can never fit) or 500.
type Refusal struct {
	Status int
	Reason string // the answer's text
	Err    error  // the cause, for the log
}

func (e *Refusal) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *Refusal) Unwrap() error { return e.Err }

// Refuse turns ProduceAll's outcome into an HTTP receiver's answer: nil
// when every record was acknowledged, else a *Refusal. one and many name
// the records in the reasons ("an event", "events"); neverFits answers
// ErrNeverFits, whose remedy depends on the receiver (the sender sends less
// at a time, or the operator raises the buffer).
func Refuse(errs []error, err error, one, many string, neverFits *Refusal) error {
	switch {
	case errors.Is(err, ErrNeverFits):
		return neverFits
	case errors.Is(err, ErrAckTimeout):
		return &Refusal{Status: http.StatusServiceUnavailable, Reason: "the broker did not acknowledge the " + many + " in time", Err: err}
	case err == nil:
		err = FirstError(errs)
	}
	if err == nil {
		return nil
	}
	switch Classify(err) {
	case KindBufferFull:
		return &Refusal{Status: http.StatusServiceUnavailable, Reason: "the broker cannot take more " + many + " now", Err: err}
	case KindCanceled:
		return &Refusal{Status: http.StatusServiceUnavailable, Reason: "request ended", Err: err}
	case KindTooLarge:
		return &Refusal{Status: http.StatusRequestEntityTooLarge, Reason: one + " is too large for the broker", Err: err}
	case KindRejected:
		return &Refusal{Status: http.StatusInternalServerError, Reason: "the broker rejected the " + many, Err: err}
	}
	return &Refusal{Status: http.StatusServiceUnavailable, Reason: "the broker did not acknowledge the " + many, Err: err}
}
