package log

// The partition side of Kafka transactions (KIP-98). A transactional
// producer's batches carry the transactional attribute; the transaction
// coordinator ends the transaction on every partition it wrote to with an
// end transaction marker: a control batch holding one control record whose
// key says COMMIT or ABORT (AppendEndTxnMarker). The log keeps, per
// producer, the offset of the first batch of its ongoing transaction
// (producers.go); the smallest of them is the first unstable offset, and
// the last stable offset a read_committed consumer may read up to is the
// smaller of it and the high watermark. Every aborted transaction is listed
// in its segment's transaction index (txn_index.go) so that a fetch can
// tell read_committed consumers which producers' records to drop in the
// range it returns.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/recordbatch"
)

const (
	// controlTypeAbort and controlTypeCommit are the control record key
	// types of end transaction markers.
	controlTypeAbort  = 0
	controlTypeCommit = 1
)

// Transaction errors. A marker refused by the producer state comes as a
// *ProducerError wrapping one of them or ErrInvalidProducerEpoch.
var (
	// ErrCoordinatorFenced: the marker's coordinator epoch is older than
	// the one the partition last saw for its producer
	// [TRANSACTION_COORDINATOR_FENCED, 52].
	ErrCoordinatorFenced = errors.New("log: transaction marker from an older coordinator epoch")
	// ErrInvalidTxnState: a non-transactional batch from a producer whose
	// transaction is ongoing [INVALID_TXN_STATE, 48].
	ErrInvalidTxnState = errors.New("log: batch does not match the producer's transaction state")
)

// hasTransactional reports whether any of the concatenated batches in b is
// transactional; it reads only the headers that lie wholly inside b.
func hasTransactional(b []byte) bool {
	for len(b) >= batchHeaderSize {
		h := recordbatch.HeaderAt(b)
		if h.Transactional() {
			return true
		}
		if h.Length < batchHeaderSize-batchLengthOverhead || h.Size() > len(b) {
			return false
		}
		b = b[h.Size():]
	}
	return false
}

// anyTransactional is hasTransactional for batches already parsed.
func anyTransactional(headers []BatchHeader) bool {
	for _, h := range headers {
		if h.Transactional() {
			return true
		}
	}
	return false
}

// EndTxnMarker is what the transaction coordinator writes to end a
// producer's transaction on a partition (Kafka's WriteTxnMarkers).
type EndTxnMarker struct {
	ProducerID    int64
	ProducerEpoch int16
	// Commit is true for COMMIT, false for ABORT.
	Commit bool
	// CoordinatorEpoch fences markers from a former coordinator.
	CoordinatorEpoch int32
	// Timestamp is the marker's record timestamp (ms).
	Timestamp int64
}

// AbortedTxn is one aborted transaction: an entry of the transaction index,
// Kafka's AbortedTxn.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first batch
	LastOffset  int64 // its abort marker
	// LastStableOffset is the log's last stable offset once the abort was
	// written (the first unstable offset after it, or the marker's next
	// offset).
	LastStableOffset int64
}

// AppendEndTxnMarker appends the control batch ending m's producer's
// transaction, stamped with leaderEpoch, and returns its offset. The marker
// is refused (a *ProducerError) when its producer epoch is older than the
// producer's (ErrInvalidProducerEpoch) or its coordinator epoch older than
// the last one seen for the producer (ErrCoordinatorFenced). A marker for a
// producer with no ongoing transaction is written all the same, as Kafka
// does: the coordinator may retry one that was written.
func (l *Log) AppendEndTxnMarker(m EndTxnMarker, leaderEpoch int32) (int64, error) {
	ps := &l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := l.ensureTxnStateLocked(); err != nil {
		return -1, err
	}
	if err := ps.checkMarkerLocked(m); err != nil {
		return -1, err
	}
	batch := encodeEndTxnMarker(m)
	l.appendMu.Lock()
	if err := l.writableLocked(); err != nil {
		l.appendMu.Unlock()
		return -1, err
	}
	headers := []BatchHeader{recordbatch.HeaderAt(batch)}
	info, err := l.appendFreshLocked(batch, headers, leaderEpoch)
	l.appendMu.Unlock()
	if err != nil {
		return -1, err
	}
	l.recordProducersLocked(info.Batches, batch)
	return info.FirstOffset, nil
}

// encodeEndTxnMarker builds the control batch of m, its base offset 0.
func encodeEndTxnMarker(m EndTxnMarker) []byte {
	keyType := kmsg.ControlRecordKeyTypeAbort
	if m.Commit {
		keyType = kmsg.ControlRecordKeyTypeCommit
	}
	key := (&kmsg.ControlRecordKey{Version: 0, Type: keyType}).AppendTo(nil)
	value := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: m.CoordinatorEpoch}).AppendTo(nil)
	// One record: attributes 0, timestamp and offset deltas 0, no headers.
	var body []byte
	body = append(body, 0)              // attributes
	body = binary.AppendVarint(body, 0) // timestampDelta
	body = binary.AppendVarint(body, 0) // offsetDelta
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // headers
	record := binary.AppendVarint(nil, int64(len(body)))
	record = append(record, body...)
	batch := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                batchMagic,
		Attributes:           attrTransactional | attrControl,
		LastOffsetDelta:      0,
		FirstTimestamp:       m.Timestamp,
		MaxTimestamp:         m.Timestamp,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              record,
	}
	b := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-batchLengthOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// parseControlRecord returns the key type of the control batch b (whole,
