package kafka

import (
	"log/slog"
	"math"
	"reflect"
	"sync"
	"testing"

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

func TestProducerSnapshotRoundTrip(t *testing.T) {
	s := producerSnapshot{offset: 1234, producers: map[int64]*producerEntry{
		7:             {epoch: 3, lastTimestamp: 99, batches: []producerBatch{{0, 4, 10, 14}, {5, 5, 20, 20}}},
		math.MaxInt64: {epoch: math.MaxInt16, lastTimestamp: -1, batches: []producerBatch{{math.MaxInt32 - 1, 0, 1, 2}}},
	}}
	got, err := decodeProducerSnapshot(encodeProducerSnapshot(s))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip: %+v, want %+v", got, s)
	}
	b := encodeProducerSnapshot(s)
	b[len(b)-1] ^= 1
	if _, err := decodeProducerSnapshot(b); err == nil {
		t.Fatal("a corrupt snapshot decoded")
	}
}

// FuzzProducerSnapshot: decoding never panics, and what decodes re-encodes
// to something that decodes the same.
func FuzzProducerSnapshot(f *testing.F) {
	f.Add(encodeProducerSnapshot(producerSnapshot{offset: 5, producers: map[int64]*producerEntry{1: {epoch: 0, batches: []producerBatch{{0, 1, 0, 1}}}}}))
	f.Add([]byte("MRPS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeProducerSnapshot(b)
		if err != nil {
			return
		}
		again, err := decodeProducerSnapshot(encodeProducerSnapshot(s))
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("re-encoding changed the snapshot: %v", err)
		}
	})
}

// TestProducerStateRules checks the sequence rules on the state alone.
func TestProducerStateRules(t *testing.T) {
	pp := &partitionProducers{producers: map[int64]*producerEntry{}, loaded: true}
	h := func(epoch int16, seq int32, records int32, base int64) log.BatchHeader {
		return log.BatchHeader{ProducerID: 1, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: records - 1, Records: records, BaseOffset: base}
	}
	// Six batches: only the last five are remembered.
	for i := range int32(6) {
		b := h(0, i*2, 2, int64(i*2))
		if dup, code, _ := pp.checkLocked(b); dup != nil || code != 0 {
			t.Fatalf("batch %d: dup %v code %d", i, dup, code)
		}
		pp.applyLocked(b)
	}
	if dup, _, _ := pp.checkLocked(h(0, 2, 2, 0)); dup == nil || dup.firstOffset != 2 {
		t.Fatalf("second batch not a duplicate: %+v", dup)
	}
	if _, code, _ := pp.checkLocked(h(0, 0, 2, 0)); code != 45 {
		t.Fatalf("first batch (forgotten): code %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", code)
	}
	if _, code, _ := pp.checkLocked(h(0, 12, 1, 0)); code != 0 {
		t.Fatalf("next sequence: code %d", code)
	}
	if _, code, _ := pp.checkLocked(h(-1, 12, 1, 0)); code != 87 {
		t.Fatalf("idempotent batch without an epoch: code %d", code)
	}
	wrap := log.BatchHeader{BaseSequence: math.MaxInt32 - 1, LastOffsetDelta: 3}
	if got := lastSequence(wrap); got != 1 {
		t.Fatalf("lastSequence across the wrap = %d, want 1", got)
	}
}

// TestProducerStateSnapshotAndTruncation writes a periodic snapshot, then
// truncates the log below it: the rebuilt state forgets the removed batch.
func TestProducerStateSnapshotAndTruncation(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("trunc", 1, nil)
	l := tb.partitionLog("trunc", 0)
	c := dial(t, tb.addr)
	pid := c.initProducerID(4, -1, -1, 1).ProducerID
	second := makeBatch(t, idempotentBatch(pid, 0, 1, "b"))
	c.produceRaw(9, "trunc", 0, -1, makeBatch(t, idempotentBatch(pid, 0, 0, "a")), 2)
	c.produceRaw(9, "trunc", 0, -1, append([]byte(nil), second...), 3)

	states := tb.broker.producers
	states.maintain(false)
	snap, err := readProducerSnapshot(l.Dir())
	if err != nil || snap == nil || snap.offset != 2 || len(snap.producers[pid].batches) != 2 {
		t.Fatalf("periodic snapshot: %+v, %v", snap, err)
	}

	tp := log.TopicPartition{Topic: "trunc", Partition: 0}
	pp := states.lockedPartition(tp, l)
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	pp.mu.Unlock()
	if err := states.rebuild(tp, l); err != nil {
		t.Fatal(err)
	}
	// The second batch is gone from the log, so it is no duplicate now.
	if rp := c.produceRaw(9, "trunc", 0, -1, append([]byte(nil), second...), 4); rp.ErrorCode != 0 || rp.BaseOffset != 1 || l.EndOffset() != 2 {
		t.Fatalf("after truncation: error %d base %d end %d", rp.ErrorCode, rp.BaseOffset, l.EndOffset())
	}
}
