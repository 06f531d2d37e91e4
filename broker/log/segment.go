package log

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"millrace/internal/recordbatch"
)

// segment is one <base>.log file with its two indexes.
//
// Locking: the fields under "appender state" are written only by the log's
// appender (Log.appendMu held) and, where readers look at them, also under
// Log.mu; readers read them under Log.mu. The indexes are under segment.mu,
// taken after Log.mu when both are needed.
type segment struct {
	dir        string
	baseOffset int64
	openFile   openFileFunc
	log        file // the .log file; its descriptor may be closed between uses (filecache.go)

	// appender state
	size            int64        // bytes of valid batches
	nextOffset      int64        // offset after the last batch; baseOffset if empty
	maxTimestamp    int64        // largest batch timestamp, -1 if none
	offsetOfMaxTs   int64        // base offset of the batch that first reached maxTimestamp
	firstAppend     time.Time    // when the first batch was appended (or the log opened); for segment.ms
	bytesSinceIndex int          // log bytes since the last offset index entry
	dirty           bool         // written since the last fsync
	aborted         []AbortedTxn // its transaction index (txn_index.go); guarded by Log.mu; appended to, otherwise replaced: an entry never changes in place

	mu             sync.Mutex // guards the following
	loaded         bool       // index and times hold the files' contents
	index          []offsetEntry
	times          []timeEntry
	indexPersisted int  // entries of index already written to the .index file
	timesPersisted int  // entries of times already written to the .timeindex file
	indexFile      file // opened on first use
	timeFile       file // opened on first use
	txnFile        file // the .txnindex, opened by the first entry appended after Open (txn_index.go)

	// txnUnsynced is set when an entry was appended to txnFile since its
	// last fsync: flushLocked fsyncs the segment for it even when no batch
	// was appended since (the entry follows its marker's append).
	txnUnsynced atomic.Bool

	refs    atomic.Int32 // the log's reference plus one per open Slice
	deleted atomic.Bool  // files renamed *.deleted; unlink when refs reach zero
}

// newSegment creates or opens the files of the segment at base. The indexes
// are not loaded.
func newSegment(dir string, base int64, openFile openFileFunc) (*segment, error) {
	f, err := openFile(segmentPath(dir, base, logSuffix), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	s := &segment{dir: dir, baseOffset: base, openFile: openFile, log: f, nextOffset: base, maxTimestamp: -1, offsetOfMaxTs: base}
	s.refs.Store(1)
	return s, nil
}

// newLazySegment is a segment at base whose .log file, known to exist, is
// opened through files on first use rather than now: at start-up the old
// segments of thousands of partitions cost no descriptor until read.
func newLazySegment(dir string, base int64, openFile openFileFunc, files *fileCache, rawOpen openFileFunc) *segment {
	f := files.lazy(rawOpen, segmentPath(dir, base, logSuffix), os.O_RDWR)
	s := &segment{dir: dir, baseOffset: base, openFile: openFile, log: f, nextOffset: base, maxTimestamp: -1, offsetOfMaxTs: base}
	s.refs.Store(1)
	return s
}

// newEmptySegment creates a segment at base with empty files (replacing any
// stale ones) and loaded, empty indexes.
func newEmptySegment(dir string, base int64, openFile openFileFunc) (*segment, error) {
	s, err := newSegment(dir, base, openFile)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err = s.openIndexFilesLocked()
	if err == nil {
		err = errors.Join(truncateIfNotEmpty(s.log), truncateIfNotEmpty(s.indexFile), truncateIfNotEmpty(s.timeFile))
	}
	if err != nil {
		s.mu.Unlock()
		s.release()
		s.mu.Lock()
		return nil, err
	}
	s.loaded = true
	return s, nil
}

// truncateIfNotEmpty empties a stale file. A file that is already empty,
// as a new segment's are, is left alone: ext4 (auto_da_alloc) starts
// writeback, when it is closed, of any file that was truncated to zero, so
// truncating new segments would make closing or deleting a log write out
// its active segment's data only to throw it away.
func truncateIfNotEmpty(f file) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	return f.Truncate(0)
}