// uncompressed as control batches always are) and, for an end transaction
// marker, the coordinator epoch in its value (-1 when absent); ok is false
// when b does not hold a well-formed control record.
func parseControlRecord(b []byte) (keyType int16, coordinatorEpoch int32, ok bool) {
	h, err := recordbatch.ParseHeader(b)
	if err != nil || !h.Control() || h.Compression() != 0 || h.Size() < batchHeaderSize || h.Size() > len(b) || h.Records < 1 {
		return 0, 0, false
	}
	rec := b[batchHeaderSize:h.Size()]
	length, n := binary.Varint(rec)
	if n <= 0 || length < 1 || int64(len(rec)-n) < length {
		return 0, 0, false
	}
	rec = rec[n+1 : n+int(length)] // after the attributes
	for range 2 {                  // timestampDelta, offsetDelta
		if _, n = binary.Varint(rec); n <= 0 {
			return 0, 0, false
		}
		rec = rec[n:]
	}
	keyLen, n := binary.Varint(rec)
	if n <= 0 || keyLen < 4 || int64(len(rec)-n) < keyLen {
		return 0, 0, false
	}
	keyType = int16(binary.BigEndian.Uint16(rec[n+2:]))
	rec = rec[n+int(keyLen):]
	valueLen, n := binary.Varint(rec)
	if n <= 0 || valueLen < 6 || int64(len(rec)-n) < valueLen {
		return keyType, -1, true
	}
	return keyType, int32(binary.BigEndian.Uint32(rec[n+2:])), true
}

// FirstUnstableOffset returns the first offset of the oldest ongoing
// transaction, false when none is ongoing. The last stable offset is the
// smaller of it and the high watermark.
func (l *Log) FirstUnstableOffset() (int64, bool, error) {
	if err := l.loadTxnStateIfNeeded(); err != nil {
		return 0, false, err
	}
	off := l.producers.firstUnstable.Load()
	return off, off >= 0, nil
}

// loadTxnStateIfNeeded loads the producer state unless it is loaded: from
// the snapshot and the batches after it, or from the whole log when there
// is no snapshot. Whatever is on disk, a transaction may be open (a crash
// before the first snapshot, a snapshot lost) and only the state knows it;
// loading also appends the index entries an unclean stop lost
// (txn_index.go).
func (l *Log) loadTxnStateIfNeeded() error {
	if l.txnStateLoaded.Load() {
		return nil
	}
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	return l.ensureProducersLoadedLocked()
}

// ensureTxnStateLocked loads the producer state before a transactional
// batch or marker is appended: it is checked against, and recorded in, the
// state of the whole log.
func (l *Log) ensureTxnStateLocked() error {
	return l.ensureProducersLoadedLocked()
}

