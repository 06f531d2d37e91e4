package kafka

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/coord/embedded"
	"millrace/broker/log"
)

// TestProducerIDBlocksAreDisjoint runs two allocators (two brokers) on one
// store concurrently: every ID is handed out once.
func TestProducerIDBlocksAreDisjoint(t *testing.T) {
	server, err := embedded.Open(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	var allocators []*producerIDs
	for id := range int32(2) {
		store, err := server.Session()
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		p := newProducerIDs(store, id)
		p.blockSize = 7
		allocators = append(allocators, p)
	}
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for _, p := range allocators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				id, err := p.nextID()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("producer ID %d handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("%d distinct IDs, want 200", len(seen))
	}
}

// TestProducerErrorCodes maps the log's refusals of idempotent batches to
// Kafka's codes.
func TestProducerErrorCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int16
	}{
		{log.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch.Code},
		{log.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber.Code},
		{log.ErrInvalidRecord, kerr.InvalidRecord.Code},
	} {
		if got := producerErrorCode(&log.ProducerError{Err: c.err, Message: "m"}); got != c.want {
			t.Errorf("%v: code %d, want %d", c.err, got, c.want)
		}
	}
}

// TestProducerStateTruncation produces two idempotent batches, then
// truncates the log below the second, as a follower does: the log rebuilds
// its producer state itself, so the second batch is no duplicate now.
func TestProducerStateTruncation(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("trunc", 1, nil)
	l := tb.partitionLog("trunc", 0)
	c := dial(t, tb.addr)
	pid := c.initProducerID(4, -1, -1, 1).ProducerID
	second := makeBatch(t, idempotentBatch(pid, 0, 1, "b"))
	c.produceRaw(9, "trunc", 0, -1, makeBatch(t, idempotentBatch(pid, 0, 0, "a")), 2)
	c.produceRaw(9, "trunc", 0, -1, append([]byte(nil), second...), 3)
	if rp := c.produceRaw(9, "trunc", 0, -1, append([]byte(nil), second...), 4); rp.ErrorCode != 0 || rp.BaseOffset != 1 || l.EndOffset() != 2 {
		t.Fatalf("retry: error %d base %d end %d", rp.ErrorCode, rp.BaseOffset, l.EndOffset())
	}

	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	// The second batch is gone from the log, so it is no duplicate now.
	if rp := c.produceRaw(9, "trunc", 0, -1, append([]byte(nil), second...), 5); rp.ErrorCode != 0 || rp.BaseOffset != 1 || l.EndOffset() != 2 {
		t.Fatalf("after truncation: error %d base %d end %d", rp.ErrorCode, rp.BaseOffset, l.EndOffset())
	}
}
