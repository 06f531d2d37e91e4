package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"millrace/internal/durable"

	"millrace/internal/recordbatch"
)

// Segment replacement: the log cleaner's swap (Kafka's replaceSegments).
//
// A run of closed segments [from, to) (to is the base offset of the segment
// after the run, so the active segment is never part of it) is replaced by
// new segments holding a subset of its batches at their original offsets,
// gaps allowed. The first new segment keeps base offset from, so the start
// offset and every offset lookup stay as they were; further new segments
// start at their first batch. The files move through Kafka's suffixes:
//
//  1. write every new segment as <base>.log.cleaned, <base>.index.cleaned,
//     <base>.timeindex.cleaned and <base>.txnindex.cleaned (the aborted
//     transactions of the old run whose markers fall in it; empty if none,
//     so that recovery can tell a new index from an old one of the same
//     name), fsync them, and write the replacement record
//     replacement.cleaned (checkpoint format, see checkpoint.go; entries:
//     from, to, then each new segment's base offset), fsynced;
//  2. rename the segment files to *.swap and fsync the directory, then
//     rename replacement.cleaned to replacement.swap and fsync the
//     directory: that rename is the commit point;
//  3. delete the old segments' files as retention does (renamed *.deleted,
//     unlinked when the last reader closes its Slice);
//  4. rename the *.swap segment files to their final names, fsync the
//     directory, remove replacement.swap; an empty transaction index is
//     removed then.
//
// Open (recoverReplacement) finishes or undoes an interrupted swap: without
// replacement.swap nothing was committed, and every *.cleaned and *.swap
// file is deleted, leaving the old segments; with it the swap committed, so
// the old segments' files in [from, to) that are not new are deleted and
// every *.swap file is renamed over its final name. A process killed at any
// point therefore reopens with either the old run or the new one, never a
// mix. The record makes a multi-segment swap atomic and names the range,
// which the new segments' own offsets cannot: the last kept batch may end
// well before to.

const (
	// cleanedSuffix: a file of a replacement being written; deleted at Open.
	cleanedSuffix = ".cleaned"
	// swapSuffix: a file of a replacement ready to take its final name; see
	// replacementFile for when Open completes or deletes it.
	swapSuffix = ".swap"
	// replacementFile: the record of a replacement in progress, with
	// cleanedSuffix while it is written and swapSuffix once it committed.
	replacementFile = "replacement"
)

// ErrReplaceConflict means the segments to replace changed (retention,
// truncation, or another replacement) while their replacement was built;
// nothing was replaced and the caller may start again.
var ErrReplaceConflict = errors.New("log: segments changed while their replacement was built")

// replaceState serialises replacements of one log.
type replaceState struct {
	mu sync.Mutex // held for a whole ReplaceSegments; guards the following
	// stopAfter, if set (tests only), is called after each durable step of
	// the swap; returning true stops there as a killed process would, leaving
	// the files as they are.
	stopAfter func(step string) bool
}

// errStopped is what ReplaceSegments returns when stopAfter stopped it.
var errStopped = errors.New("log: replacement stopped by test hook")

// stop reports whether the test hook wants the swap to stop after step.
func (r *replaceState) stop(step string) bool {
	return r.stopAfter != nil && r.stopAfter(step)
}

