package log

import (
	"testing"
	"time"
)

// TestProducerStateLimits checks that a partition forgets the producers
// idle the longest beyond millrace.max.producer.ids.per.partition, and that
// a client timestamp in the future does not keep a producer past
// producer.id.expiration.ms.
func TestProducerStateLimits(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pp := &producerState{producers: map[int64]*producerEntry{}, loaded: true, now: func() time.Time { return now },
		cfg: ProducerStateConfig{IDExpiration: time.Hour, MaxIDsPerPartition: 10}}
	write := func(id int64, ts time.Time) {
		t.Helper()
		h := BatchHeader{ProducerID: id, ProducerEpoch: 0, BaseSequence: 0, Records: 1, MaxTimestamp: ts.UnixMilli()}
		if _, err := pp.checkLocked(h); err != nil {
			t.Fatalf("producer %d: %v", id, err)
		}
		pp.applyLocked(h)
	}
	for id := int64(1); id <= 10; id++ {
		write(id, now.Add(time.Duration(id)*time.Second-time.Hour))
	}
	if len(pp.producers) != 10 {
		t.Fatalf("%d producers remembered, want 10", len(pp.producers))
	}
	// One more: the limit is reached, so the tenth of it idle the longest
	// (producer 1) and one more for the newcomer (producer 2) are forgotten.
	write(11, now)
	for id := int64(1); id <= 11; id++ {
		if _, ok := pp.producers[id]; ok != (id > 2) {
			t.Errorf("producer %d remembered %v, want %v", id, ok, id > 2)
		}
	}

	// A batch stamped 1000 hours ahead counts as written now.
	write(99, now.Add(1000*time.Hour))
	if got := pp.producers[99].lastTimestamp; got != now.UnixMilli() {
		t.Fatalf("last write of a future-stamped batch = %d, want now (%d)", got, now.UnixMilli())
	}
	now = now.Add(time.Hour + time.Second)
	pp.expireLocked(pp.now().Add(-pp.cfg.IDExpiration).UnixMilli())
	if len(pp.producers) != 0 {
		t.Fatalf("%d producers remembered more than an expiration period after their last write: %v", len(pp.producers), pp.producers)
	}
}
