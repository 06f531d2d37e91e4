package kafka

// Idempotent-producer state (docs/architecture.md §3; KIP-98 without transactions). Each
// partition leader remembers, per producer ID, the producer epoch and the
// last five batches it appended (first and last sequence, first and last
// offset), and checks every idempotent batch against them before it is
// appended:
//
//   - an epoch older than the known one: INVALID_PRODUCER_EPOCH (a newer
//     producer instance took over; KIP-588 reserves PRODUCER_FENCED for the
//     transaction coordinator);
//   - a newer epoch (an InitProducerId bump, KIP-360) must start at
//     sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - the same epoch and the same first and last sequence as one of the last
//     five batches: a retry of a batch already written; it is answered with
//     the original offsets and not appended again;
//   - otherwise the batch must continue the last sequence (wrapping from
//     MaxInt32 to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - an unknown producer is accepted at any sequence. This is Kafka's
//     behaviour since 2.5 (KIP-360): the producer's state may have been
//     removed with its records by retention or DeleteRecords, and
//     UNKNOWN_PRODUCER_ID would make the client reset for nothing.
//
// The state survives restarts: a snapshot file in the partition directory
// records it together with the log end offset it reflects, written
// atomically on clean shutdown and every producerSnapshotInterval while it
// changes. Loading reads the snapshot and then scans the batches after its
// offset (their headers carry producer ID, epoch and sequence), so an
// unclean stop, or a lost snapshot, loses nothing but time.
//
// Producer state is bounded: a producer with no write for
// producer.id.expiration.ms (Config.ProducerIDExpiration) is forgotten, as
// in Kafka, and a partition remembers at most
// millrace.max.producer.ids.per.partition producers, forgetting those idle
// the longest first. A producer's last write time is its last batch's
// largest timestamp, as Kafka keeps it, but never later than the broker's
// clock when the batch was applied: a client timestamp far in the future
// must not make its state immortal.
//
// Every append to a partition, idempotent or not, happens under the
// partition's producer lock (see lockedPartition), so a snapshot always
// reflects exactly the batches below the log end it records. Code that
// appends or truncates elsewhere (replication) must go through the same lock
// and call rebuildLocked after a truncation.

import (
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
	"millrace/broker/log"
)

const (
	// producerSnapshotInterval is how often changed producer state is
	// written to its snapshot.
	producerSnapshotInterval = time.Minute
	// producerBatchesKept is how many recent batches per producer are kept
	// for duplicate detection; Kafka clients keep at most five in flight.
	producerBatchesKept = 5
	// producerScanChunk is how much log one read takes while scanning.
	producerScanChunk = 1 << 20
)

// openProducerStates opens b's idempotent-producer state (Broker.producers).
func openProducerStates(b *Broker) *producerStates {
	s := newProducerStates(b.logs, b.store, b.cfg.BrokerID, b.logger)
	s.expiration, s.maxPerPartition = b.cfg.ProducerIDExpiration, b.cfg.MaxProducerIDsPerPartition
	return s
}

// producerBatch is one remembered batch.
type producerBatch struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
}

// producerEntry is one producer's state on one partition.
type producerEntry struct {
	epoch int16
	// batches are the last producerBatchesKept batches, oldest first; never
	// empty.
	batches []producerBatch
	// lastTimestamp is the largest batch timestamp of its last batch (ms),
	// but not later than when the batch was applied: the producer's last
	// write time, for expiration.
	lastTimestamp int64
}

// partitionProducers is the producer state of one partition.
type partitionProducers struct {
	tp  log.TopicPartition
	log *log.Log
	// states holds the limits and the clock.
	states *producerStates

	mu        sync.Mutex // guards the following; held across check, append and update
	loaded    bool       // producers reflects the whole log
	producers map[int64]*producerEntry
	dirty     bool // changed since the last snapshot
}