// ReplaceSegments replaces the closed segments whose base offsets lie in
// [from, to) with the batches build appends to the SegmentWriter. from must
// be a segment's base offset and to the base offset of a later segment, so
// the active segment is never replaced. build may read the old segments
// through Read meanwhile; appends, fetches and fsyncs go on undisturbed, and
// only the final swap takes the writer lock. Readers holding a Slice of an
// old segment keep reading it until they close it.
//
// If the run changed while build ran (retention, truncation),
// ErrReplaceConflict is returned and the log is unchanged. If the swap fails
// after its commit point the log refuses writes until reopened, and Open
// completes the swap.
func (l *Log) ReplaceSegments(from, to int64, build func(w *SegmentWriter) error) error {
	l.replace.mu.Lock()
	defer l.replace.mu.Unlock()
	run, modTime, err := l.replaceRun(from, to)
	if err != nil {
		return err
	}
	w := &SegmentWriter{l: l, from: from, to: to, next: from, cfg: l.Config(), aborted: l.abortedIn(run[:len(run)-1])}
	if err := w.prepare(build, modTime); err != nil {
		if errors.Is(err, errStopped) {
			return errors.Join(err, w.close())
		}
		return errors.Join(err, w.discard())
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	first := -1
	err = l.writableLocked()
	if err == nil {
		if first = l.runIndexLocked(run); first < 0 {
			err = ErrReplaceConflict
		}
	}
	if err == nil {
		err = w.commit()
	}
	if errors.Is(err, errStopped) {
		return errors.Join(err, w.close())
	}
	if err != nil && !w.committed {
		return errors.Join(err, w.discard())
	}
	if err == nil {
		err = l.swapLocked(w, run, first)
	}
	if errors.Is(err, errStopped) {
		return errors.Join(err, w.close())
	}
	if err != nil {
		l.logger.Error("segment replacement failed", "err", err)
		return errors.Join(l.failWritesLocked(fmt.Errorf("log: replacing segments [%d, %d) failed after its commit; log refuses appends until reopened, which completes it: %w", from, to, err), false), w.close())
	}
	return nil
}

// replaceRun returns the segments [from, to) followed by the segment at to,
// and the modification time of the last segment of the run.
func (l *Log) replaceRun(from, to int64) ([]*segment, time.Time, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, time.Time{}, ErrClosed
	}
	active := l.segments[len(l.segments)-1]
	if from >= active.baseOffset {
		return nil, time.Time{}, fmt.Errorf("log: cannot replace from %d: the active segment (base %d) is never replaced", from, active.baseOffset)
	}
	i := slices.IndexFunc(l.segments, func(s *segment) bool { return s.baseOffset == from })
	j := slices.IndexFunc(l.segments, func(s *segment) bool { return s.baseOffset == to })
	if i < 0 || j <= i {
		return nil, time.Time{}, fmt.Errorf("log: cannot replace [%d, %d): both ends must be segment base offsets, in order", from, to)
	}
	// Under l.mu a listed segment holds the log's reference: its file is open.
	fi, err := l.segments[j-1].log.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	return slices.Clone(l.segments[i : j+1]), fi.ModTime(), nil
}

// runIndexLocked returns where run still stands in the segment list, or -1
// if any of it was deleted or replaced meanwhile. Caller holds appendMu.
func (l *Log) runIndexLocked(run []*segment) int {
	i := slices.Index(l.segments, run[0])
	if i < 0 || i+len(run) > len(l.segments) || !slices.Equal(l.segments[i:i+len(run)], run) {
		return -1
	}
	// A segment truncated in place keeps its place in the list but not its
	// contents; truncation always deletes the segments after it, so the
	// following segment still being there means none was.
	return i
}

