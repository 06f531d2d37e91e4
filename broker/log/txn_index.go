package log

// The transaction index, <base>.txnindex beside each segment, in Kafka's
// format: the aborted transactions whose abort marker lies in the segment,
// ordered by marker offset, one 34-byte entry each, big-endian, no header:
//
//	version           int16  txnIndexVersion
//	producerID        int64
//	firstOffset       int64  the transaction's first batch
//	lastOffset        int64  its abort marker
//	lastStableOffset  int64  the log's last stable offset once it was aborted
//
// A segment without aborted transactions has no file. The entries are kept
// in memory (segment.aborted).
//
// Entries are appended, as Kafka's TransactionIndex appends them: an abort
// costs one 34-byte write to the page cache, under the producer lock but
// with no fsync. The file is fsynced with its segment (flushLocked:
// flush.messages, flush.ms, Close) and before every producer state
// snapshot is written (syncTxnIndexes). Recovery rests on that last rule:
// every abort marker below the snapshot's offset has its entry on disk,
// while the entries of later markers may be missing, torn or (on some file
// systems) zeroed after a crash. An unclean Open therefore keeps only the
// entries below the snapshot's offset, and the first load of the producer
// state, which replays every batch after the snapshot (the whole log when
// there is none), appends the others again; AbortedTransactions and
// FirstUnstableOffset load the state before they answer. millrace.flush.on.ack
// fsyncs only the .log files: an acknowledged abort marker survives, and
// its entry is rebuilt from it.
//
// A change that is not an append (a truncation, an entry that sorts before
// others, an fsync that failed) rewrites the file whole, atomically and
// durably. The entries go with their segment (truncation, retention,
// replacement), and entries past the log end are dropped at Open.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	"millrace/internal/durable"
)

const (
	// txnIndexSuffix names a segment's transaction index.
	txnIndexSuffix = ".txnindex"
	// txnIndexVersion is the entry version written (Kafka's is 0).
	txnIndexVersion = 0
	// txnIndexEntrySize: version, producerID, firstOffset, lastOffset,
	// lastStableOffset.
	txnIndexEntrySize = 2 + 8 + 8 + 8 + 8
)

// encodeTxnIndex renders entries in the file format.
func encodeTxnIndex(entries []AbortedTxn) []byte {
	b := make([]byte, 0, len(entries)*txnIndexEntrySize)
	be := binary.BigEndian
	for _, a := range entries {
		b = be.AppendUint16(b, txnIndexVersion)
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
		b = be.AppendUint64(b, uint64(a.LastStableOffset))
	}
	return b
}

var errBadTxnIndex = errors.New("malformed transaction index")

// decodeTxnIndex parses a transaction index file. It returns the entries
// before the first one that cannot be trusted, with an error saying why: a
// torn last entry (a crash cut its write short), an unknown version, an
// impossible range (a zeroed region reads as one), or a marker offset not
// after the previous entry's.
func decodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	be := binary.BigEndian
	out := make([]AbortedTxn, 0, len(b)/txnIndexEntrySize)
	for ; len(b) >= txnIndexEntrySize; b = b[txnIndexEntrySize:] {
		if v := be.Uint16(b); v != txnIndexVersion {
			return out, fmt.Errorf("%w: entry %d has version %d", errBadTxnIndex, len(out), v)
		}
		a := AbortedTxn{
			ProducerID:       int64(be.Uint64(b[2:])),
			FirstOffset:      int64(be.Uint64(b[10:])),
			LastOffset:       int64(be.Uint64(b[18:])),
			LastStableOffset: int64(be.Uint64(b[26:])),
		}
		// The marker always follows its transaction's first batch.
		if a.FirstOffset < 0 || a.LastOffset <= a.FirstOffset {
			return out, fmt.Errorf("%w: entry %d: transaction [%d, %d]", errBadTxnIndex, len(out), a.FirstOffset, a.LastOffset)
		}
		if n := len(out); n > 0 && a.LastOffset <= out[n-1].LastOffset {
			return out, fmt.Errorf("%w: entry %d: marker %d does not follow %d", errBadTxnIndex, n, a.LastOffset, out[n-1].LastOffset)
		}
		out = append(out, a)
	}
	if len(b) != 0 {
		return out, fmt.Errorf("%w: torn last entry of %d bytes", errBadTxnIndex, len(b))
	}
	return out, nil
}