// producerStates is the broker's idempotent-producer state: ID allocation
// and per-partition state, with the goroutine that writes snapshots.
type producerStates struct {
	logs   *log.Manager
	ids    *producerIDs
	logger *slog.Logger
	now    func() time.Time
	// expiration is producer.id.expiration.ms and maxPerPartition
	// millrace.max.producer.ids.per.partition (Config); set before use.
	expiration      time.Duration
	maxPerPartition int

	stop chan struct{}
	done chan struct{}

	mu         sync.Mutex // guards the following
	partitions map[*log.Log]*partitionProducers
	closed     bool
}

func newProducerStates(logs *log.Manager, store coord.Store, brokerID int32, logger *slog.Logger) *producerStates {
	s := &producerStates{
		logs:       logs,
		ids:        newProducerIDs(store, brokerID),
		logger:     logger.With("component", "producer-state"),
		now:        time.Now,
		expiration: 24 * time.Hour,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		partitions: make(map[*log.Log]*partitionProducers),
	}
	go s.run()
	return s
}

// run writes changed snapshots every producerSnapshotInterval until Close.
func (s *producerStates) run() {
	defer close(s.done)
	t := time.NewTicker(producerSnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.maintain(false)
		}
	}
}

// Close stops the snapshot goroutine and writes every loaded partition's
// snapshot (the clean-shutdown snapshot).
func (s *producerStates) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.maintain(true)
	return nil
}

// maintain forgets partitions whose log is gone, expires idle producers and
// writes the snapshots of changed partitions (all loaded ones when final).
func (s *producerStates) maintain(final bool) {
	s.mu.Lock()
	parts := make([]*partitionProducers, 0, len(s.partitions))
	for l, pp := range s.partitions {
		if !s.live(pp) {
			delete(s.partitions, l)
			continue
		}
		parts = append(parts, pp)
	}
	s.mu.Unlock()
	expireBefore := s.now().Add(-s.expiration).UnixMilli()
	for _, pp := range parts {
		pp.mu.Lock()
		if pp.loaded {
			pp.expireLocked(expireBefore)
			if pp.dirty || final {
				if err := pp.writeSnapshotLocked(); err != nil {
					s.logger.Warn("writing a producer state snapshot", "topic", pp.tp.Topic, "partition", pp.tp.Partition, "err", err)
				}
			}
		}
		pp.mu.Unlock()
	}
}

// live reports whether pp's log is still the manager's log for its
// partition (not deleted, not replaced by a re-created topic).
func (s *producerStates) live(pp *partitionProducers) bool {
	if s.logs == nil {
		return true
	}
	l, ok := s.logs.Get(pp.tp.Topic, pp.tp.Partition)
	return ok && l == pp.log
}

// lockedPartition returns the producer state of a partition with its lock
// held; the caller appends and updates under it, then unlocks.
func (s *producerStates) lockedPartition(tp log.TopicPartition, l *log.Log) *partitionProducers {
	s.mu.Lock()
	pp := s.partitions[l]
	if pp == nil {
		// The topic name may point into a request frame that is reused
		// once the request is answered (framepool.go): keep a copy.
		tp.Topic = strings.Clone(tp.Topic)
		pp = &partitionProducers{tp: tp, log: l, states: s}
		s.partitions[l] = pp
	}
	s.mu.Unlock()
	pp.mu.Lock()
	return pp
}

