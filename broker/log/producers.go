package log

// Idempotent-producer state (docs/architecture.md §3; KIP-98 without
// transactions), kept by each Log beside its segments as Kafka's
// ProducerStateManager is. The log remembers, per producer ID, the producer
// epoch and the last five batches it appended (first and last sequence,
// first and last offset), and AppendValidated checks every idempotent batch
// against them before it is appended:
//
//   - an epoch older than the known one: ErrInvalidProducerEpoch (a newer
//     producer instance took over; KIP-588 reserves PRODUCER_FENCED for the
//     transaction coordinator);
//   - a newer epoch (an InitProducerId bump, KIP-360) must start at
//     sequence 0, else ErrOutOfOrderSequence;
//   - the same epoch and the same first and last sequence as one of the last
//     five batches: a retry of a batch already written; it is answered with
//     the original offsets (AppendInfo.Duplicate) and not appended again;
//   - otherwise the batch must continue the last sequence (wrapping from
//     MaxInt32 to 0), else ErrOutOfOrderSequence;
//   - an unknown producer is accepted at any sequence. This is Kafka's
//     behaviour since 2.5 (KIP-360): the producer's state may have been
//     removed with its records by retention or DeleteRecords, and
//     UNKNOWN_PRODUCER_ID would make the client reset for nothing.
//
// The state is loaded on first use (the first idempotent append, Producers,
// a truncation, the last stable offset every fetch answers, a
// read_committed fetch's aborted transactions), not at Open, so that
// opening thousands of partitions scans none of them. Loading reads the snapshot
// (producer_snapshot.go) and then scans the batches after its offset (their
// headers carry producer ID, epoch and sequence), so an unclean stop, or a
// lost snapshot, loses nothing but time; a snapshot past the log end (the
// log lost its tail after it was written) is ignored and the state is
// rebuilt from the log. The snapshot is written on Close, after a
// truncation, at every segment roll (so the replay after a crash is about
// a segment at most) and, by the Manager, every producerSnapshotInterval
// while the state changes.
//
// Every append and truncation happens under the producer lock
// (producerState.mu, taken before appendMu), so the state always describes
// exactly the batches below the log end: appends record their batches once
// the state is loaded, and TruncateTo rebuilds it. Retention and
// DeleteRecords (AdvanceStartOffset) leave it alone: a producer whose
// records they removed is remembered until it expires.
//
// The state is bounded (ProducerStateConfig): a producer with no write for
// producer.id.expiration.ms is forgotten, as in Kafka, and a partition
// remembers at most millrace.max.producer.ids.per.partition producers,
// forgetting those idle the longest first. A producer's last write time is
// its last batch's largest timestamp, as Kafka keeps it, but never later
// than the broker's clock when the batch was applied: a client timestamp
// far in the future must not make its state immortal.

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"millrace/internal/recordbatch"
)

const (
	// producerSnapshotInterval is how often the Manager writes changed
	// producer state to its snapshot.
	producerSnapshotInterval = time.Minute
	// producerBatchesKept is how many recent batches per producer are kept
	// for duplicate detection; Kafka clients keep at most five in flight.
	producerBatchesKept = 5
	// producerScanChunk is how much log one read takes while scanning.
	producerScanChunk = 1 << 20
)

// Producer state errors. An idempotent batch refused by the sequence rules
// comes as a *ProducerError wrapping one of them (or ErrInvalidRecord for a
// producer ID without an epoch or sequence); the suggested Kafka error code
// is in brackets.
var (
	// ErrInvalidProducerEpoch: the batch's producer epoch is older than the
	// one the log knows [INVALID_PRODUCER_EPOCH, 47].
	ErrInvalidProducerEpoch = errors.New("log: producer epoch is older than the current one")
	// ErrOutOfOrderSequence: the batch does not continue its producer's
	// sequence [OUT_OF_ORDER_SEQUENCE_NUMBER, 45].
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrProducerState: the producer state could not be loaded from the
	// snapshot and the log [KAFKA_STORAGE_ERROR, 56].
	ErrProducerState = errors.New("log: producer state unavailable")
)

// ProducerError is an idempotent batch refused by the producer state.
type ProducerError struct {
	Err     error  // ErrInvalidProducerEpoch, ErrOutOfOrderSequence or ErrInvalidRecord
	Message string // what is wrong, for the client
}

func (e *ProducerError) Error() string { return e.Message }

// Unwrap returns the sentinel.
func (e *ProducerError) Unwrap() error { return e.Err }

