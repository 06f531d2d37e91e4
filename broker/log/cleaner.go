package log

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	"millrace/internal/recordbatch"
)

// Log compaction (cleanup.policy=compact): Kafka's log cleaner, one log at
// a time.
//
// The closed segments of a compacted log are split by the first dirty
// offset, kept in cleanerCheckpointFile: below it every record was cleaned
// at least once (the clean part), from it to the cleanable end it was not
// (the dirty part). The cleanable end is the base offset of the first
// segment that must not be cleaned yet: the active segment, a segment
// holding a record younger than min.compaction.lag.ms, or one reaching past
// the bound the broker gives (the high watermark, so nothing a new leader
// could truncate is cleaned against) or the first unstable offset (an
// ongoing transaction's records are neither cleaned nor used to clean).
//
// A pass (Clean) runs when the dirty part's share of the closed segments
// reaches min.cleanable.dirty.ratio, or when its oldest record is older than
// max.compaction.lag.ms:
//
//  1. it maps every key of the dirty part to the offset of its last record
//     (the offset map, cleaner_offset_map.go: key digests in a table of
//     at most log.cleaner.dedupe.buffer.size, checked at every record).
//     When the map fills it stops at the first record whose key does not
//     fit, even inside a segment or a batch: the map covers the dirty
//     part up to there, the mapped end, and the next pass carries on
//     from it, so a segment whose keys alone exceed the buffer is cleaned
//     over several passes (Kafka cleans up to the map's latest offset the
//     same way);
//  2. it rewrites the segments from the log's first up to the end of the
//     segment holding the mapped end through ReplaceSegments (replace.go:
//     the crash-safe .cleaned/.swap swap), keeping a record unless a
//     later record of its key exists, or it is a tombstone (null value)
//     whose timestamp is more than delete.retention.ms old; a record at or
//     past the mapped end is kept whatever it is, as the map knows nothing
//     of the records after it. Kept records keep their offsets; a batch
//     keeps its header, so its offset range and its producer's sequence
//     numbers are unchanged, and a batch left without records is dropped
//     unless it is its producer's last, which stays, empty, as in Kafka, so
//     an idempotent producer's retries are still recognised after the
//     producer state is rebuilt from the log. Records without a key are
//     kept. Aborted transactions and transaction markers go as
//     cleaner_txn.go says;
//  3. it moves the first dirty offset to the mapped end.
//
// Each replica cleans on its own. The rules depend only on the log's
// contents, record timestamps and the clock's view of delete.retention.ms,
// so replicas that cleaned the same range read the same records at the
// same offsets. A follower fetching across a range its leader cleaned
// receives a batch starting past its log end, which AppendReplicated
// accepts.

// cleanerCheckpointFile: checkpoint, one offset: the first dirty offset.
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// cleanerState is a log's compaction progress.
type cleanerState struct {
	mu         sync.Mutex // guards the following and the checkpoint file
	loaded     bool
	firstDirty int64
}

// cleanerReadBytes is how much of a segment one read of a pass takes.
const cleanerReadBytes = 1 << 20

// CleanOptions are the inputs of one cleaning pass.
type CleanOptions struct {
	// Now is the clock for min/max.compaction.lag.ms and delete.retention.ms.
	Now time.Time
	// Bound, if at least 0, is the offset no cleaned segment may reach
	// past: the partition's high watermark.
	Bound int64
	// MapBytes bounds the offset map (log.cleaner.dedupe.buffer.size
	// divided among the cleaner threads); 0 means Kafka's default, 128 MiB.
	MapBytes int64
	// Throttle, if set, paces the bytes read and written.
	Throttle *Throttle
	// Force cleans even when the dirty ratio is below
	// min.cleanable.dirty.ratio and nothing is overdue (tests, tools).
	Force bool
}

// CleanResult reports a pass.
type CleanResult struct {
	Cleaned  bool  // a replacement happened
	From, To int64 // the offsets rewritten: [From, To)
	// MappedTo is the new first dirty offset: the offset map covered the
	// dirty part up to it. Below To when the map filled (MapFull).
	MappedTo       int64
	MapFull        bool  // the map filled before the cleanable end
	BytesBefore    int64 // size of the segments replaced
	BytesAfter     int64 // size of their replacements
	RecordsRemoved int64
}

