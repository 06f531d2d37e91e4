package promwrite

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// Producer is what the handler produces through; *ship.Shipper implements
// it. It is the beacon's publisher contract: TryProduce must not wait for
// buffer room (the handler answers 503 instead), and the buffer figures let
// a request be refused whole rather than half produced.
type Producer interface {
	TryProduce(ctx context.Context, rec *kgo.Record, ack ship.AckFunc) error
	BufferedRecords() int64
	BufferedBytes() int64
	Config() ship.Config
}

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

// ackWaiter counts a request's outstanding acknowledgements; the producer
// calls ack serially on its own goroutine.
type ackWaiter struct {
	remaining atomic.Int64
	done      chan struct{}
	once      sync.Once
	mu        sync.Mutex // guards the following
	firstErr  error
}

func newAckWaiter(n int) *ackWaiter {
	w := &ackWaiter{done: make(chan struct{})}
	w.remaining.Store(int64(n))
	if n == 0 {
		close(w.done)
	}
	return w
}

func (w *ackWaiter) ack(_ *kgo.Record, err error) {
	if err != nil {
		w.setErr(err)
	}
	w.settle(1)
}

func (w *ackWaiter) setErr(err error) {
	w.mu.Lock()
	if w.firstErr == nil {
		w.firstErr = err
	}
	w.mu.Unlock()
}

func (w *ackWaiter) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstErr
}

// settle marks n records finished (acknowledged, failed or never sent).
func (w *ackWaiter) settle(n int64) {
	if w.remaining.Add(-n) == 0 {
		w.once.Do(func() { close(w.done) })
	}
}

// publish produces recs, each acknowledged through acks[i] as well, and
// waits until the broker acknowledged all of them, as the beacon's
// /v1/metrics does: a request the producer's buffer cannot hold now is
// refused whole (503), one it could never hold is 413 (Prometheus would
// retry a 503 forever), and on any failure or timeout the records not yet
// sent are canceled, since they would only duplicate the sender's retry.
func (h *Handler) publish(ctx context.Context, recs []*kgo.Record, acks []ship.AckFunc) error {
	if len(recs) == 0 {
		return nil
	}
	var size int64
	for _, r := range recs {
		size += ship.RecordCost(r)
	}
	pc := h.producer.Config()
	if int64(len(recs)) > int64(pc.MaxBufferedRecords) || size > int64(pc.MaxBufferedBytes) {
		return &publishError{status: http.StatusRequestEntityTooLarge,
			reason: "the request's samples are more than the producer can buffer; lower the remote_write queue_config's max_samples_per_send"}
	}
	if h.producer.BufferedRecords()+int64(len(recs)) > int64(pc.MaxBufferedRecords) ||
		h.producer.BufferedBytes()+size > int64(pc.MaxBufferedBytes) {
		return &publishError{status: http.StatusServiceUnavailable,
			reason: "the broker cannot take more samples now", err: ship.ErrBufferFull}
	}
	ctx, cancel := context.WithCancel(ctx)
	// Canceling after every record settled is a no-op; before, it drops the
	// records still buffered.
	defer cancel()
	w := newAckWaiter(len(recs))
	for i, r := range recs {
		ack := acks[i]
		err := h.producer.TryProduce(ctx, r, func(r *kgo.Record, err error) {
			ack(r, err)
			w.ack(r, err)
		})
		if err != nil {
			w.setErr(err)
			w.settle(int64(len(recs) - i))
			break
		}
	}
	timer := time.NewTimer(h.cfg.AckTimeout)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
		return &publishError{status: http.StatusServiceUnavailable,
			reason: "the broker did not acknowledge the samples in time", err: context.DeadlineExceeded}
	case <-ctx.Done():
		return &publishError{status: http.StatusServiceUnavailable, reason: "request ended", err: ctx.Err()}
	}
	err := w.err()
	if err == nil {
		return nil
	}
	switch ship.Classify(err) {
	case ship.KindBufferFull:
		return &publishError{status: http.StatusServiceUnavailable,
			reason: "the broker cannot take more samples now", err: err}
	case ship.KindTooLarge:
		return &publishError{status: http.StatusRequestEntityTooLarge, reason: "a sample is too large for the broker", err: err}
	case ship.KindRejected:
		return &publishError{status: http.StatusInternalServerError, reason: "the broker rejected the samples", err: err}
	}
	return &publishError{status: http.StatusServiceUnavailable, reason: "the broker did not acknowledge the samples", err: err}
}