// ProducerStateConfig holds the broker-wide bounds of the producer state.
type ProducerStateConfig struct {
	// IDExpiration (producer.id.expiration.ms, default 24 h): a producer
	// with no write for this long is forgotten.
	IDExpiration time.Duration
	// MaxIDsPerPartition (millrace.max.producer.ids.per.partition, default
	// 10000): at most this many producers are remembered per partition;
	// beyond it those idle the longest are forgotten.
	MaxIDsPerPartition int
}

// DefaultProducerStateConfig returns the defaults.
func DefaultProducerStateConfig() ProducerStateConfig {
	return ProducerStateConfig{IDExpiration: 24 * time.Hour, MaxIDsPerPartition: 10000}
}

// Validate rejects impossible settings with a sentence that says why.
func (c ProducerStateConfig) Validate() error {
	var errs []error
	if c.IDExpiration <= 0 {
		errs = append(errs, fmt.Errorf("producer.id.expiration.ms %v must be positive", c.IDExpiration))
	}
	if c.MaxIDsPerPartition < 1 {
		errs = append(errs, fmt.Errorf("millrace.max.producer.ids.per.partition %d must be at least 1", c.MaxIDsPerPartition))
	}
	return errors.Join(errs...)
}

// ProducerInfo describes one producer a partition remembers.
type ProducerInfo struct {
	ID            int64
	Epoch         int16
	LastSequence  int32 // -1 when its epoch began with a marker and no batch followed
	LastTimestamp int64 // its last write (ms), see the package comment
	// CoordinatorEpoch is the coordinator epoch of its last transaction
	// marker, -1 if none.
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of its ongoing
	// transaction, -1 if none.
	CurrentTxnStartOffset int64
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
	// txnOngoing is set from the producer's first transactional batch
	// until a marker ends the transaction; txnFirstOffset is that batch's
	// base offset.
	txnOngoing     bool
	txnFirstOffset int64
	// coordinatorEpoch is the coordinator epoch of the last marker plus
	// one, 0 before any: a marker from an older coordinator is fenced.
	coordinatorEpoch int32
}

// txnStart is the first offset of e's ongoing transaction, -1 if none.
func (e *producerEntry) txnStart() int64 {
	if !e.txnOngoing {
		return -1
	}
	return e.txnFirstOffset
}

// producerState is a log's producer state.
type producerState struct {
	now func() time.Time // the log's clock

	// mu is the producer lock: held across check, append and update, and
	// taken before appendMu. It guards the following.
	mu        sync.Mutex
	cfg       ProducerStateConfig
	loaded    bool // producers reflects the whole log
	producers map[int64]*producerEntry
	dirty     bool // changed since the last snapshot
	// verifying holds each producer's transaction verification in
	// progress (txn_verify.go).
	verifying map[int64]*verificationGuard
	// pending is a restored producer snapshot whose offset the log has
	// not reached yet (restore.go); nil when there is none.
	pending *producerSnapshot

	// firstUnstable is the first offset of the oldest ongoing transaction,
	// -1 if none; set under mu, read without it.
	firstUnstable atomic.Int64
}

// recomputeFirstUnstableLocked sets firstUnstable from the producers.
func (ps *producerState) recomputeFirstUnstableLocked() {
	first := int64(-1)
	for _, e := range ps.producers {
		if e.txnOngoing && (first < 0 || e.txnFirstOffset < first) {
			first = e.txnFirstOffset
		}
	}
	ps.firstUnstable.Store(first)
}

// SetProducerStateConfig changes the producer state's bounds; they apply
// from the next batch and the next expiry round.
func (l *Log) SetProducerStateConfig(c ProducerStateConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	l.producers.mu.Lock()
	l.producers.cfg = c
	l.producers.mu.Unlock()
	return nil
}

