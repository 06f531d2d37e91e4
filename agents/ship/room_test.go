package ship

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRoomBoundsAndWakes(t *testing.T) {
	r := newRoom(100)
	if !r.tryTake(60) || r.tryTake(60) {
		t.Fatal("60 then 60 in a room of 100: want the first taken and the second refused")
	}
	// Waiters are woken as room is given back, each in turn.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := r.take(context.Background(), 40); err != nil {
				t.Error(err)
				return
			}
			r.give(40)
		})
	}
	time.Sleep(20 * time.Millisecond) // let them queue (or take: 60+40 fits)
	r.give(60)
	wg.Wait()
	if u := r.used.Load(); u != 0 {
		t.Fatalf("room in use after every give: %d", u)
	}
	// Larger than the whole room: taken when nothing else is held.
	if !r.tryTake(500) {
		t.Fatal("a record larger than the room was refused although the room was empty")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.take(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take from a full room: %v, want the context's error", err)
	}
}

// TestBufferCountsRecordMemory: a stalled broker fills the buffer with
// exactly as many records as their cost allows; the next Produce waits
// until the broker answers, and every record's room comes back.
func TestBufferCountsRecordMemory(t *testing.T) {
	c := newCluster(t)
	release := make(chan struct{})
	stallProduce(c, release)
	rec := func() *kgo.Record { return &kgo.Record{Topic: "t", Key: []byte("k"), Value: make([]byte, 300)} }
	cost := RecordCost(rec())
	if cost != 301+RecordOverhead {
		t.Fatalf("cost of a 301-byte record: %d", cost)
	}
	s := startShipper(t, c, Config{MaxBatchBytes: 1024, MaxBufferedBytes: int(10 * cost)}, nil)
	defer s.Close()
	var acked sync.WaitGroup
	ack := func(_ *kgo.Record, err error) {
		if err != nil {
			t.Errorf("record failed: %v", err)
		}
		acked.Done()
	}
	acked.Add(11)
	for range 10 {
		s.Produce(context.Background(), rec(), ack)
	}
	if got := s.BufferedBytes(); got != 10*cost {
		t.Fatalf("buffered %d after 10 records, want %d", got, 10*cost)
	}
	produced := make(chan struct{})
	go func() {
		s.Produce(context.Background(), rec(), ack)
		close(produced)
	}()
	select {
	case <-produced:
		t.Fatal("an 11th record fit in a buffer of 10")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-produced
	acked.Wait()
	if got := s.BufferedBytes(); got != 0 {
		t.Fatalf("buffered %d after every acknowledgement, want 0", got)
	}
}