// AbortedTransactions lists the aborted transactions with records in
// [from, to): those whose abort marker is at or after from and whose first
// offset is below to, ordered by marker offset. A read_committed fetch of
// that range sends them to the consumer.
func (l *Log) AbortedTransactions(from, to int64) ([]AbortedTxn, error) {
	if err := l.loadTxnStateIfNeeded(); err != nil {
		return nil, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	// Segments before the one holding from have their markers below it.
	first := max(sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > from })-1, 0)
	for _, s := range l.segments[first:] {
		for _, a := range s.aborted {
			if a.LastOffset >= from && a.FirstOffset < to {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// applyBatchLocked records one appended batch (whole, offsets final) in the
// producer state: data batches by producerState.applyLocked, end
// transaction markers here. An abort adds the transaction to the index of
// the marker's segment.
func (l *Log) applyBatchLocked(h BatchHeader, batch []byte) {
	ps := &l.producers
	if !h.Control() {
		ps.applyLocked(h)
		return
	}
	if !isIdempotent(h) {
		return
	}
	typ, coordinatorEpoch, ok := parseControlRecord(batch)
	if !ok || (typ != controlTypeAbort && typ != controlTypeCommit) {
		// Another kind of control record: not a transaction's end.
		return
	}
	e := ps.producers[h.ProducerID]
	if e == nil {
		ps.makeRoomLocked()
		e = &producerEntry{epoch: h.ProducerEpoch}
		ps.producers[h.ProducerID] = e
	}
	if h.ProducerEpoch > e.epoch || len(e.batches) == 0 {
		// A marker with a bumped epoch (an abort on timeout or
		// InitProducerId) starts the epoch: its first batch must start at
		// sequence 0, which follows this placeholder's -1.
		e.epoch = h.ProducerEpoch
		e.batches = []producerBatch{{firstSeq: -1, lastSeq: -1, firstOffset: h.BaseOffset, lastOffset: h.BaseOffset}}
	}
	e.coordinatorEpoch = max(e.coordinatorEpoch, coordinatorEpoch+1)
	e.lastTimestamp = min(h.MaxTimestamp, ps.now().UnixMilli())
	ps.dirty = true
	if !e.txnOngoing {
		return
	}
	first := e.txnFirstOffset
	e.txnOngoing, e.txnFirstOffset = false, 0
	// The first unstable offset once this transaction ended: the oldest
	// other ongoing one's.
	othersFirst := int64(-1)
	for _, other := range ps.producers {
		if other.txnOngoing && (othersFirst < 0 || other.txnFirstOffset < othersFirst) {
			othersFirst = other.txnFirstOffset
		}
	}
	if typ == controlTypeAbort {
		// Indexed before the first unstable offset moves past the
		// transaction: a read_committed fetch must never read its
		// records without finding it in the aborted list.
		lso := h.NextOffset()
		if othersFirst >= 0 {
			lso = min(lso, othersFirst)
		}
		if err := l.addAbortedLocked(AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.BaseOffset, LastStableOffset: lso}); err != nil {
			l.logger.Error("writing the transaction index", "producer_id", h.ProducerID, "marker_offset", h.BaseOffset, "err", err)
		}
	}
	ps.firstUnstable.Store(othersFirst)
}

// checkMarkerLocked fences a marker from an older producer epoch or an
// older coordinator.
func (ps *producerState) checkMarkerLocked(m EndTxnMarker) error {
	e := ps.producers[m.ProducerID]
	switch {
	case m.ProducerID < 0 || m.ProducerEpoch < 0:
		return &ProducerError{Err: ErrInvalidRecord, Message: fmt.Sprintf("transaction marker for producer ID %d epoch %d", m.ProducerID, m.ProducerEpoch)}
	case e == nil:
		return nil
	case m.ProducerEpoch < e.epoch:
		return &ProducerError{Err: ErrInvalidProducerEpoch, Message: fmt.Sprintf("producer ID %d: marker epoch %d is older than the current epoch %d", m.ProducerID, m.ProducerEpoch, e.epoch)}
	case m.CoordinatorEpoch+1 < e.coordinatorEpoch:
		return &ProducerError{Err: ErrCoordinatorFenced, Message: fmt.Sprintf("producer ID %d: marker from coordinator epoch %d, the partition has seen %d", m.ProducerID, m.CoordinatorEpoch, e.coordinatorEpoch-1)}
	}
	return nil
}

// holdStableLocked lowers the first unstable offset, before batches are
// appended, to where each transaction they begin will start: the log end
// moves (and with it, on a lone broker, the high watermark) the moment the
// batches are written, and a read_committed fetch between that and their
// recording would otherwise see a last stable offset past an open
// transaction's first records. Replicated batches carry their offsets; a
// fresh append starts at the log end, a bound low enough for every batch
// of it. holdStableLocked reads the headers of replicated batches that lie
// wholly inside batches; a fresh append, whose headers validation parsed,
// goes to holdStableHeadersLocked. The caller holds the producer lock,
// with the state loaded.
func (l *Log) holdStableLocked(batches []byte) {
	end := l.EndOffset()
	for b := batches; len(b) >= batchHeaderSize; {
		h := recordbatch.HeaderAt(b)
		if h.Length < batchHeaderSize-batchLengthOverhead || h.Size() > len(b) {
			return
		}
		l.holdStableForLocked(h, end, true)
		b = b[h.Size():]
	}
}

// holdStableHeadersLocked is holdStableLocked for a fresh append's
// validated headers.
func (l *Log) holdStableHeadersLocked(headers []BatchHeader) {
	end := l.EndOffset()
	for _, h := range headers {
		l.holdStableForLocked(h, end, false)
	}
}

// holdStableForLocked lowers the first unstable offset for the batch of
// header h, if it begins a transaction; end is the log end before the
// append.
func (l *Log) holdStableForLocked(h BatchHeader, end int64, replicated bool) {
	ps := &l.producers
	if e := ps.producers[h.ProducerID]; h.Transactional() && !h.Control() && (e == nil || !e.txnOngoing) {
		start := end
		if replicated {
			start = h.BaseOffset
		}
		if cur := ps.firstUnstable.Load(); cur < 0 || start < cur {
			ps.firstUnstable.Store(start)
		}
	}
}

// afterAppendLocked records appended batches in the producer state, or,
// when the append failed, takes back what holdStableLocked set for them.
func (l *Log) afterAppendLocked(txn bool, info AppendInfo, batches []byte, err error) {
	switch {
	case err == nil:
		l.recordProducersLocked(info.Batches, batches)
	case txn:
		l.producers.recomputeFirstUnstableLocked()
	}
}
