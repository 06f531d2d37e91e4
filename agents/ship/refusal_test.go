package ship

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRefuse: the status each ProduceAll outcome is answered with. A 503
// says retry later (nothing of the request is lost by retrying), a 413 that
// retrying the same request cannot help, a 500 that the broker refused the
// records for good.
func TestRefuse(t *testing.T) {
	neverFits := &Refusal{Status: http.StatusRequestEntityTooLarge, Reason: "send fewer"}
	for _, c := range []struct {
		name   string
		errs   []error
		err    error
		status int // 0: no refusal
		reason string
	}{
		{"all acknowledged", []error{nil, nil}, nil, 0, ""},
		{"never fits", nil, ErrNeverFits, http.StatusRequestEntityTooLarge, "send fewer"},
		{"ack timeout", nil, ErrAckTimeout, http.StatusServiceUnavailable, "the broker did not acknowledge the events in time"},
		{"buffer full now", nil, ErrBufferFull, http.StatusServiceUnavailable, "the broker cannot take more events now"},
		{"request ended", []error{nil, context.Canceled}, nil, http.StatusServiceUnavailable, "request ended"},
		{"too large", []error{kerr.MessageTooLarge}, nil, http.StatusRequestEntityTooLarge, "an event is too large for the broker"},
		{"rejected", []error{nil, kerr.InvalidRecord}, nil, http.StatusInternalServerError, "the broker rejected the events"},
		{"retriable", []error{kerr.NotLeaderForPartition}, nil, http.StatusServiceUnavailable, "the broker did not acknowledge the events"},
	} {
		err := Refuse(c.errs, c.err, "an event", "events", neverFits)
		if c.status == 0 {
			if err != nil {
				t.Errorf("%s: refused %v", c.name, err)
			}
			continue
		}
		var r *Refusal
		if !errors.As(err, &r) || r.Status != c.status || r.Reason != c.reason {
			t.Errorf("%s: %#v, want %d %q", c.name, err, c.status, c.reason)
		}
	}
}