// DecodeTxnIndex parses a transaction index in the format above (a
// segment's .txnindex file or a byte-for-byte copy of it): every entry, or
// an error naming the first one that cannot be trusted.
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	entries, err := decodeTxnIndex(b)
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// writeTxnIndex replaces base's transaction index with entries (removing
// the file when there are none).
func writeTxnIndex(dir string, base int64, entries []AbortedTxn) error {
	path := segmentPath(dir, base, txnIndexSuffix)
	if len(entries) == 0 {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	return durable.WriteFile(path, encodeTxnIndex(entries))
}

// loadTxnIndexes reads the transaction index of every segment in has (the
// bases whose .txnindex file exists), keeping the entries whose marker is
// below trustBelow and the log end and within the segment, and rewriting a
// file that held more (or was empty, left by an interrupted replacement).
// A damaged entry and everything after it is dropped. After an unclean
// stop only the entries below the producer snapshot's offset are trusted
// (none without a readable snapshot): see the file comment for why, and
// how the others come back. Called by load once the segments are open.
func (l *Log) loadTxnIndexes(has map[int64]bool, clean bool) error {
	if len(has) == 0 {
		return nil
	}
	limit := l.endOffset
	if !clean {
		limit = min(limit, l.txnIndexTrustedBelow())
	}
	for _, s := range l.segments {
		if !has[s.baseOffset] {
			continue
		}
		b, err := os.ReadFile(segmentPath(l.dir, s.baseOffset, txnIndexSuffix))
		if err != nil {
			return err
		}
		entries, err := decodeTxnIndex(b)
		if err != nil {
			l.logger.Warn("dropping the damaged end of a transaction index", "segment", s.baseOffset, "kept", len(entries), "err", err)
		}
		kept := slices.DeleteFunc(slices.Clone(entries), func(a AbortedTxn) bool { return a.LastOffset >= limit || a.LastOffset < s.baseOffset })
		if len(kept) != len(entries) || err != nil || len(kept) == 0 {
			if err := writeTxnIndex(l.dir, s.baseOffset, kept); err != nil {
				return err
			}
		}
		s.aborted = kept
	}
	return nil
}

// txnIndexTrustedBelow is the offset below which index entries survive an
// unclean stop: the producer snapshot's, below which every marker's entry
// was fsynced before the snapshot was written.
func (l *Log) txnIndexTrustedBelow() int64 {
	snap, err := readProducerSnapshot(l.dir)
	if err != nil || snap == nil {
		return 0 // loading the state rebuilds it, and every entry, from the log
	}
	return snap.offset
}

// addAbortedLocked records an aborted transaction in the index of the
// segment holding its marker; an entry for the same marker is kept as it
// is (a rebuild re-applies markers already indexed). The entry is appended
// to the file without fsync. The caller holds the producer lock; the
// segment list is read and changed under l.mu, the file under the
// segment's lock.
func (l *Log) addAbortedLocked(a AbortedTxn) error {
	l.mu.Lock()
	i := sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > a.LastOffset }) - 1
	if i < 0 {
		l.mu.Unlock()
		return nil // below the log: deleted meanwhile
	}
	s := l.segments[i]
	at, found := slices.BinarySearchFunc(s.aborted, a.LastOffset, func(e AbortedTxn, off int64) int {
		switch {
		case e.LastOffset < off:
			return -1
		case e.LastOffset > off:
			return 1
		}
		return 0
	})
	if found {
		l.mu.Unlock()
		return nil
	}
	last := at == len(s.aborted)
	if last {
		// In place: the entries a reader's slice holds do not change.
		s.aborted = append(s.aborted, a)
	} else {
		s.aborted = slices.Insert(slices.Clone(s.aborted), at, a)
	}
	l.mu.Unlock()
	if last {
		s.mu.Lock()
		err := s.appendTxnEntryLocked(a, at)
		s.mu.Unlock()
		if err == nil {
			return nil
		}
		l.logger.Warn("appending to the transaction index; rewriting it", "segment", s.baseOffset, "err", err)
	}
	return l.rewriteTxnIndex(s)
}

// errTxnIndexLength: the file does not hold exactly the entries before the
// one to append (a stale file, or a rewrite raced the append).
var errTxnIndexLength = errors.New("transaction index length does not match its entries")

