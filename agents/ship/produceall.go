package ship

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Publisher is what an ingest endpoint produces a request's records
// through; *Shipper implements it. TryProduce must not wait for buffer
// room, so that the endpoint can answer "retry later" at once, and the
// buffer figures let a request be refused whole rather than half produced.
type Publisher interface {
	TryProduce(ctx context.Context, rec *kgo.Record, ack AckFunc) error
	BufferedRecords() int64
	BufferedBytes() int64
	Config() Config
}

// ErrNeverFits is ProduceAll's answer to records that are more, together,
// than the producer's buffer can ever hold: retrying them as they are
// cannot help, the sender must send fewer at a time.
var ErrNeverFits = errors.New("ship: the records are more than the producer can ever buffer")

// ErrAckTimeout is ProduceAll's answer when the broker did not acknowledge
// every record within the timeout.
var ErrAckTimeout = errors.New("ship: the broker did not acknowledge the records in time")

// ProduceAll produces recs through p and waits until the broker
// acknowledged or failed each of them; acks[i], when acks and it are not
// nil, is called with recs[i]'s outcome as well (before ProduceAll
// returns, unless it returns early). It is what an ingest endpoint that
// answers only once its records are stored needs.
//
// Nothing is produced when the records can never fit the buffer
// (ErrNeverFits) or cannot now (ErrBufferFull). When the timeout passes or
// ctx ends first, it returns ErrAckTimeout or ctx's error and cancels the
// records not yet sent: they would only duplicate the sender's retry, and
// they hold buffer memory. Otherwise errs holds each record's error, nil
// for those acknowledged.
func ProduceAll(ctx context.Context, p Publisher, recs []*kgo.Record, acks []AckFunc, timeout time.Duration) (errs []error, err error) {
	if len(recs) == 0 {
		return nil, nil
	}
	var size int64
	for _, r := range recs {
		size += RecordCost(r)
	}
	pc := p.Config()
	if int64(len(recs)) > int64(pc.MaxBufferedRecords) || size > int64(pc.MaxBufferedBytes) {
		return nil, ErrNeverFits
	}
	if p.BufferedRecords()+int64(len(recs)) > int64(pc.MaxBufferedRecords) ||
		p.BufferedBytes()+size > int64(pc.MaxBufferedBytes) {
		return nil, ErrBufferFull
	}
	ctx, cancel := context.WithCancel(ctx)
	// Canceling after every record settled is a no-op; before, it drops the
	// records still buffered.
	defer cancel()
	var (
		mu        sync.Mutex // guards outcome, which acknowledgements may write after an early return
		remaining atomic.Int64
		done      = make(chan struct{})
	)
	outcome := make([]error, len(recs))
	remaining.Store(int64(len(recs)))
	// settle marks n records finished: acknowledged, failed or never sent.
	settle := func(n int64) {
		if remaining.Add(-n) == 0 {
			close(done)
		}
	}
	for i, r := range recs {
		var ack AckFunc
		if i < len(acks) {
			ack = acks[i]
		}
		err := p.TryProduce(ctx, r, func(r *kgo.Record, err error) {
			if ack != nil {
				ack(r, err)
			}
			mu.Lock()
			outcome[i] = err
			mu.Unlock()
			settle(1)
		})
		if err != nil {
			// This record and the rest were never handed to the producer.
			mu.Lock()
			for j := i; j < len(recs); j++ {
				outcome[j] = err
			}
			mu.Unlock()
			settle(int64(len(recs) - i))
			break
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return nil, ErrAckTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	return outcome, nil
}

// FirstError returns the first non-nil error of errs, or nil.
func FirstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