// swapLocked carries out steps 3 and 4 after the commit and puts the new
// segments in the list in place of run's first len(run)-1 segments.
func (l *Log) swapLocked(w *SegmentWriter, run []*segment, first int) error {
	old := run[:len(run)-1]
	var errs []error
	for _, s := range old {
		errs = append(errs, s.markDeleted())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if l.replace.stop("old deleted") {
		return errStopped
	}
	for _, s := range w.segments {
		for _, suffix := range []string{txnIndexSuffix, indexSuffix, timeIndexSuffix, logSuffix} {
			p := segmentPath(l.dir, s.baseOffset, suffix)
			if err := renameOpen(s.fileLocked(suffix), p+swapSuffix, p); err != nil {
				return err
			}
			if l.replace.stop("renamed " + filepath.Base(p)) {
				return errStopped
			}
		}
	}
	if err := durable.SyncDir(l.dir); err != nil {
		return err
	}
	l.mu.Lock()
	l.segments = slices.Concat(l.segments[:first], w.segments, l.segments[first+len(old):])
	l.mu.Unlock()

	l.logger.Info("replaced segments", "from", w.from, "to", w.to, "old_segments", len(old), "new_segments", len(w.segments))
	replacements := w.segments
	w.segments = nil // the log owns them now
	errs = append(errs, l.retireLocked(old))
	if l.replace.stop("swapped") {
		return errStopped
	}
	errs = append(errs, os.Remove(filepath.Join(l.dir, replacementFile+swapSuffix)), durable.SyncDir(l.dir))
	errs = append(errs, removeEmptyTxnIndexes(l.dir, replacements))
	return errors.Join(errs...)
}

// SegmentWriter writes the segments that replace a run (see
// Log.ReplaceSegments). It is not safe for concurrent use.
type SegmentWriter struct {
	l         *Log
	from, to  int64
	cfg       Config
	next      int64          // the lowest offset the next batch may start at
	segments  []*segment     // the new segments, files open under their .cleaned names
	aborted   []AbortedTxn   // the old run's transaction index, carried to the new segments
	markers   map[int64]bool // offsets of the control batches appended
	err       error          // sticky: a failed write spoils the whole replacement
	committed bool           // replacement.swap exists
}

// Append adds whole stored batches (as read from the log, offsets set) after
// those appended before. Their bytes are kept verbatim, so each batch keeps
// its offsets, leader epoch and CRC; offsets must increase and lie in the
// range being replaced, and may leave gaps. A new segment starts when one
// would outgrow segment.bytes, its indexes or its 32-bit relative offsets.
func (w *SegmentWriter) Append(batches []byte) error {
	if w.err != nil {
		return w.err
	}
	headers, err := recordbatch.ValidateStored(batches, maxInt)
	if err != nil {
		return err
	}
	next := w.next
	for _, h := range headers {
		if h.BaseOffset < next || h.LastOffset() >= w.to {
			return fmt.Errorf("%w: batch [%d, %d] is not after offset %d and below %d", ErrOffsetMismatch, h.BaseOffset, h.LastOffset(), next, w.to)
		}
		next = h.NextOffset()
	}
	if err := w.write(batches, headers); err != nil {
		w.err = fmt.Errorf("log: writing replacement segment: %w", err)
		return w.err
	}
	return nil
}

// Segments describes the new segments written so far.
func (w *SegmentWriter) Segments() []SegmentInfo {
	out := make([]SegmentInfo, len(w.segments))
	for i, s := range w.segments {
		out[i] = SegmentInfo{BaseOffset: s.baseOffset, NextOffset: s.nextOffset, Size: s.size, MaxTimestamp: s.maxTimestamp}
	}
	return out
}

// write notes each batch in the current segment, starting a new one first
// where needed, and writes the batches bound for one segment with one call.
func (w *SegmentWriter) write(batches []byte, headers []BatchHeader) error {
	s := w.segments[len(w.segments)-1]
	chunk, chunkPos := 0, s.size // batches[chunk:pos] go to s at chunkPos, not written yet
	pos := 0
	for _, h := range headers {
		n := h.Size()
		s.mu.Lock()
		indexFull := (len(s.index)+1)*offsetIndexEntrySize > w.cfg.SegmentIndexBytes || (len(s.times)+1)*timeIndexEntrySize > w.cfg.SegmentIndexBytes
		s.mu.Unlock()
		if h.LastOffset()-s.baseOffset > maxRelativeOffset || (s.size > 0 && (s.size+int64(n) > w.cfg.SegmentBytes || indexFull)) {
			if err := writeFull(s.log, batches[chunk:pos], chunkPos); err != nil {
				return err
			}
			if err := w.startSegment(h.BaseOffset); err != nil {
				return err
			}
			s = w.segments[len(w.segments)-1]
			chunk, chunkPos = pos, 0
		}
		s.mu.Lock()
		s.noteBatchLocked(h.BaseOffset, h.NextOffset(), s.size, n, h.MaxTimestamp, w.cfg.IndexIntervalBytes)
		s.mu.Unlock()
		w.next = h.NextOffset()
		pos += n
		if h.Control() {
			if w.markers == nil {
				w.markers = map[int64]bool{}
			}
			w.markers[h.BaseOffset] = true
		}
	}
	return writeFull(s.log, batches[chunk:pos], chunkPos)
}

// writeFull writes b at pos, calling a short write an error.
func writeFull(f file, b []byte, pos int64) error {
	n, err := f.WriteAt(b, pos)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short write of %d of %d bytes", n, len(b))
	}
	return err
}