// appendTxnEntryLocked writes a as entry number at of s's index file,
// opening it (creating it if needed) on first use. The caller holds s.mu.
func (s *segment) appendTxnEntryLocked(a AbortedTxn, at int) error {
	if s.deleted.Load() {
		return nil // its files are going: no reader opens them again
	}
	if s.txnFile == nil {
		f, err := s.openFile(segmentPath(s.dir, s.baseOffset, txnIndexSuffix), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil && fi.Size() != int64(at)*txnIndexEntrySize {
			err = fmt.Errorf("%w: %d bytes before entry %d", errTxnIndexLength, fi.Size(), at)
		}
		if err != nil {
			return errors.Join(err, f.Close())
		}
		s.txnFile = f
	}
	if _, err := s.txnFile.WriteAt(encodeTxnIndex([]AbortedTxn{a}), int64(at)*txnIndexEntrySize); err != nil {
		return err
	}
	s.txnUnsynced.Store(true)
	return nil
}

// rewriteTxnIndex replaces s's index file with its entries, atomically and
// durably, and drops the descriptor appends used (it names the old file):
// the next append opens the new one.
func (l *Log) rewriteTxnIndex(s *segment) error {
	l.mu.RLock()
	entries := s.aborted
	l.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var closeErr error
	if s.txnFile != nil {
		closeErr = s.txnFile.Close()
		s.txnFile = nil
	}
	if s.deleted.Load() {
		return closeErr
	}
	if err := writeTxnIndex(s.dir, s.baseOffset, entries); err != nil {
		return err
	}
	s.txnUnsynced.Store(false)
	return nil
}

// syncTxnIndex fsyncs the entries appended to s's index since its last
// fsync. When the fsync fails it rewrites the index whole from memory: a
// failed fsync may have dropped the pages it was to write, and a later one
// would not report it.
func (l *Log) syncTxnIndex(s *segment) error {
	if !s.txnUnsynced.Swap(false) {
		return nil
	}
	s.mu.Lock()
	f := s.txnFile
	s.mu.Unlock()
	if f == nil {
		return nil // rewritten meanwhile, durably
	}
	if err := f.Sync(); err != nil {
		l.logger.Warn("fsync of a transaction index failed; rewriting it", "segment", s.baseOffset, "err", err)
		if err := l.rewriteTxnIndex(s); err != nil {
			s.txnUnsynced.Store(true)
			return err
		}
	}
	return nil
}

// syncTxnIndexes fsyncs every transaction index with entries appended
// since its last fsync. A producer state snapshot is written only after
// it (see the file comment).
func (l *Log) syncTxnIndexes() error {
	l.mu.RLock()
	var pending []*segment
	for _, s := range l.segments {
		if s.txnUnsynced.Load() {
			s.acquire() // a concurrent retention must not close it under us
			pending = append(pending, s)
		}
	}
	l.mu.RUnlock()
	var errs []error
	for _, s := range pending {
		errs = append(errs, l.syncTxnIndex(s))
		if err := s.release(); err != nil {
			l.logger.Warn("releasing a segment after fsync", "segment", s.baseOffset, "err", err)
		}
	}
	return errors.Join(errs...)
}

// truncateTxnIndexLocked drops s's entries whose marker is at or after
// end. The caller holds appendMu.
func (l *Log) truncateTxnIndexLocked(s *segment, end int64) error {
	l.mu.Lock()
	kept := slices.DeleteFunc(slices.Clone(s.aborted), func(a AbortedTxn) bool { return a.LastOffset >= end })
	changed := len(kept) != len(s.aborted)
	s.aborted = kept
	l.mu.Unlock()
	if !changed {
		return nil
	}
	return l.rewriteTxnIndex(s)
}

// abortedIn returns the aborted transactions the segments of run list.
func (l *Log) abortedIn(run []*segment) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []AbortedTxn
	for _, s := range run {
		out = append(out, s.aborted...)
	}
	return out
}

// writeTxnIndexes writes each new segment's transaction index under its
// .cleaned name: the carried entries whose marker it holds, empty when
// there are none (see the replacement protocol in replace.go). An entry
// whose marker the replacement left out goes, as in Kafka's cleaner: a
// read_committed consumer told of an abort it never reaches the marker of
// would drop every later batch of the producer.
func (w *SegmentWriter) writeTxnIndexes() error {
	for i, s := range w.segments {
		var mine []AbortedTxn
		for _, a := range w.aborted {
			if w.markers[a.LastOffset] && a.LastOffset >= s.baseOffset && (i == len(w.segments)-1 || a.LastOffset < w.segments[i+1].baseOffset) {
				mine = append(mine, a)
			}
		}
		s.aborted = mine // not yet in the log's list: no reader sees it
		if err := durable.WriteFile(segmentPath(s.dir, s.baseOffset, txnIndexSuffix)+cleanedSuffix, encodeTxnIndex(mine)); err != nil {
			return fmt.Errorf("log: writing the transaction index of replacement segment %d: %w", s.baseOffset, err)
		}
	}
	return nil
}

// removeEmptyTxnIndexes removes the empty transaction indexes a completed
// replacement left (a segment without aborted transactions has none).
func removeEmptyTxnIndexes(dir string, segments []*segment) error {
	var errs []error
	for _, s := range segments {
		if len(s.aborted) == 0 {
			errs = append(errs, removeIfExists(segmentPath(dir, s.baseOffset, txnIndexSuffix)))
		}
	}
	return errors.Join(errs...)
}