// acquire adds a reference; the caller must already know the segment is
// live (found in the log's list under Log.mu).
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference; the last one closes the files and, if the
// segment was deleted, unlinks them.
func (s *segment) release() error {
	if s.refs.Add(-1) != 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := []error{s.log.Close()}
	if s.indexFile != nil {
		errs = append(errs, s.indexFile.Close())
	}
	if s.timeFile != nil {
		errs = append(errs, s.timeFile.Close())
	}
	if s.txnFile != nil {
		errs = append(errs, s.txnFile.Close())
	}
	if s.deleted.Load() {
		for _, suffix := range segmentSuffixes {
			if err := os.Remove(segmentPath(s.dir, s.baseOffset, suffix) + deletedSuffix); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// markDeleted renames the segment's files to *.deleted so a restart does not
// bring them back; they are unlinked when the last reference goes.
func (s *segment) markDeleted() error {
	if s.deleted.Swap(true) {
		return nil
	}
	var errs []error
	for _, suffix := range segmentSuffixes {
		p := segmentPath(s.dir, s.baseOffset, suffix)
		// A file the descriptor cache closed is reopened by its new name.
		s.mu.Lock()
		f := s.fileLocked(suffix)
		s.mu.Unlock()
		if err := renameFile(f, p, p+deletedSuffix); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fileLocked returns s's file with suffix, nil if it is not open. The
// caller holds s.mu.
func (s *segment) fileLocked(suffix string) file {
	switch suffix {
	case logSuffix:
		return s.log
	case indexSuffix:
		return s.indexFile
	case timeIndexSuffix:
		return s.timeFile
	case txnIndexSuffix:
		return s.txnFile
	}
	return nil
}

// openIndexFilesLocked opens the index files if they are not open yet.
func (s *segment) openIndexFilesLocked() error {
	var err error
	if s.indexFile == nil {
		if s.indexFile, err = s.openFile(segmentPath(s.dir, s.baseOffset, indexSuffix), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			return err
		}
	}
	if s.timeFile == nil {
		if s.timeFile, err = s.openFile(segmentPath(s.dir, s.baseOffset, timeIndexSuffix), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loadIndexesLocked reads both index files and sanity-checks them against
// a log of the given size. ok is false if either is damaged.
func (s *segment) loadIndexesLocked(size int64) (ok bool, err error) {
	if err := s.openIndexFilesLocked(); err != nil {
		return false, err
	}
	ib, err := readWhole(s.indexFile)
	if err != nil {
		return false, err
	}
	tb, err := readWhole(s.timeFile)
	if err != nil {
		return false, err
	}
	index, iok := decodeOffsetEntries(ib, size)
	times, tok := decodeTimeEntries(tb)
	if !iok || !tok {
		return false, nil
	}
	s.index, s.times = index, times
	s.indexPersisted, s.timesPersisted = len(index), len(times)
	s.loaded = true
	return true, nil
}

func readWhole(f file) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err == io.EOF && n == len(b) {
		err = nil
	}
	return b[:n], err
}

// ensureLoadedLocked loads the indexes of a segment opened lazily,
// rebuilding them from the log if the files are damaged. size is the
// segment's log size.
func (s *segment) ensureLoadedLocked(size int64, interval int) error {
	if s.loaded {
		return nil
	}
	if s.deleted.Load() {
		// Files renamed away under a reader: index in memory only.
		s.loaded = true
		_, err := s.scanLocked(0, size, interval, false)
		return err
	}
	ok, err := s.loadIndexesLocked(size)
	if err != nil || ok {
		return err
	}
	_, err = s.rebuildLocked(size, interval, false)
	return err
}

// rebuildLocked discards the indexes and rebuilds them by scanning the log
// from the start up to size, validating CRCs if asked. It returns the end
// of the last good batch and updates the segment's appender state.
func (s *segment) rebuildLocked(size int64, interval int, validate bool) (int64, error) {
	s.index, s.times = s.index[:0], s.times[:0]
	s.indexPersisted, s.timesPersisted = 0, 0
	s.size, s.nextOffset, s.maxTimestamp, s.offsetOfMaxTs, s.bytesSinceIndex = 0, s.baseOffset, -1, s.baseOffset, 0
	s.loaded = true
	end, err := s.scanLocked(0, size, interval, validate)
	if err != nil {
		return 0, err
	}
	if err := s.openIndexFilesLocked(); err != nil {
		return 0, err
	}
	if err := s.indexFile.Truncate(0); err != nil {
		return 0, err
	}
	if err := s.timeFile.Truncate(0); err != nil {
		return 0, err
	}
	return end, s.persistIndexesLocked()
}

// noteBatchLocked records a batch of size bytes at pos in the appender state
// and the indexes: an offset index entry once more than interval bytes were
// written since the last one, with a time index entry beside it if the
// largest timestamp grew. Caller holds s.mu (and Log.mu for a live segment).
func (s *segment) noteBatchLocked(base, next, pos int64, size int, maxTimestamp int64, interval int) {
	if maxTimestamp > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTs = maxTimestamp, base
	}
	if s.bytesSinceIndex > interval {
		s.index = append(s.index, offsetEntry{rel: uint32(base - s.baseOffset), pos: uint32(pos)})
		s.appendTimeEntryLocked()
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += size
	s.size = pos + int64(size)
	s.nextOffset = next
	s.dirty = true
}

// appendTimeEntryLocked adds (maxTimestamp, offsetOfMaxTs) to the time index
// if the largest timestamp grew since the last entry.
func (s *segment) appendTimeEntryLocked() {
	if s.maxTimestamp < 0 || (len(s.times) > 0 && s.maxTimestamp <= s.times[len(s.times)-1].timestamp) {
		return
	}
	s.times = append(s.times, timeEntry{timestamp: s.maxTimestamp, rel: uint32(s.offsetOfMaxTs - s.baseOffset)})
}

// persistIndexesLocked writes index entries not yet in the files. Entries
// are buffered in memory between flushes so an append costs no extra
// syscall; after a crash the indexes above the recovery point are rebuilt.
func (s *segment) persistIndexesLocked() error {
	if !s.loaded || s.deleted.Load() {
		return nil
	}
	if err := s.openIndexFilesLocked(); err != nil {
		return err
	}
	if s.indexPersisted < len(s.index) {
		b := encodeOffsetEntries(s.index[s.indexPersisted:])
		if _, err := s.indexFile.WriteAt(b, int64(s.indexPersisted)*offsetIndexEntrySize); err != nil {
			return err
		}
		s.indexPersisted = len(s.index)
	}
	if s.timesPersisted < len(s.times) {
		b := encodeTimeEntries(s.times[s.timesPersisted:])
		if _, err := s.timeFile.WriteAt(b, int64(s.timesPersisted)*timeIndexEntrySize); err != nil {
			return err
		}
		s.timesPersisted = len(s.times)
	}
	return nil
}

// truncateIndexesLocked drops index entries at or above rel.
func (s *segment) truncateIndexesLocked(rel uint32) error {
	i := 0
	for i < len(s.index) && s.index[i].rel < rel {
		i++
	}
	j := 0
	for j < len(s.times) && s.times[j].rel < rel {
		j++
	}
	s.index, s.times = s.index[:i], s.times[:j]
	if s.indexPersisted > i {
		s.indexPersisted = i
		if err := s.indexFile.Truncate(int64(i) * offsetIndexEntrySize); err != nil {
			return err
		}
	}
	if s.timesPersisted > j {
		s.timesPersisted = j
		if err := s.timeFile.Truncate(int64(j) * timeIndexEntrySize); err != nil {
			return err
		}
	}
	return nil
}

// resumeLocked rebuilds the appender state of a loaded segment whose indexes
// are trusted, by scanning batch headers from the last offset index entry to
// size. This is how a cleanly closed active segment is opened without
// reading the whole log.
func (s *segment) resumeLocked(size int64, interval int) error {
	s.size, s.nextOffset, s.maxTimestamp, s.offsetOfMaxTs, s.bytesSinceIndex = 0, s.baseOffset, -1, s.baseOffset, 0
	from := int64(0)
	if n := len(s.index); n > 0 {
		from = int64(s.index[n-1].pos)
		s.size = from
		s.nextOffset = s.baseOffset + int64(s.index[n-1].rel)
		// Skip re-adding the entry of the batch at from (bytesSinceIndex 0).
	}
	if n := len(s.times); n > 0 {
		s.maxTimestamp = s.times[n-1].timestamp
		s.offsetOfMaxTs = s.baseOffset + int64(s.times[n-1].rel)
	}
	end, err := s.scanLocked(from, size, interval, false)
	if err != nil {
		return err
	}
	if end != size {
		return fmt.Errorf("log: segment %d: batch headers end at %d, file is %d bytes", s.baseOffset, end, size)
	}
	return nil
}

// scanLocked reads batches from pos to end, calling noteBatchLocked for each,
// and returns the position after the last good batch. With validate it
// checks each batch's CRC (streaming, so a garbage length never causes a big
// allocation), and stops at the first torn, corrupt or out-of-sequence batch.
func (s *segment) scanLocked(pos, end int64, interval int, validate bool) (int64, error) {
	var hdr [batchHeaderSize]byte
	var br *bufio.Reader
	if validate {
		br = bufio.NewReaderSize(io.NewSectionReader(s.log, pos, end-pos), 64<<10)
	}
	for end-pos >= batchHeaderSize {
		var err error
		if validate {
			_, err = io.ReadFull(br, hdr[:])
		} else {
			_, err = s.log.ReadAt(hdr[:], pos)
		}
		if err != nil {
			return pos, err
		}
		h := recordbatch.HeaderAt(hdr[:])
		size := int64(h.Size())
		// Offsets must increase but may leave gaps: a replaced segment
		// (replace.go) keeps the offsets of the batches it kept.
		if h.Magic != batchMagic || h.Length < batchHeaderSize-batchLengthOverhead || size > end-pos ||
			h.LastOffsetDelta < 0 || h.Records < 1 || int64(h.Records) > int64(h.LastOffsetDelta)+1 ||
			h.BaseOffset < s.nextOffset ||
			h.LastOffset()-s.baseOffset > maxRelativeOffset {
			return pos, nil
		}
		if validate {
			crc := crc32.Update(0, castagnoli, hdr[offAttributes:])
			for remaining := size - batchHeaderSize; remaining > 0; {
				chunk, err := br.Peek(int(min(remaining, int64(br.Size()))))
				if err != nil {
					return pos, err
				}
				crc = crc32.Update(crc, castagnoli, chunk)
				if _, err := br.Discard(len(chunk)); err != nil {
					return pos, err
				}
				remaining -= int64(len(chunk))
			}
			if crc != h.CRC {
				return pos, nil
			}
		}
		s.noteBatchLocked(h.BaseOffset, h.NextOffset(), pos, int(size), h.MaxTimestamp, interval)
		pos += size
	}
	return pos, nil
}

// maxRelativeOffset is the largest offset distance from a segment's base
// the 32-bit index entries can express.
const maxRelativeOffset = 1<<32 - 1