// CleanerStats describes what a log's cleaner could do now.
type CleanerStats struct {
	FirstDirty   int64 // offsets below it were cleaned
	CleanableEnd int64 // a pass may clean up to here (a segment base offset)
	CleanBytes   int64 // closed segments below FirstDirty
	DirtyBytes   int64 // segments in [FirstDirty, CleanableEnd)
	// OldestDirty is the first timestamp (ms) of the first dirty batch, -1
	// when there is none.
	OldestDirty int64
	// checkpoint is the first dirty offset as checkpointed, inside the
	// first dirty segment after a pass whose map filled in it: the offset
	// map starts there, not at FirstDirty, or such a pass would map the
	// same records again.
	checkpoint int64
}

// DirtyRatio is the dirty share of the cleanable segments (0 when empty).
func (s CleanerStats) DirtyRatio() float64 {
	if s.DirtyBytes == 0 {
		return 0
	}
	return float64(s.DirtyBytes) / float64(s.CleanBytes+s.DirtyBytes)
}

// firstDirtyOffset returns the checkpointed first dirty offset (0 before
// the first pass).
func (l *Log) firstDirtyOffset() (int64, error) {
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	if !l.cleaner.loaded {
		off, _, err := readOffsetCheckpoint(filepath.Join(l.dir, cleanerCheckpointFile))
		if err != nil {
			return 0, err
		}
		l.cleaner.firstDirty, l.cleaner.loaded = off, true
	}
	return l.cleaner.firstDirty, nil
}

// setFirstDirty records a pass's end, unless a truncation below it
// happened meanwhile (then the truncation's lower value stands).
func (l *Log) setFirstDirty(off int64) error {
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	off = min(off, l.EndOffset())
	if err := writeCheckpoint(filepath.Join(l.dir, cleanerCheckpointFile), [][]int64{{off}}); err != nil {
		return err
	}
	l.cleaner.firstDirty, l.cleaner.loaded = off, true
	return nil
}

// truncateCleanerCheckpoint lowers the first dirty offset to end after a
// truncation, so records appended again there count as dirty.
func (l *Log) truncateCleanerCheckpoint(end int64) error {
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	if l.cleaner.loaded && l.cleaner.firstDirty <= end {
		return nil
	}
	path := filepath.Join(l.dir, cleanerCheckpointFile)
	off, ok, err := readOffsetCheckpoint(path)
	if err != nil || !ok || off <= end {
		l.cleaner.firstDirty, l.cleaner.loaded = off, err == nil
		return err
	}
	if err := writeCheckpoint(path, [][]int64{{end}}); err != nil {
		return err
	}
	l.cleaner.firstDirty, l.cleaner.loaded = end, true
	return nil
}

// CleanerStats returns the log's clean and dirty parts as a pass at now,
// bounded by bound (see CleanOptions.Bound), would see them.
func (l *Log) CleanerStats(now time.Time, bound int64) (CleanerStats, error) {
	firstDirty, err := l.firstDirtyOffset()
	if err != nil {
		return CleanerStats{}, err
	}
	unstable, hasUnstable, err := l.FirstUnstableOffset()
	if err != nil {
		return CleanerStats{}, err
	}
	cfg := l.Config()
	segs := l.Segments()
	closed := segs[:len(segs)-1]
	limit := int64(math.MaxInt64)
	if bound >= 0 {
		limit = bound
	}
	if hasUnstable {
		limit = min(limit, unstable)
	}
	lagCutoff := now.Add(-cfg.MinCompactionLag).UnixMilli()
	st := CleanerStats{FirstDirty: firstDirty, CleanableEnd: -1, OldestDirty: -1, checkpoint: firstDirty}
	for i, s := range closed {
		next := segs[i+1].BaseOffset
		if next <= firstDirty {
			st.CleanBytes += s.Size
			continue
		}
		if s.NextOffset > limit || s.MaxTimestamp > lagCutoff {
			break
		}
		if st.DirtyBytes == 0 {
			// The first dirty segment: the pass starts at its base, so a
			// checkpoint inside it (after a truncation) counts it whole.
			st.FirstDirty = s.BaseOffset
		}
		st.DirtyBytes += s.Size
		st.CleanableEnd = next
	}
	if st.DirtyBytes == 0 {
		return st, nil
	}
	err = l.scanBatches(st.FirstDirty, st.CleanableEnd, nil, func(h BatchHeader, _ []byte) (bool, error) {
		st.OldestDirty = h.FirstTimestamp
		return false, nil
	})
	return st, err
}