// Producers lists the producers the log remembers, by ID. The error wraps
// ErrProducerState when the state cannot be loaded.
func (l *Log) Producers() ([]ProducerInfo, error) {
	ps := &l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := l.ensureProducersLoadedLocked(); err != nil {
		return nil, err
	}
	out := make([]ProducerInfo, 0, len(ps.producers))
	for id, e := range ps.producers {
		out = append(out, ProducerInfo{
			ID: id, Epoch: e.epoch, LastSequence: e.batches[len(e.batches)-1].lastSeq, LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch - 1, CurrentTxnStartOffset: e.txnStart(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ensureProducersLoadedLocked loads the state from the snapshot and the log.
func (l *Log) ensureProducersLoadedLocked() error {
	if l.producers.loaded {
		return nil
	}
	return l.rebuildProducersLocked()
}

// rebuildProducersLocked discards the state in memory and rebuilds it from
// the snapshot (when it does not reach past the log end) and the batches
// after it. The error wraps ErrProducerState.
func (l *Log) rebuildProducersLocked() error {
	ps := &l.producers
	ps.loaded = false
	l.txnStateLoaded.Store(false)
	ps.producers = make(map[int64]*producerEntry)
	end := l.EndOffset()
	from := int64(0)
	snap, err := readProducerSnapshot(l.dir)
	switch {
	case err != nil:
		l.logger.Warn("unreadable producer state snapshot; rebuilding from the log", "err", err)
	case snap == nil:
	case snap.offset > end:
		// The log lost its tail after the snapshot (truncation, or an
		// unclean stop that tore the tail): the snapshot knows batches the
		// log no longer has.
		l.logger.Info("producer state snapshot is past the log end; rebuilding from the log", "snapshot_offset", snap.offset, "log_end", end)
	default:
		ps.producers, from = snap.producers, snap.offset
	}
	ps.recomputeFirstUnstableLocked()
	scanned, err := l.scanProducerBatches(from, end, l.applyBatchLocked)
	if err != nil {
		return fmt.Errorf("%w: rebuilding it from %s: %w", ErrProducerState, l.dir, err)
	}
	ps.loaded = true
	l.txnStateLoaded.Store(true)
	// A rebuilt state that scanned batches is newer than its snapshot.
	ps.dirty = scanned > 0 || snap == nil || from != snap.offset
	return nil
}

// scanProducerBatches calls apply for each batch in [from, end) and returns
// how many batches it read.
func (l *Log) scanProducerBatches(from, end int64, apply func(BatchHeader, []byte)) (int, error) {
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
		for pos := 0; pos+batchHeaderSize <= len(data); {
			h, err := recordbatch.ParseHeader(data[pos:])
			if err != nil || h.Size() <= 0 || pos+h.Size() > len(data) {
				return n, fmt.Errorf("malformed batch header at offset %d", off)
			}
			if h.BaseOffset >= from {
				n++
				apply(h, data[pos:pos+h.Size()])
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
func isIdempotent(h BatchHeader) bool { return h.ProducerID >= 0 }

// lastSequence is the sequence of a batch's last record; sequences wrap
// from MaxInt32 to 0.
func lastSequence(h BatchHeader) int32 {
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
// the original batch for a duplicate, or a *ProducerError.
func (ps *producerState) checkLocked(h BatchHeader) (*producerBatch, error) {
	refuse := func(sentinel error, format string, args ...any) (*producerBatch, error) {
		return nil, &ProducerError{Err: sentinel, Message: fmt.Sprintf(format, args...)}
	}
	if h.ProducerEpoch < 0 || h.BaseSequence < 0 {
		return refuse(ErrInvalidRecord, "producer ID %d with epoch %d and base sequence %d: an idempotent batch needs both", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	e := ps.producers[h.ProducerID]
	if e == nil {
		return nil, nil
	}
	if e.txnOngoing && !h.Transactional() {
		return refuse(ErrInvalidTxnState, "producer ID %d: a non-transactional batch while its transaction from offset %d is ongoing", h.ProducerID, e.txnFirstOffset)
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return refuse(ErrInvalidProducerEpoch, "producer ID %d: epoch %d is older than the current epoch %d", h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return refuse(ErrOutOfOrderSequence, "producer ID %d: new epoch %d must start at sequence 0, not %d", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	last := lastSequence(h)
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			found := *b
			return &found, nil
		}
	}
	if prev := e.batches[len(e.batches)-1].lastSeq; !inSequence(prev, h.BaseSequence) {
		return refuse(ErrOutOfOrderSequence, "producer ID %d epoch %d: expected sequence %d, got %d", h.ProducerID, h.ProducerEpoch, int64(prev)+1, h.BaseSequence)
	}
	return nil, nil
}

// applyLocked records an appended batch (its BaseOffset final).
func (ps *producerState) applyLocked(h BatchHeader) {
	if !isIdempotent(h) || h.BaseSequence < 0 {
		return
	}
	if ps.producers == nil {
		ps.producers = make(map[int64]*producerEntry)
	}
	e := ps.producers[h.ProducerID]
	if e == nil || e.epoch != h.ProducerEpoch {
		if e == nil {
			ps.makeRoomLocked()
		}
		fresh := &producerEntry{epoch: h.ProducerEpoch}
		if e != nil {
			// A new epoch keeps the transaction state: only a marker
			// ends a transaction.
			fresh.txnOngoing, fresh.txnFirstOffset, fresh.coordinatorEpoch = e.txnOngoing, e.txnFirstOffset, e.coordinatorEpoch
		}
		e = fresh
		ps.producers[h.ProducerID] = e
	}
	if h.Transactional() && !e.txnOngoing {
		e.txnOngoing, e.txnFirstOffset = true, h.BaseOffset
		if cur := ps.firstUnstable.Load(); cur < 0 || h.BaseOffset < cur {
			ps.firstUnstable.Store(h.BaseOffset)
		}
	}
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, producerBatch{
		firstSeq: h.BaseSequence, lastSeq: lastSequence(h),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(),
	})
	e.lastTimestamp = min(h.MaxTimestamp, ps.now().UnixMilli())
	ps.dirty = true
}

// makeRoomLocked forgets the producers idle the longest when the partition
// is at millrace.max.producer.ids.per.partition, before one more is added.
// It forgets a tenth of the limit at once, so that a stream of new
// producers sorts the table once per tenth rather than once per producer.
func (ps *producerState) makeRoomLocked() {
	limit := ps.cfg.MaxIDsPerPartition
	if limit <= 0 || len(ps.producers) < limit {
		return
	}
	type idle struct {
		id   int64
		last int64
	}
	all := make([]idle, 0, len(ps.producers))
	for id, e := range ps.producers {
		last := e.lastTimestamp
		if e.txnOngoing {
			last = math.MaxInt64 // forgotten last: it holds the LSO back
		}
		all = append(all, idle{id, last})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].last < all[j].last })
	keep := limit - 1 - limit/10
	for _, p := range all[:len(all)-max(keep, 0)] {
		delete(ps.producers, p.id)
	}
	ps.recomputeFirstUnstableLocked()
}

// expireLocked forgets producers whose last batch is older than before (ms).
func (ps *producerState) expireLocked(before int64) {
	for id, e := range ps.producers {
		// A producer in a transaction stays until a marker ends it, as in
		// Kafka: forgetting it would move the LSO past its records.
		if e.lastTimestamp < before && !e.txnOngoing {
			delete(ps.producers, id)
			ps.dirty = true
		}
	}
}

// maintainProducers expires idle producers and writes the snapshot if the
// state changed (the Manager's periodic round). A closed log, possibly
// deleted, is left alone: Close wrote its last snapshot.
func (l *Log) maintainProducers() {
	ps := &l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if !closed {
		l.maintainProducersLocked(false)
	}
}

// maintainProducersLocked expires idle producers and, when the state
// changed or final is set, writes its snapshot for the current log end.
// Nothing happens before the state is loaded.
func (l *Log) maintainProducersLocked(final bool) {
	ps := &l.producers
	if !ps.loaded {
		return
	}
	ps.expireLocked(ps.now().Add(-ps.cfg.IDExpiration).UnixMilli())
	ps.expireVerificationsLocked(ps.now().Add(-verificationExpiry).UnixMilli())
	if ps.dirty || final {
		if err := l.writeProducerSnapshotLocked(); err != nil {
			l.logger.Warn("writing a producer state snapshot", "err", err)
		}
	}
}

// writeProducerSnapshotLocked writes the snapshot for the current log end,
// after fsyncing the transaction index entries appended since the last
// fsync: recovery trusts every entry below a snapshot's offset
// (txn_index.go).
func (l *Log) writeProducerSnapshotLocked() error {
	ps := &l.producers
	if err := l.syncTxnIndexes(); err != nil {
		return err
	}
	if err := writeProducerSnapshot(l.dir, producerSnapshot{offset: l.EndOffset(), producers: ps.producers}); err != nil {
		return err
	}
	ps.dirty = false
	return nil
}

// snapshotAtRollLocked writes the snapshot when a segment rolls, as Kafka
// does, so that the replay after a crash covers about one segment at most.
// A state not loaded yet is left alone: loading it here would scan the log
// under the append lock, while the snapshot on disk stays valid and the
// first load replays from it (every fetch loads it, for the last stable
// offset). The caller holds the producer lock and appendMu; a failure is
// logged, and the Manager's next round writes the snapshot.
func (l *Log) snapshotAtRollLocked() {
	if !l.producers.loaded {
		return
	}
	if err := l.writeProducerSnapshotLocked(); err != nil {
		l.logger.Warn("writing the producer state snapshot at a segment roll", "err", err)
	}
}

// recordProducersLocked records appended batches in the state, once it is
// loaded (loading scans them from the log anyway).
func (l *Log) recordProducersLocked(headers []BatchHeader, batches []byte) {
	l.producers.endVerificationsLocked(headers)
	if !l.producers.loaded {
		return
	}
	pos := 0
	for _, h := range headers {
		l.applyBatchLocked(h, batches[pos:pos+h.Size()])
		pos += h.Size()
	}
}
