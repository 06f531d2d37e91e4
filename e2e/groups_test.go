package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFranzGoGroupsExactlyOnce is the single-broker acceptance test: an
// idempotent producer writes a million records to six partitions; three
// consumers in one group read them while one leaves midway; every record
// arrives exactly once and in offset order per partition; committed offsets
// survive a broker restart; a second group receives everything again.
func TestFranzGoGroupsExactlyOnce(t *testing.T) {
	const (
		total      = 1_000_000
		partitions = 6
		topic      = "orders"
	)
	b := startBroker(t)
	b.createTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Idempotence is kgo's default; acks=all with it.
	producer := b.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	produced := make([]atomic.Int64, partitions)
	var produceErr atomic.Value
	for i := 0; i < total; i++ {
		value := make([]byte, 8)
		binary.BigEndian.PutUint64(value, uint64(i))
		r := &kgo.Record{Key: []byte(fmt.Sprintf("customer-%d", i%997)), Value: value}
		producer.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				produceErr.CompareAndSwap(nil, err)
				return
			}
			produced[r.Partition].Add(1)
		})
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := produceErr.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// One group of three; each record must be the next offset of its partition.
	v := newVerifier(partitions)
	var consumers [3]*kgo.Client
	var wg sync.WaitGroup
	stopAfter := [3]int64{0, total / 4, 0} // consumer 1 leaves after a quarter
	for i := range consumers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g1"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
			kgo.SessionTimeout(10*time.Second), kgo.RebalanceTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		consumers[i] = cl
		wg.Add(1)
		go func(i int, cl *kgo.Client) {
			defer wg.Done()
			for ctx.Err() == nil && v.count() < total {
				pollCtx, pollCancel := context.WithTimeout(ctx, time.Second)
				fetches := cl.PollFetches(pollCtx)
				pollCancel()
				fetches.EachError(func(t string, p int32, err error) {
					if err != context.DeadlineExceeded && err != context.Canceled {
						v.fail(fmt.Errorf("consumer %d fetch %s/%d: %w", i, t, p, err))
					}
				})
				fetches.EachRecord(v.see)
				cl.AllowRebalance()
				if stopAfter[i] > 0 && v.count() >= stopAfter[i] {
					// Leave cleanly: commit what was processed, then leave.
					if err := cl.CommitUncommittedOffsets(ctx); err != nil {
						v.fail(fmt.Errorf("consumer %d final commit: %w", i, err))
					}
					cl.Close()
					return
				}
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				v.fail(fmt.Errorf("consumer %d final commit: %w", i, err))
			}
		}(i, cl)
	}
	wg.Wait()
	v.check(t, produced[:], total)
	for i, cl := range consumers {
		if i != 1 {
			cl.Close()
		}
	}

	// Committed offsets survive a restart of the broker.
	b.restart(syscall.SIGTERM)
	committed, err := b.admin(t).FetchOffsets(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		o, ok := committed.Lookup(topic, p)
		if !ok || o.Err != nil || o.At != produced[p].Load() {
			t.Errorf("after restart, g1 committed offset of partition %d = %+v, want %d", p, o, produced[p].Load())
		}
	}

	// Publish-subscribe: a second group gets every record again.
	v2 := newVerifier(partitions)
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g2"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for ctx.Err() == nil && v2.count() < total {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) { v2.fail(fmt.Errorf("g2 fetch %s/%d: %w", t, p, err)) })
		fetches.EachRecord(v2.see)
	}
	v2.check(t, produced[:], total)
}

// verifier checks that records arrive exactly once and in order: each
// record's offset must be the next one of its partition, and its value (a
// sequence number) larger than the previous one on that partition.
type verifier struct {
	mu      sync.Mutex // guards the following
	next    []int64    // next expected offset per partition
	lastSeq []int64
	seen    int64
	err     error
}

func newVerifier(partitions int) *verifier {
	v := &verifier{next: make([]int64, partitions), lastSeq: make([]int64, partitions)}
	for i := range v.lastSeq {
		v.lastSeq[i] = -1
	}
	return v
}

func (v *verifier) see(r *kgo.Record) {
	v.mu.Lock()
	defer v.mu.Unlock()
	seq := int64(binary.BigEndian.Uint64(r.Value))
	switch {
	case v.err != nil:
	case r.Offset != v.next[r.Partition]:
		v.err = fmt.Errorf("partition %d: got offset %d, want %d (duplicate or gap)", r.Partition, r.Offset, v.next[r.Partition])
	case seq <= v.lastSeq[r.Partition]:
		v.err = fmt.Errorf("partition %d offset %d: sequence %d after %d (out of order)", r.Partition, r.Offset, seq, v.lastSeq[r.Partition])
	default:
		v.next[r.Partition]++
		v.lastSeq[r.Partition] = seq
		v.seen++
	}
}

func (v *verifier) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		v.err = err
	}
}

func (v *verifier) count() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return 1 << 62 // stop consuming: the test has failed
	}
	return v.seen
}

func (v *verifier) check(t *testing.T, produced []atomic.Int64, total int64) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		t.Fatal(v.err)
	}
	if v.seen != total {
		t.Fatalf("consumed %d records, want %d", v.seen, total)
	}
	for p := range v.next {
		if v.next[p] != produced[p].Load() {
			t.Errorf("partition %d: consumed up to offset %d, produced %d", p, v.next[p], produced[p].Load())
		}
	}
}