// maxSegmentAge is how old the active segment may grow: segment.ms, or
// max.compaction.lag.ms when smaller on a compacted log, whose active
// segment is never cleaned, so a record is compacted within that lag even
// when appends are rare (KIP-354).
func (c Config) maxSegmentAge() time.Duration {
	if c.Compacts() {
		return min(c.SegmentAge, c.MaxCompactionLag)
	}
	return c.SegmentAge
}

// due reports whether a log with these stats should be cleaned now.
func (s CleanerStats) due(cfg Config, now time.Time) bool {
	if s.DirtyBytes == 0 {
		return false
	}
	if s.DirtyRatio() >= cfg.MinCleanableDirtyRatio {
		return true
	}
	return cfg.MaxCompactionLag != never && s.OldestDirty >= 0 && s.OldestDirty < now.Add(-cfg.MaxCompactionLag).UnixMilli()
}

// Clean runs one cleaning pass if the log is compacted and due (see the
// top of this file). ctx ends a throttled pass early; nothing is replaced
// then.
func (l *Log) Clean(ctx context.Context, o CleanOptions) (CleanResult, error) {
	cfg := l.Config()
	if !cfg.Compacts() {
		return CleanResult{}, nil
	}
	st, err := l.CleanerStats(o.Now, o.Bound)
	if err != nil || st.DirtyBytes == 0 || (!o.Force && !st.due(cfg, o.Now)) {
		return CleanResult{}, err
	}
	segs := l.Segments()
	aborted, err := l.AbortedTransactions(segs[0].BaseOffset, st.CleanableEnd)
	if err != nil {
		return CleanResult{}, err
	}
	offsets, mapped, err := l.buildOffsetMap(ctx, st, o, newTxnTracker(aborted))
	if err != nil {
		return CleanResult{}, err
	}
	producers, err := l.producerLastOffsets()
	if err != nil {
		return CleanResult{}, err
	}
	// The rewrite ends at the first segment boundary at or past the mapped
	// end; CleanableEnd is one, so there always is one.
	end := st.CleanableEnd
	for _, s := range segs {
		if s.BaseOffset >= mapped && s.BaseOffset < end {
			end = s.BaseOffset
		}
	}
	res := CleanResult{From: segs[0].BaseOffset, To: end, MappedTo: mapped, MapFull: mapped < st.CleanableEnd}
	for _, s := range segs {
		if s.BaseOffset >= res.From && s.BaseOffset < end {
			res.BytesBefore += s.Size
		}
	}
	deleteHorizon := o.Now.Add(-cfg.DeleteRetention).UnixMilli()
	keep := func(r *cleanerRecord) bool {
		if r.key == nil || r.offset >= mapped {
			return true
		}
		if last, ok := offsets.get(r.key); ok && last > r.offset {
			return false
		}
		return !r.tombstone || r.timestamp >= deleteHorizon
	}
	isProducerLast := func(h BatchHeader) bool {
		last, ok := producers[h.ProducerID]
		return ok && h.ProducerID >= 0 && last == h.LastOffset()
	}
	err = l.ReplaceSegments(res.From, end, func(w *SegmentWriter) error {
		var out []byte
		txns := newTxnTracker(aborted)
		err := l.scanBatches(res.From, end, o.Throttle.bind(ctx), func(h BatchHeader, b []byte) (bool, error) {
			var err error
			var removed int64
			switch {
			case h.Control():
				if txns.dropMarker(h, b, deleteHorizon) && !isProducerLast(h) {
					removed = int64(h.Records)
				} else {
					out = append(out, b...)
				}
			case txns.abortedData(h):
				removed = int64(h.Records)
				if isProducerLast(h) {
					out, err = rebuildBatch(out, h, b, nil)
				}
			default:
				out, removed, err = cleanBatch(l.decoder, out, h, b, keep, isProducerLast(h), cfg.MaxDecompressedBytes)
				txns.kept(h, int(int64(h.Records)-removed))
			}
			if err != nil {
				return false, err
			}
			res.RecordsRemoved += removed
			if len(out) >= cleanerReadBytes {
				if err := o.Throttle.Wait(ctx, len(out)); err != nil {
					return false, err
				}
				err, out = w.Append(out), out[:0]
				return err == nil, err
			}
			return true, nil
		})
		if err == nil && len(out) > 0 {
			if err = o.Throttle.Wait(ctx, len(out)); err == nil {
				err = w.Append(out)
			}
		}
		if err == nil {
			for _, s := range w.Segments() {
				res.BytesAfter += s.Size
			}
		}
		return err
	})
	if err != nil {
		return CleanResult{}, err
	}
	res.Cleaned = true
	l.logger.Info("cleaned log", "from", res.From, "to", res.To, "bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter, "records_removed", res.RecordsRemoved)
	if res.MapFull {
		l.logger.Info("cleaner offset map full; the next pass goes on from the mapped end",
			"mapped_to", mapped, "cleanable_end", st.CleanableEnd, "map_bytes", offsets.Bytes(), "keys", offsets.entries)
	}
	return res, l.setFirstDirty(mapped)
}

// cleanBatch appends to dst what the cleaner keeps of data batch b (header
// h, not of an aborted transaction):
// b itself when every record stays, a rebuilt batch with the kept records,
// an empty batch when none stays but it is its producer's last
// (producerLast), or nothing.
func cleanBatch(d *recordbatch.Decoder, dst []byte, h BatchHeader, b []byte, keep func(*cleanerRecord) bool, producerLast bool, limit int64) ([]byte, int64, error) {
	records, err := openRecords(d, h, b, limit)
	if errors.Is(err, ErrBatchTooLarge) {
		// Stored under a larger millrace.max.decompressed.bytes: keep it
		// rather than decode past today's bound.
		return append(dst, b...), 0, nil
	}
	if err != nil {
		return dst, 0, err
	}
	kept := records[:0:0]
	for i := range records {
		if keep(&records[i]) {
			kept = append(kept, records[i])
		}
	}
	removed := int64(len(records) - len(kept))
	switch {
	case removed == 0:
		return append(dst, b...), 0, nil
	case len(kept) == 0 && !producerLast:
		return dst, removed, nil
	}
	dst, err = rebuildBatch(dst, h, b, kept)
	return dst, removed, err
}

// buildOffsetMap maps each key of the dirty part to its last offset, and
// returns the mapped end: the cleanable end, or the offset of the first
// record whose key did not fit in o.MapBytes. Records of aborted
// transactions are left out: they must not hide anything.
func (l *Log) buildOffsetMap(ctx context.Context, st CleanerStats, o CleanOptions, txns *txnTracker) (*offsetMap, int64, error) {
	from := max(st.FirstDirty, st.checkpoint)
	offsets := newOffsetMap(o.MapBytes, st.CleanableEnd-from)
	end := st.CleanableEnd
	limit := l.Config().MaxDecompressedBytes
	err := l.scanBatches(from, st.CleanableEnd, o.Throttle.bind(ctx), func(h BatchHeader, b []byte) (bool, error) {
		if h.Control() || txns.abortedData(h) {
			return true, nil
		}
		records, err := openRecords(l.decoder, h, b, limit)
		if errors.Is(err, ErrBatchTooLarge) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, r := range records {
			if r.key == nil || r.offset < from {
				continue
			}
			if !offsets.put(r.key, r.offset) {
				end = r.offset
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, 0, err
	}
	return offsets, end, nil
}

// producerLastOffsets maps each producer the log remembers to the last
// offset of its last batch.
func (l *Log) producerLastOffsets() (map[int64]int64, error) {
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	if err := l.ensureProducersLoadedLocked(); err != nil {
		return nil, err
	}
	out := make(map[int64]int64, len(l.producers.producers))
	for id, e := range l.producers.producers {
		out[id] = e.batches[len(e.batches)-1].lastOffset
	}
	return out, nil
}

// scanBatches calls fn with every batch that starts below to and ends at
// or after from and the log start offset, in order, until fn returns false
// or an error. (Records below the log start offset, which DeleteRecords
// moves, are gone: a pass drops the batches wholly below it.) pace, if
// set, is called with the bytes of each read before it is used.
func (l *Log) scanBatches(from, to int64, pace func(n int) error, fn func(h BatchHeader, b []byte) (bool, error)) error {
	from = max(from, l.StartOffset())
	for off := from; off < to; {
		s, err := l.Read(off, cleanerReadBytes, to)
		if err != nil {
			return err
		}
		b, err := s.ReadAll()
		next := s.NextOffset()
		s.Close()
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return nil
		}
		if pace != nil {
			if err := pace(len(b)); err != nil {
				return err
			}
		}
		headers, err := recordbatch.ValidateStored(b, maxInt)
		if err != nil {
			return fmt.Errorf("log: cleaner reading at %d: %w", off, err)
		}
		for _, h := range headers {
			if h.LastOffset() >= from && h.BaseOffset < to {
				more, err := fn(h, b[:h.Size()])
				if err != nil || !more {
					return err
				}
			}
			b = b[h.Size():]
		}
		if next <= off {
			return nil
		}
		off = next
	}
	return nil
}
