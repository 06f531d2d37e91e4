package beacon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// errBufferFull is the publish answer when the producer cannot take the
// request's records now.
var errBufferFull = &ship.Refusal{Status: http.StatusServiceUnavailable,
	Reason: "the broker cannot take more events now", Err: ship.ErrBufferFull}

// publish produces recs and waits until the broker acknowledged all of them.
// The request is refused whole (errBufferFull) when the producer's buffer
// cannot hold it, so a client is rarely left with half a request in the
// topic. On any failure or timeout the
// records not yet sent are canceled (ship.ProduceAll).
//
// marks, one per record (or none), says what the audit counts for each
// record the broker acknowledges, whatever the request's answer.
func (s *Server) publish(ctx context.Context, recs []*kgo.Record, marks []auditMark) error {
	acks := make([]ship.AckFunc, len(marks))
	for i, m := range marks {
		acks[i] = m.counted()
	}
	errs, err := ship.ProduceAll(ctx, s.producer, recs, acks, s.cfg.AckTimeout)
	// ErrNeverFits is answered as a full buffer: a request is bounded
	// (max_events_per_request) well under the producer's buffer, so only a
	// misconfigured buffer lands there.
	return ship.Refuse(errs, err, "an event", "events", errBufferFull)
}

// result is the JSON answer to an ingest request.
type result struct {
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
	Dropped  int         `json:"dropped,omitempty"`
	Errors   []rejection `json:"errors,omitempty"`
	Error    string      `json:"error,omitempty"`
	// madeIDs counts the accepted events whose event_id the server made
	// (the client sent none, or no UUID).
	madeIDs int
	// marks says what the audit counts for each record to publish, in the
	// records' order (audit.go).
	marks []auditMark
}

// rejection is one event that went to the dead-letter topic.
type rejection struct {
	Index  int    `json:"index"`
	Reason string `json:"reason"`
}

// status is the answer's code once the records are acknowledged: 400 when
// every event was rejected (sending them again would not help), else 200.
func (res *result) status() int {
	if res.Accepted == 0 && res.Rejected > 0 {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// writeJSON writes v with the status. A failed write means the client went
// away; nothing more can be told to it.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// fail answers an ingest request that produced nothing (pixel requests get
// the GIF, others a JSON error).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, reason string) {
	if r.URL.Path == routePixel {
		writePixel(w, status)
		return
	}
	writeJSON(w, status, result{Error: reason})
}

// failPublish answers a request whose records were not all acknowledged.
func (s *Server) failPublish(w http.ResponseWriter, r *http.Request, err error) {
	var pe *ship.Refusal
	if !errors.As(err, &pe) {
		pe = &ship.Refusal{Status: http.StatusInternalServerError, Reason: "publishing failed", Err: err}
	}
	if pe.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds(s.cfg.RetryAfter))
		s.metrics.unavailable.Inc()
	}
	s.logger.Warn("events not acknowledged", "route", r.URL.Path, "status", pe.Status, "err", pe)
	s.fail(w, r, pe.Status, pe.Reason)
}
