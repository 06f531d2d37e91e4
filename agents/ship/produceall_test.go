package ship

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fakePublisher holds what it is given; answer decides each record's
// outcome (nil: it stays unacknowledged until settle).
type fakePublisher struct {
	cfg      Config
	buffered int64
	refuseAt int   // TryProduce refuses the record of this index (-1: none)
	refusal  error // and answers this
	answer   func(i int) (err error, now bool)

	mu      sync.Mutex
	ctxs    []context.Context
	pending []func()
}

func (f *fakePublisher) TryProduce(ctx context.Context, rec *kgo.Record, ack AckFunc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.ctxs)
	if i == f.refuseAt {
		return f.refusal
	}
	f.ctxs = append(f.ctxs, ctx)
	err, now := f.answer(i)
	if now {
		ack(rec, err)
	} else {
		f.pending = append(f.pending, func() { ack(rec, err) })
	}
	return nil
}
func (f *fakePublisher) BufferedRecords() int64 { return f.buffered }
func (f *fakePublisher) BufferedBytes() int64   { return 0 }
func (f *fakePublisher) Config() Config         { return f.cfg }

func records(n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "t", Value: []byte("v")}
	}
	return recs
}

// TestProduceAll: a request is refused whole when it can never fit or
// cannot now; otherwise each record's outcome comes back in order, the
// per-record acknowledgements are called, and a timeout cancels what is
// still unsent.
func TestProduceAll(t *testing.T) {
	cfg := Config{MaxBufferedRecords: 10, MaxBufferedBytes: 1 << 20}
	rejected := errors.New("rejected")
	acked := func(int) (error, bool) { return nil, true }

	t.Run("never fits", func(t *testing.T) {
		f := &fakePublisher{cfg: cfg, refuseAt: -1, answer: acked}
		if _, err := ProduceAll(context.Background(), f, records(11), nil, time.Second); !errors.Is(err, ErrNeverFits) || len(f.ctxs) != 0 {
			t.Fatalf("11 records with room for 10: %v after %d produced, want ErrNeverFits and none", err, len(f.ctxs))
		}
	})
	t.Run("full now", func(t *testing.T) {
		f := &fakePublisher{cfg: cfg, buffered: 8, refuseAt: -1, answer: acked}
		if _, err := ProduceAll(context.Background(), f, records(3), nil, time.Second); !errors.Is(err, ErrBufferFull) || len(f.ctxs) != 0 {
			t.Fatalf("3 records with room for 2: %v after %d produced, want ErrBufferFull and none", err, len(f.ctxs))
		}
	})
	t.Run("outcomes in order", func(t *testing.T) {
		f := &fakePublisher{cfg: cfg, refuseAt: 3, refusal: ErrBufferFull, answer: func(i int) (error, bool) {
			if i == 1 {
				return rejected, true
			}
			return nil, true
		}}
		var called []error
		acks := make([]AckFunc, 5)
		for i := range acks {
			acks[i] = func(_ *kgo.Record, err error) { called = append(called, err) }
		}
		errs, err := ProduceAll(context.Background(), f, records(5), acks, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := []error{nil, rejected, nil, ErrBufferFull, ErrBufferFull}
		for i := range want {
			if errs[i] != want[i] {
				t.Errorf("record %d: %v, want %v", i, errs[i], want[i])
			}
		}
		if len(called) != 3 || FirstError(errs) != rejected {
			t.Errorf("acks called %d times (want 3, for the records produced), first error %v", len(called), FirstError(errs))
		}
	})
	t.Run("timeout cancels the rest", func(t *testing.T) {
		f := &fakePublisher{cfg: cfg, refuseAt: -1, answer: func(i int) (error, bool) { return nil, i == 0 }}
		if _, err := ProduceAll(context.Background(), f, records(2), nil, 10*time.Millisecond); !errors.Is(err, ErrAckTimeout) {
			t.Fatalf("one record never acknowledged: %v, want ErrAckTimeout", err)
		}
		if f.ctxs[1].Err() == nil {
			t.Error("the unacknowledged record's context is still live after the timeout")
		}
		f.pending[0]() // a late acknowledgement must not panic or race
	})
}
