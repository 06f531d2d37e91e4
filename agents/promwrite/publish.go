package promwrite

import (
	"context"
	"errors"
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// Producer is what the handler produces through; *ship.Shipper implements
// it (ship.Publisher).
type Producer = ship.Publisher

// publishError says why a request's records were not all acknowledged and
// which status answers it.
type publishError struct {
	status int // 503 (retry later), 413 (can never fit) or 500
	reason string
	err    error
}

func (e *publishError) Error() string {
	if e.err != nil {
		return e.reason + ": " + e.err.Error()
	}
	return e.reason
}

func (e *publishError) Unwrap() error { return e.err }

// publish produces recs, each acknowledged through acks[i] as well, and
// waits until the broker acknowledged all of them, as the beacon's
// /v1/metrics does: a request the producer's buffer cannot hold now is
// refused whole (503), one it could never hold is 413 (Prometheus would
// retry a 503 forever).
func (h *Handler) publish(ctx context.Context, recs []*kgo.Record, acks []ship.AckFunc) error {
	errs, err := ship.ProduceAll(ctx, h.producer, recs, acks, h.cfg.AckTimeout)
	switch {
	case errors.Is(err, ship.ErrNeverFits):
		return &publishError{status: http.StatusRequestEntityTooLarge,
			reason: "the request's samples are more than the producer can buffer; lower the remote_write queue_config's max_samples_per_send"}
	case errors.Is(err, ship.ErrAckTimeout):
		return &publishError{status: http.StatusServiceUnavailable,
			reason: "the broker did not acknowledge the samples in time", err: err}
	case err == nil:
		err = ship.FirstError(errs)
	}
	if err == nil {
		return nil
	}
	switch ship.Classify(err) {
	case ship.KindBufferFull:
		return &publishError{status: http.StatusServiceUnavailable,
			reason: "the broker cannot take more samples now", err: err}
	case ship.KindCanceled:
		return &publishError{status: http.StatusServiceUnavailable, reason: "request ended", err: err}
	case ship.KindTooLarge:
		return &publishError{status: http.StatusRequestEntityTooLarge, reason: "a sample is too large for the broker", err: err}
	case ship.KindRejected:
		return &publishError{status: http.StatusInternalServerError, reason: "the broker rejected the samples", err: err}
	}
	return &publishError{status: http.StatusServiceUnavailable, reason: "the broker did not acknowledge the samples", err: err}
}
