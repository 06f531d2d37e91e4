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
// in memory (segment.aborted) and the file is rewritten whole, atomically,
// whenever they change: aborts are rare, and a whole rewrite cannot leave a
// torn entry. An entry is added when an abort marker is appended, as leader
// or follower, and when the producer state is rebuilt from the log (which
// re-applies every marker after its snapshot, so an index that missed a
// marker in a crash gets it back); it goes with its segment (truncation,
// retention, replacement), and entries past the log end are dropped at
// Open.

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

// decodeTxnIndex parses a transaction index file.
func decodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	if len(b)%txnIndexEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of entries", errBadTxnIndex, len(b))
	}
	be := binary.BigEndian
	out := make([]AbortedTxn, 0, len(b)/txnIndexEntrySize)
	for ; len(b) > 0; b = b[txnIndexEntrySize:] {
		if v := be.Uint16(b); v != txnIndexVersion {
			return nil, fmt.Errorf("%w: entry version %d", errBadTxnIndex, v)
		}
		a := AbortedTxn{
			ProducerID:       int64(be.Uint64(b[2:])),
			FirstOffset:      int64(be.Uint64(b[10:])),
			LastOffset:       int64(be.Uint64(b[18:])),
			LastStableOffset: int64(be.Uint64(b[26:])),
		}
		if a.FirstOffset < 0 || a.LastOffset < a.FirstOffset {
			return nil, fmt.Errorf("%w: transaction [%d, %d]", errBadTxnIndex, a.FirstOffset, a.LastOffset)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastOffset < out[j].LastOffset })
	return out, nil
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
// bases whose .txnindex file exists), dropping entries at or past the log
// end (the log lost the markers' tail in a crash) and removing an empty
// one (left by an interrupted replacement). A damaged index is
// dropped: rebuilding the producer state from the log restores the entries
// after its snapshot. Called by load once the segments are open.
func (l *Log) loadTxnIndexes(has map[int64]bool) error {
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
			l.logger.Warn("dropping a damaged transaction index", "segment", s.baseOffset, "err", err)
			entries = nil
		}
		kept := slices.DeleteFunc(slices.Clone(entries), func(a AbortedTxn) bool { return a.LastOffset >= l.endOffset || a.LastOffset < s.baseOffset })
		if len(kept) != len(entries) || err != nil || len(kept) == 0 {
			if err := writeTxnIndex(l.dir, s.baseOffset, kept); err != nil {
				return err
			}
		}
		s.aborted = kept
	}
	return nil
}

// addAbortedLocked records an aborted transaction in the index of the
// segment holding its marker; an entry for the same marker is kept as it
// is (a rebuild re-applies markers already indexed). The caller holds the
// producer lock; the segment list is read and changed under l.mu.
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
	s.aborted = slices.Insert(slices.Clone(s.aborted), at, a)
	entries, base := s.aborted, s.baseOffset
	l.mu.Unlock()
	return writeTxnIndex(l.dir, base, entries)
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
	return writeTxnIndex(l.dir, s.baseOffset, kept)
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
