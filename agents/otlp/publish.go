package otlp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// Producer is what the receiver produces through; *ship.Shipper implements
// it. As for the beacon, TryProduce must not wait for buffer room (the
// receiver answers "retry later" instead).
type Producer interface {
	TryProduce(ctx context.Context, rec *kgo.Record, ack ship.AckFunc) error
	BufferedRecords() int64
	BufferedBytes() int64
	Config() ship.Config
}

// retry says whether, and why, a whole request should be sent again.
type retry int

const (
	retryNone        retry = iota
	retryBackedUp          // the producer's buffer is full: 429, RESOURCE_EXHAUSTED
	retryUnavailable       // the broker did not acknowledge: 503, UNAVAILABLE
)

// outcome is how a request's export went.
type outcome struct {
	rejected int    // items refused for good (partial success)
	message  string // why, for the partial success or the retry answer
	retry    retry
}

// encoded is one record with the items it carries.
type encoded struct {
	rec   *kgo.Record
	items int
	acked func() // counts the record's items once acknowledged
}

// encodeParts marshals each part into a record of topic no larger than
// maxBytes: a larger part is split per resource, and a resource that alone
// is larger is refused. It returns the records and the items refused.
// acked, when not nil, gives each record's acknowledgement callback.
func encodeParts[T any](s signal[T], enc, topic string, maxBytes int, parts []part[T], acked func(T) func()) ([]encoded, int, string) {
	var recs []encoded
	refused, why := 0, ""
	for len(parts) > 0 {
		p := parts[0]
		parts = parts[1:]
		value, err := s.marshal(enc, p.data)
		if err == nil && len(value) <= maxBytes {
			e := encoded{rec: &kgo.Record{Topic: topic, Key: p.key, Value: value}, items: p.items}
			if acked != nil {
				e.acked = acked(p.data)
			}
			recs = append(recs, e)
			continue
		}
		if err == nil && s.resources(p.data) > 1 {
			split := splitByResource(s, p.data, false)
			for i := range split {
				split[i].key = p.key
			}
			parts = append(split, parts...)
			continue
		}
		refused += p.items
		if err != nil {
			why = fmt.Sprintf("encoding %d %s failed: %v", p.items, s.name, err)
		} else {
			why = fmt.Sprintf("a resource's %d %s encode to %d bytes, more than the %d a record may hold", p.items, s.name, len(value), maxBytes)
		}
	}
	return recs, refused, why
}

// publish produces recs and waits until the broker acknowledged each or
// failed it. A request the producer's buffer cannot hold now is refused
// whole (retryBackedUp); records the producer or broker refused count as
// rejected, unless none was acknowledged and the failure is one a retry
// may cure (then the whole request is to be retried).
func (r *Receiver) publish(ctx context.Context, recs []encoded) outcome {
	if len(recs) == 0 {
		return outcome{}
	}
	var size int64
	items := 0
	for _, e := range recs {
		size += ship.RecordCost(e.rec)
		items += e.items
	}
	pc := r.producer.Config()
	if int64(len(recs)) > int64(pc.MaxBufferedRecords) || size > int64(pc.MaxBufferedBytes) {
		return outcome{rejected: items, message: "the request is larger than the producer can ever buffer; send smaller batches"}
	}
	if r.producer.BufferedRecords()+int64(len(recs)) > int64(pc.MaxBufferedRecords) ||
		r.producer.BufferedBytes()+size > int64(pc.MaxBufferedBytes) {
		return outcome{retry: retryBackedUp, message: "the broker cannot take more data now"}
	}
	ctx, cancel := context.WithCancel(ctx)
	// Canceling after every record settled is a no-op; before, it drops the
	// records still buffered, which the client's retry would duplicate.
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards errs
		errs = make([]error, len(recs))
	)
	wg.Add(len(recs))
	for i, e := range recs {
		err := r.producer.TryProduce(ctx, e.rec, func(_ *kgo.Record, err error) {
			if err == nil && e.acked != nil {
				e.acked()
			}
			mu.Lock()
			errs[i] = err
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			mu.Lock()
			for j := i; j < len(recs); j++ {
				errs[j] = err
			}
			mu.Unlock()
			wg.Add(i - len(recs))
			break
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	timer := time.NewTimer(r.cfg.AckTimeout)
	defer timer.Stop()
	// On a timeout the answer does not wait for the records to settle:
	// canceling drops those still buffered, but one in a batch already
	// sent settles only when the broker answers or the connection fails,
	// which with a broker gone can take longer than any client waits. Its
	// acknowledgement, if it comes, is still counted.
	select {
	case <-done:
	case <-timer.C:
		return outcome{retry: retryUnavailable, message: "the broker did not acknowledge the data in time"}
	case <-ctx.Done():
		return outcome{retry: retryUnavailable, message: "the request ended before the broker acknowledged its data"}
	}
	return tally(recs, errs)
}

// tally turns the records' acknowledgements into the request's outcome.
func tally(recs []encoded, errs []error) outcome {
	var o outcome
	acked, retryable := 0, true
	var first error
	for i, err := range errs {
		if err == nil {
			acked++
			continue
		}
		o.rejected += recs[i].items
		if first == nil {
			first = err
		}
		switch ship.Classify(err) {
		case ship.KindTooLarge, ship.KindRejected:
			retryable = false
		}
	}
	if first == nil {
		return o
	}
	switch {
	case acked == 0 && retryable && errors.Is(first, ship.ErrBufferFull):
		return outcome{retry: retryBackedUp, message: "the broker cannot take more data now"}
	case acked == 0 && retryable:
		return outcome{retry: retryUnavailable, message: "the broker did not acknowledge the data: " + first.Error()}
	}
	o.message = fmt.Sprintf("%d of %d records were not acknowledged by the broker: %v", len(recs)-acked, len(recs), first)
	return o
}