// describe lists a partition's producers by ID; the code is
// KAFKA_STORAGE_ERROR when the state cannot be loaded from the log.
func (s *producerStates) describe(tp log.TopicPartition, l *log.Log) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, int16) {
	pp := s.lockedPartition(tp, l)
	defer pp.mu.Unlock()
	if err := pp.ensureLoadedLocked(s.logger); err != nil {
		s.logger.Error("loading producer state", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return nil, kerr.KafkaStorageError.Code
	}
	out := make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(pp.producers))
	for id, e := range pp.producers {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch = id, int32(e.epoch)
		ap.LastSequence = e.batches[len(e.batches)-1].lastSeq
		ap.LastTimestamp = e.lastTimestamp
		ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1
		out = append(out, ap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out, 0
}

// rebuild rebuilds a partition's producer state after its log was
// truncated (a follower dropping a divergent tail). The caller must hold off
// appends to the partition meanwhile; the truncation itself should happen
// under lockedPartition too.
func (s *producerStates) rebuild(tp log.TopicPartition, l *log.Log) error {
	pp := s.lockedPartition(tp, l)
	defer pp.mu.Unlock()
	return pp.rebuildLocked(s.logger)
}

// ensureLoadedLocked loads the state from the snapshot and the log.
func (pp *partitionProducers) ensureLoadedLocked(logger *slog.Logger) error {
	if pp.loaded {
		return nil
	}
	return pp.rebuildLocked(logger)
}

// rebuildLocked discards the state in memory and rebuilds it from the
// snapshot (when it does not reach past the log end) and the batches after
// it. Replication calls it after truncating the log.
func (pp *partitionProducers) rebuildLocked(logger *slog.Logger) error {
	pp.loaded = false
	pp.producers = make(map[int64]*producerEntry)
	end := pp.log.EndOffset()
	from := int64(0)
	snap, err := readProducerSnapshot(pp.log.Dir())
	switch {
	case err != nil:
		logger.Warn("unreadable producer state snapshot; rebuilding from the log", "topic", pp.tp.Topic, "partition", pp.tp.Partition, "err", err)
	case snap == nil:
	case snap.offset > end:
		// The log lost its tail after the snapshot (truncation, or an
		// unclean stop that tore the tail): the snapshot knows batches the
		// log no longer has.
		logger.Info("producer state snapshot is past the log end; rebuilding from the log", "topic", pp.tp.Topic, "partition", pp.tp.Partition, "snapshot_offset", snap.offset, "log_end", end)
	default:
		pp.producers, from = snap.producers, snap.offset
	}
	scanned, err := scanProducerBatches(pp.log, from, end, pp.applyLocked)
	if err != nil {
		return fmt.Errorf("rebuilding producer state of %s: %w", pp.tp, err)
	}
	pp.loaded = true
	// A rebuilt state that scanned batches is newer than its snapshot.
	pp.dirty = scanned > 0 || snap == nil || from != snap.offset
	return nil
}

// scanProducerBatches calls apply for each idempotent batch in [from, end)
// and returns how many batches it read.
func scanProducerBatches(l *log.Log, from, end int64, apply func(log.BatchHeader)) (int, error) {
	off := max(from, l.StartOffset())
	n := 0
	for off < end {
		slice, err := l.Read(off, producerScanChunk, end)
		if err != nil {
			return n, err
		}
		data, err := slice.ReadAll()
		next := slice.NextOffset()
		slice.Close()
		if err != nil {
			return n, err
		}
		for pos := 0; pos+batchHeaderBytes <= len(data); {
			h, err := log.ParseBatchHeader(data[pos:])
			if err != nil || h.Size() <= 0 || pos+h.Size() > len(data) {
				return n, fmt.Errorf("malformed batch header at offset %d", off)
			}
			if h.BaseOffset >= from {
				n++
				apply(h)
			}
			pos += h.Size()
		}
		if next <= off {
			break // nothing more below end
		}
		off = next
	}
	return n, nil
}

// isIdempotent reports whether a batch carries idempotence fields.
func isIdempotent(h log.BatchHeader) bool { return h.ProducerID >= 0 }

// lastSequence is the sequence of a batch's last record; sequences wrap
// from MaxInt32 to 0.
func lastSequence(h log.BatchHeader) int32 {
	if int64(h.BaseSequence)+int64(h.LastOffsetDelta) > math.MaxInt32 {
		return int32(int64(h.BaseSequence) + int64(h.LastOffsetDelta) - math.MaxInt32 - 1)
	}
	return h.BaseSequence + h.LastOffsetDelta
}

// inSequence reports whether next follows last.
func inSequence(last, next int32) bool {
	return next == last+1 || last == math.MaxInt32 && next == 0
}

// checkLocked checks an idempotent batch before it is appended. It returns
// the original batch for a duplicate, or a Kafka error code and message.
func (pp *partitionProducers) checkLocked(h log.BatchHeader) (dup *producerBatch, code int16, msg string) {
	if h.ProducerEpoch < 0 || h.BaseSequence < 0 {
		return nil, kerr.InvalidRecord.Code, fmt.Sprintf("producer ID %d with epoch %d and base sequence %d: an idempotent batch needs both", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	e := pp.producers[h.ProducerID]
	if e == nil {
		return nil, 0, ""
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, kerr.InvalidProducerEpoch.Code, fmt.Sprintf("producer ID %d: epoch %d is older than the current epoch %d", h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, kerr.OutOfOrderSequenceNumber.Code, fmt.Sprintf("producer ID %d: new epoch %d must start at sequence 0, not %d", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, 0, ""
	}
	last := lastSequence(h)
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			found := *b
			return &found, 0, ""
		}
	}
	if prev := e.batches[len(e.batches)-1].lastSeq; !inSequence(prev, h.BaseSequence) {
		return nil, kerr.OutOfOrderSequenceNumber.Code, fmt.Sprintf("producer ID %d epoch %d: expected sequence %d, got %d", h.ProducerID, h.ProducerEpoch, int64(prev)+1, h.BaseSequence)
	}
	return nil, 0, ""
}

// applyLocked records an appended batch (its BaseOffset final).
func (pp *partitionProducers) applyLocked(h log.BatchHeader) {
	if !isIdempotent(h) || h.BaseSequence < 0 {
		return
	}
	if pp.producers == nil {
		pp.producers = make(map[int64]*producerEntry)
	}
	e := pp.producers[h.ProducerID]
	if e == nil || e.epoch != h.ProducerEpoch {
		if e == nil {
			pp.makeRoomLocked()
		}
		e = &producerEntry{epoch: h.ProducerEpoch}
		pp.producers[h.ProducerID] = e
	}
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, producerBatch{
		firstSeq: h.BaseSequence, lastSeq: lastSequence(h),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
	})
	e.lastTimestamp = h.MaxTimestamp
	if pp.states != nil {
		e.lastTimestamp = min(e.lastTimestamp, pp.states.now().UnixMilli())
	}
	pp.dirty = true
}

// makeRoomLocked forgets the producers idle the longest when the partition
// is at millrace.max.producer.ids.per.partition, before one more is added.
// It forgets a tenth of the limit at once, so that a stream of new
// producers sorts the table once per tenth rather than once per producer.
func (pp *partitionProducers) makeRoomLocked() {
	if pp.states == nil || pp.states.maxPerPartition <= 0 || len(pp.producers) < pp.states.maxPerPartition {
		return
	}
	type idle struct {
		id   int64
		last int64
	}
	all := make([]idle, 0, len(pp.producers))
	for id, e := range pp.producers {
		all = append(all, idle{id, e.lastTimestamp})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].last < all[j].last })
	keep := pp.states.maxPerPartition - 1 - pp.states.maxPerPartition/10
	for _, p := range all[:len(all)-max(keep, 0)] {
		delete(pp.producers, p.id)
	}
}

// expireLocked forgets producers whose last batch is older than before (ms).
func (pp *partitionProducers) expireLocked(before int64) {
	for id, e := range pp.producers {
		if e.lastTimestamp < before {
			delete(pp.producers, id)
			pp.dirty = true
		}
	}
}

// writeSnapshotLocked writes the snapshot for the current log end.
func (pp *partitionProducers) writeSnapshotLocked() error {
	if err := writeProducerSnapshot(pp.log.Dir(), producerSnapshot{offset: pp.log.EndOffset(), producers: pp.producers}); err != nil {
		return err
	}
	pp.dirty = false
	return nil
}