// startSegment opens the .cleaned files of a new segment at base.
func (w *SegmentWriter) startSegment(base int64) error {
	open := func(suffix string) (file, error) {
		return w.l.openFile(segmentPath(w.l.dir, base, suffix)+cleanedSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	}
	s := &segment{dir: w.l.dir, baseOffset: base, openFile: w.l.openFile, nextOffset: base, maxTimestamp: -1, offsetOfMaxTs: base, loaded: true}
	s.refs.Store(1)
	// Added before opening, so discard closes whatever did open.
	w.segments = append(w.segments, s)
	var err error
	if s.log, err = open(logSuffix); err != nil {
		return err
	}
	if s.indexFile, err = open(indexSuffix); err != nil {
		return err
	}
	s.timeFile, err = open(timeIndexSuffix)
	return err
}

// prepare is step 1: it runs build, then writes the indexes (with the final
// time index entry a rolled segment gets), gives the logs modTime, the last
// old segment's (as Kafka does, so time-based decisions about them stay as
// they were), fsyncs every file and writes replacement.cleaned.
func (w *SegmentWriter) prepare(build func(w *SegmentWriter) error, modTime time.Time) error {
	if err := w.startSegment(w.from); err != nil {
		return err
	}
	if err := build(w); err != nil {
		return err
	}
	if w.err != nil {
		return w.err
	}
	for _, s := range w.segments {
		s.mu.Lock()
		s.appendTimeEntryLocked()
		err := s.persistIndexesLocked()
		s.mu.Unlock()
		if err == nil {
			err = os.Chtimes(segmentPath(s.dir, s.baseOffset, logSuffix)+cleanedSuffix, time.Time{}, modTime)
		}
		if err == nil {
			err = errors.Join(s.log.Sync(), s.indexFile.Sync(), s.timeFile.Sync())
		}
		if err != nil {
			return fmt.Errorf("log: writing replacement segment %d: %w", s.baseOffset, err)
		}
		s.dirty = false // fsynced: the log's next flush has nothing to do for it
	}
	if err := w.writeTxnIndexes(); err != nil {
		return err
	}
	record := [][]int64{{w.from}, {w.to}}
	for _, s := range w.segments {
		record = append(record, []int64{s.baseOffset})
	}
	if err := writeCheckpoint(filepath.Join(w.l.dir, replacementFile+cleanedSuffix), record); err != nil {
		return err
	}
	if w.l.replace.stop("cleaned") {
		return errStopped
	}
	return nil
}

// commit renames the segment files to .swap, then the record (the commit
// point), fsyncing the directory after each.
func (w *SegmentWriter) commit() error {
	dir := w.l.dir
	for _, s := range w.segments {
		for _, suffix := range segmentSuffixes {
			p := segmentPath(dir, s.baseOffset, suffix)
			// The new segments are the writer's alone: no lock to take.
			if err := renameOpen(s.fileLocked(suffix), p+cleanedSuffix, p+swapSuffix); err != nil {
				return err
			}
			if w.l.replace.stop("swap " + filepath.Base(p)) {
				return errStopped
			}
		}
	}
	if err := durable.SyncDir(dir); err != nil {
		return err
	}
	p := filepath.Join(dir, replacementFile)
	if err := os.Rename(p+cleanedSuffix, p+swapSuffix); err != nil {
		return err
	}
	w.committed = true
	if err := durable.SyncDir(dir); err != nil {
		return err
	}
	if w.l.replace.stop("committed") {
		return errStopped
	}
	return nil
}

// close closes the files of the new segments not handed to the log.
func (w *SegmentWriter) close() error {
	var errs []error
	for _, s := range w.segments {
		for _, f := range []file{s.log, s.indexFile, s.timeFile} {
			if f != nil {
				errs = append(errs, f.Close())
			}
		}
	}
	return errors.Join(errs...)
}

// discard closes the new segments and deletes their files and the record,
// under whichever suffix they reached.
func (w *SegmentWriter) discard() error {
	errs := []error{w.close()}
	for _, s := range w.segments {
		for _, suffix := range segmentSuffixes {
			p := segmentPath(s.dir, s.baseOffset, suffix)
			errs = append(errs, removeIfExists(p+cleanedSuffix), removeIfExists(p+swapSuffix))
		}
	}
	w.segments = nil
	p := filepath.Join(w.l.dir, replacementFile)
	errs = append(errs, removeIfExists(p+cleanedSuffix))
	return errors.Join(errs...)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// recoverReplacement finishes or undoes a replacement interrupted by a
// crash, before Open lists the segments (see the protocol at the top of
// this file).
func recoverReplacement(dir string, logger *slog.Logger) error {
	record := filepath.Join(dir, replacementFile+swapSuffix)
	entries, err := readCheckpoint(record, 1)
	if err != nil {
		return fmt.Errorf("reading the record of a committed segment replacement: %w", err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if entries == nil {
		// Nothing committed: the old segments stand.
		for _, e := range names {
			if name := e.Name(); strings.HasSuffix(name, cleanedSuffix) || strings.HasSuffix(name, swapSuffix) {
				logger.Warn("deleting the files of an unfinished segment replacement", "file", name)
				if err := removeIfExists(filepath.Join(dir, name)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if len(entries) < 3 || entries[0][0] >= entries[1][0] {
		return fmt.Errorf("record of a committed segment replacement %s is malformed", record)
	}
	from, to := entries[0][0], entries[1][0]
	isNew := map[int64]bool{}
	for _, e := range entries[2:] {
		isNew[e[0]] = true
	}
	logger.Warn("completing an interrupted segment replacement", "from", from, "to", to)
	for _, e := range names {
		name := e.Name()
		if strings.HasSuffix(name, cleanedSuffix) {
			if err := removeIfExists(filepath.Join(dir, name)); err != nil {
				return err
			}
			continue
		}
		ext := filepath.Ext(name)
		if !slices.Contains(segmentSuffixes, ext) {
			continue
		}
		// An old segment's file: delete it unless a new segment took its
		// name, in which case the rename below replaces it (or already did).
		base, ok := parseSegmentName(strings.TrimSuffix(name, ext) + logSuffix)
		if ok && base >= from && base < to && !isNew[base] {
			if err := removeIfExists(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	for base := range isNew {
		for _, suffix := range []string{txnIndexSuffix, indexSuffix, timeIndexSuffix, logSuffix} {
			p := segmentPath(dir, base, suffix)
			if err := os.Rename(p+swapSuffix, p); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	if err := durable.SyncDir(dir); err != nil {
		return err
	}
	if err := os.Remove(record); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}
