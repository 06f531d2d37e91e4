package log

// Writing again after a failed write, without a restart.
//
// A failed write or fsync makes the log refuse appends (writeErr is
// sticky): pretending it worked would acknowledge records that may not be
// on disk. Reads go on. What happens next depends on what failed:
//
//   - A write (the data of an append, an index, the recovery point or
//     leader epoch checkpoint) failed, typically because the volume is full: nothing
//     fsynced was touched, and the log's state in memory is still exactly
//     what was written before (appendLocked takes a partial write back).
//     RecoverWrites, which the Manager calls every WriteRetryInterval,
//     then reopens the log for appends from that state, verified: it cuts
//     any torn tail off the active segment, re-reads every batch of the
//     active segment checking its framing and CRC-32C, rebuilds and rewrites
//     its indexes from the scan as recovery at Open does, rewrites the
//     leader epoch checkpoint, rebuilds the idempotent-producer state from
//     the log as a restart does, and fsyncs,
//     after a probe (the recovery point checkpoint written again) showed
//     that the volume takes writes; only if all of that succeeds are
//     appends accepted.
//   - An fsync failed, a truncation or a segment replacement failed half
//     way: after a failed fsync Linux may have dropped the dirty pages, so
//     what a read returns may not be what is on disk, and a half-done
//     truncation leaves memory and disk disagreeing. Only a restart's
//     recovery (Open) is trusted there; the log refuses appends until then.
//
// Either way Refusing reports it, for metrics and Metadata.

import (
	"errors"
	"fmt"
	"time"
)

// WriteRetryInterval is how often the Manager retries writing to logs whose
// write failed (RecoverWrites).
const WriteRetryInterval = 2 * time.Second

// failWritesLocked makes err the log's sticky write error, unless one is
// already set, and returns the sticky error. inPlace says the failure left
// disk and memory agreeing, so RecoverWrites may clear it; one failure that
// is not in place makes the whole error so.
func (l *Log) failWritesLocked(err error, inPlace bool) error {
	if l.writeErr == nil {
		l.writeErr, l.writeErrInPlace = err, inPlace
	} else {
		l.writeErrInPlace = l.writeErrInPlace && inPlace
	}
	l.refusing.Store(true)
	return l.writeErr
}

// Refusing reports, without waiting for a writer, whether the log refuses
// appends after a failed write.
func (l *Log) Refusing() bool { return l.refusing.Load() }

// ErrNeedsReopen is returned by RecoverWrites for a failure only a restart's
// recovery can clear (see the top of this file).
var ErrNeedsReopen = errors.New("log: only reopening (a broker restart) recovers this failure")

// RecoverWrites makes a log that refuses appends after a failed write accept
// them again, if the failure allows it and the disk takes writes again. It
// reports whether the log accepts appends now; err says why not.
func (l *Log) RecoverWrites() (bool, error) {
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return false, ErrClosed
	}
	if l.writeErr == nil {
		return true, nil
	}
	if !l.writeErrInPlace {
		return false, fmt.Errorf("%w: %w", ErrNeedsReopen, l.writeErr)
	}
	// The probe first, quietly (a full volume is retried every few
	// seconds): a new file written, fsynced and renamed in the log's
	// directory, holding the recovery point it already holds. Without room
	// it fails and the log stays refusing.
	if err := writeCheckpoint(l.recoveryPointPath(), [][]int64{{l.recoveryPoint}}); err != nil {
		return false, fmt.Errorf("log: volume still refuses writes: %w", err)
	}
	if err := l.verifyActiveLocked(); err != nil {
		return false, err
	}
	// The leader epochs in memory are right; their checkpoint may be the
	// write that failed.
	if err := l.persistEpochsLocked(); err != nil {
		return false, err
	}
	if l.producers.loaded {
		// An append whose data was written but whose flush failed was
		// refused to its producer and never recorded; its retry must be
		// recognised as a duplicate. Rebuild the state from the snapshot
		// and the log, as a restart would.
		if err := l.rebuildProducersLocked(); err != nil {
			return false, err
		}
	}
	for _, s := range l.segments {
		if s.nextOffset > l.recoveryPoint {
			s.dirty = true
		}
	}
	cause := l.writeErr
	l.writeErr, l.writeErrInPlace = nil, false
	if err := l.flushLocked(); err != nil {
		return false, err // flushLocked made it sticky again
	}
	l.refusing.Store(false)
	l.logger.Warn("log accepts appends again after a failed write", "end_offset", l.endOffset, "cause", cause)
	return true, nil
}

// verifyActiveLocked checks the active segment against what the log holds
// in memory: the file is cut back to the bytes appended (a failed write may
// have left a torn tail), every batch is re-read (framing, offsets, CRC-32C)
// and must end exactly there, and the indexes are rebuilt from that scan
// and rewritten. A mismatch leaves the log refusing (a restart recovers it).
func (l *Log) verifyActiveLocked() error {
	s := l.segments[len(l.segments)-1]
	interval := l.Config().IndexIntervalBytes
	fi, err := s.log.Stat()
	if err != nil {
		return err
	}
	switch {
	case fi.Size() > s.size:
		l.logger.Warn("cutting a torn tail left by a failed write", "segment", s.baseOffset, "valid_bytes", s.size, "file_bytes", fi.Size())
		if err := s.log.Truncate(s.size); err != nil {
			return err
		}
	case fi.Size() < s.size:
		l.writeErrInPlace = false
		return fmt.Errorf("%w: segment %d holds %d bytes, %d were appended", ErrNeedsReopen, s.baseOffset, fi.Size(), s.size)
	}
	// A scan into a scratch segment over the same file: s is not changed
	// unless the scan agrees with it.
	scratch := &segment{dir: s.dir, baseOffset: s.baseOffset, log: s.log, nextOffset: s.baseOffset, maxTimestamp: -1, offsetOfMaxTs: s.baseOffset}
	end, err := scratch.scanLocked(0, s.size, interval, true)
	if err != nil {
		return err
	}
	if end != s.size || scratch.nextOffset != s.nextOffset {
		l.writeErrInPlace = false
		return fmt.Errorf("%w: segment %d re-read valid to byte %d offset %d, the log holds %d bytes to offset %d",
			ErrNeedsReopen, s.baseOffset, end, scratch.nextOffset, s.size, s.nextOffset)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openIndexFilesLocked(); err != nil {
		return err
	}
	if err := errors.Join(s.indexFile.Truncate(0), s.timeFile.Truncate(0)); err != nil {
		return err
	}
	s.index, s.times = scratch.index, scratch.times
	s.indexPersisted, s.timesPersisted = 0, 0
	s.maxTimestamp, s.offsetOfMaxTs, s.bytesSinceIndex = scratch.maxTimestamp, scratch.offsetOfMaxTs, scratch.bytesSinceIndex
	s.loaded = true
	return s.persistIndexesLocked()
}
