package log

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"time"
)

// EnforceRetention deletes whole segments from the oldest: those wholly
// below the log start offset, those whose largest timestamp is older than
// retention.ms, and those beyond retention.bytes (those two only when
// cleanup.policy includes delete). It is EnforceRetentionBelow with no
// high watermark to wait for, as on a lone broker.
func (l *Log) EnforceRetention(now time.Time) (deleted int, err error) {
	return l.EnforceRetentionBelow(now, -1)
}

// EnforceRetentionBelow is EnforceRetention on a log whose records below
// highWatermark are replicated (-1: all of them are).
//
// The active segment goes too, as in Kafka, once it is not empty and its
// largest timestamp is older than retention.ms: a topic whose records all
// carry old timestamps (a replay, a backfill, a producer's wrong clock)
// would otherwise keep them until the segment rolls by size or
// segment.ms, which on a quiet topic can be never. The segment is rolled
// first, so the log keeps an empty active segment at the end offset, and
// the start offset moves there. As in Kafka it waits until every record
// of the segment is below the high watermark, so nothing a follower has
// not copied yet disappears under it, and, on a millrace.flush.on.ack
// topic, until every record is fsynced, so the start offset never passes
// the offset consumers may read to. retention.bytes never deletes the
// active segment.
func (l *Log) EnforceRetentionBelow(now time.Time, highWatermark int64) (deleted int, err error) {
	// Rolling writes a producer snapshot, which the producer lock guards;
	// it is taken before appendMu, as Roll does.
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	cfg, segs := l.cfg, l.segments
	last := len(segs) - 1
	n := 0
	for n < last && segs[n+1].baseOffset <= l.startOffset {
		n++
	}
	retention, retentionBytes := cfg.Retention, cfg.RetentionBytes
	// limit is how many segments retention may delete: on a tiered log
	// only those stored remotely (remote.go), by the local limits.
	limit := last
	tiered := l.tiered(cfg)
	if tiered {
		retention, retentionBytes = cfg.LocalRetentionLimits()
		remoteEnd := l.RemoteEnd()
		limit = n
		for limit < last && segs[limit].nextOffset <= remoteEnd {
			limit++
		}
	}
	expiredActive := false
	// A compact-only log keeps its segments whatever their age or size:
	// the cleaner shrinks it instead (cleaner.go).
	if retention >= 0 && cfg.Deletes() {
		cutoff := now.Add(-retention).UnixMilli()
		times := l.retentionTimesLocked(now)
		for n < limit && times[n] < cutoff {
			n++
		}
		// A tiered log's active segment is never stored remotely, so it
		// stays until it rolls by segment.bytes or segment.ms.
		expiredActive = !tiered && n == last && segs[last].size > 0 && times[last] < cutoff &&
			(highWatermark < 0 || highWatermark >= l.endOffset) &&
			(!cfg.FlushOnAck || l.DurableOffset() >= l.endOffset)
	}
	if retentionBytes >= 0 && cfg.Deletes() {
		var remaining int64
		for _, s := range segs[n:] {
			remaining += s.size
		}
		for n < limit && remaining-segs[n].size >= retentionBytes {
			remaining -= segs[n].size
			n++
		}
	}
	if expiredActive && n == last && l.writeErr == nil {
		if err := l.rollLocked(); err != nil {
			return 0, err
		}
		l.snapshotAtRollLocked()
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return n, l.deleteLeadingLocked(n, "retention")
}

// retentionTimesLocked returns the time retention.ms judges each segment
// by: its largest record timestamp, unless that lies beyond now +
// message.timestamp.after.max.ms.
//
// Like Kafka, time retention stops at the first segment that is not old
// enough, so one segment with a far-future timestamp (written before the
// bound existed, or by a clock that was wrong) would otherwise keep every
// later segment forever. Such a timestamp tells nothing about the
// segment's age; what does is order: segments are appended in offset
// order, so a segment is no younger than the one after it, and its file
// was last written no later than its last-modified time. An untrusted
// segment is judged by the earlier of the two, so it expires with its
// successors and, at the latest, retention.ms after its last write.
func (l *Log) retentionTimesLocked(now time.Time) []int64 {
	future := saturatingAdd(now.UnixMilli(), boundMs(l.cfg.MessageTimestampAfterMax))
	segs := l.segments
	times := make([]int64, len(segs))
	next := int64(math.MaxInt64) // the time of the segment after, once known
	for i := len(segs) - 1; i >= 0; i-- {
		times[i] = segs[i].maxTimestamp
		if times[i] > future {
			if fi, err := segs[i].log.Stat(); err == nil {
				times[i] = min(next, fi.ModTime().UnixMilli())
			} else {
				l.logger.Warn("cannot stat a segment with a future timestamp; retention keeps it", "base_offset", segs[i].baseOffset, "err", err)
			}
		}
		next = times[i]
	}
	return times
}

// deleteLeadingLocked removes the n oldest segments and moves the start
// offset to the first remaining one.
func (l *Log) deleteLeadingLocked(n int, why string) error {
	l.mu.Lock()
	doomed := l.segments[:n:n]
	l.segments = append([]*segment(nil), l.segments[n:]...)
	l.startOffset = max(l.startOffset, l.segments[0].baseOffset)
	start := l.startOffset
	l.mu.Unlock()
	l.logger.Info("deleting segments", "reason", why, "segments", n, "start_offset", start)
	if l.truncateEpochsFromStartLocked(start) {
		if err := l.persistEpochsLocked(); err != nil {
			return err
		}
	}
	return l.retireLocked(doomed)
}

// AdvanceStartOffset moves the log start offset up to offset (DeleteRecords)
// and deletes the segments wholly below it. Offsets below it become
// unreadable at once.
func (l *Log) AdvanceStartOffset(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset <= l.startOffset {
		return nil
	}
	if offset > l.endOffset {
		return fmt.Errorf("%w: start offset %d is beyond the end %d", ErrOffsetOutOfRange, offset, l.endOffset)
	}
	if err := writeCheckpoint(filepath.Join(l.dir, startOffsetFile), [][]int64{{offset}}); err != nil {
		return fmt.Errorf("log: writing log start offset: %w", err)
	}
	l.mu.Lock()
	l.startOffset = offset
	l.mu.Unlock()
	n := 0
	for n < len(l.segments)-1 && l.segments[n+1].baseOffset <= offset {
		n++
	}
	if n > 0 {
		return l.deleteLeadingLocked(n, "start offset advanced")
	}
	if l.truncateEpochsFromStartLocked(offset) {
		return l.persistEpochsLocked()
	}
	return nil
}

// TruncateTo removes every record at and after offset (a follower's
// divergent tail). offset should be a batch boundary; if it falls inside a
// batch, the whole batch goes, so the log ends at that batch's base offset.
// Later segments are deleted, the active one is trimmed with its indexes.
// An offset below the start offset empties the log and restarts it at
// offset. Reads racing with a truncation of the same bytes may fail.
//
// A truncation that removed batches rebuilds the producer state from its
// snapshot (unless that reaches past the new end) and the log, so it
// forgets the removed batches (producers.go), and writes the snapshot at
// once: an older one past the new end would otherwise be trusted again
// after a crash once appends carried the log end beyond it, though it
// describes batches the truncation removed.
func (l *Log) TruncateTo(offset int64) error {
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	before := l.EndOffset()
	if err := l.truncateTo(offset); err != nil {
		return err
	}
	if l.EndOffset() >= before {
		return nil
	}
	if p := l.producers.pending; p != nil && l.EndOffset() < p.offset {
		l.settlePendingLocked(false)
	}
	if err := l.rebuildProducersLocked(); err != nil {
		return err
	}
	if err := l.writeProducerSnapshotLocked(); err != nil {
		// The state stays dirty: the Manager's next round writes it.
		l.logger.Warn("writing the producer state snapshot after truncating", "err", err)
	}
	return nil
}

// truncateTo is TruncateTo under the producer lock.
func (l *Log) truncateTo(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset >= l.endOffset {
		return nil
	}
	if offset < 0 {
		return fmt.Errorf("%w: cannot truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset < l.startOffset {
		return l.truncateFullyLocked(offset)
	}
	cfg := l.cfg
	i := max(sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset })-1, 0)
	s := l.segments[i]

	// Find the batch holding offset; cut at its start.
	s.mu.Lock()
	err := s.ensureLoadedLocked(s.size, cfg.IndexIntervalBytes)
	pos := lookupOffset(s.index, uint32(offset-s.baseOffset))
	s.mu.Unlock()
	if err != nil {
		return err
	}
	target := s.nextOffset
	w := newHeaderWindow(s)
	defer w.release()
	for {
		b, err := w.spanAt(pos, s.size)
		if err != nil {
			return err
		}
		if b.size == 0 {
			break
		}
		if b.last >= offset {
			target = b.base
			break
		}
		pos += b.size
	}
	if target > offset {
		target = offset // in a gap below this segment's data
	}

	if err := s.log.Truncate(pos); err != nil {
		return l.failWritesLocked(fmt.Errorf("log: truncating segment %d: %w", s.baseOffset, err), false)
	}
	l.mu.Lock()
	doomed := append([]*segment(nil), l.segments[i+1:]...)
	l.segments = l.segments[:i+1]
	s.mu.Lock()
	err = s.truncateIndexesLocked(uint32(target - s.baseOffset))
	if err == nil {
		err = s.resumeLocked(pos, cfg.IndexIntervalBytes)
	}
	s.dirty = true
	s.mu.Unlock()
	l.endOffset = s.nextOffset
	if l.startOffset > l.endOffset {
		l.startOffset = l.endOffset
	}
	end := l.endOffset
	l.mu.Unlock()
	if err == nil {
		err = l.truncateTxnIndexLocked(s, end)
	}
	if err != nil {
		return l.failWritesLocked(fmt.Errorf("log: truncating indexes of segment %d: %w", s.baseOffset, err), false)
	}
	l.logger.Info("truncated", "requested_offset", offset, "end_offset", end, "deleted_segments", len(doomed))
	return l.afterTruncateLocked(end, doomed)
}

// truncateFullyLocked deletes every segment and restarts the log at offset.
func (l *Log) truncateFullyLocked(offset int64) error {
	doomed := l.segments
	// Rename first: the new segment may reuse a deleted one's file name.
	for _, d := range doomed {
		if err := d.markDeleted(); err != nil {
			return l.failWritesLocked(fmt.Errorf("log: truncating: %w", err), false)
		}
	}
	s, err := newEmptySegment(l.dir, offset, l.openFile)
	if err != nil {
		return l.failWritesLocked(fmt.Errorf("log: truncating: %w", err), false)
	}
	l.mu.Lock()
	l.segments = []*segment{s}
	l.startOffset, l.endOffset = offset, offset
	l.mu.Unlock()
	l.logger.Info("truncated fully", "start_offset", offset, "deleted_segments", len(doomed))
	if err := writeCheckpoint(filepath.Join(l.dir, startOffsetFile), [][]int64{{offset}}); err != nil {
		return err
	}
	return l.afterTruncateLocked(offset, doomed)
}

// afterTruncateLocked deletes doomed segments and lowers the recovery point,
// the cleaner's first dirty offset and the epoch cache to end.
func (l *Log) afterTruncateLocked(end int64, doomed []*segment) error {
	errs := []error{l.retireLocked(doomed), l.truncateCleanerCheckpoint(end)}
	l.noteTruncatedLocked(end)
	if l.recoveryPoint > end {
		l.recoveryPoint = end
		errs = append(errs, writeCheckpoint(filepath.Join(l.dir, recoveryPointFile), [][]int64{{end}}))
	}
	if l.truncateEpochsLocked(end) {
		errs = append(errs, l.persistEpochsLocked())
	}
	return errors.Join(errs...)
}
