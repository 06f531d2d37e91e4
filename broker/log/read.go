package log

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"

	"millrace/internal/recordbatch"
)

// readHeaderSize is how much of a batch header Read needs: baseOffset,
// length, leader epoch, magic, CRC, attributes and lastOffsetDelta.
const readHeaderSize = offFirstTimestamp

// Read returns whole batches starting with the one containing offset, up to
// maxBytes (the first batch is returned whole even if it is larger, so a
// consumer always progresses) and only batches whose last offset is below
// maxOffset (the high watermark; pass EndOffset() for no limit). A read
// never spans two segments. At offset == EndOffset() the Slice is empty;
// outside [StartOffset(), EndOffset()] the error is ErrOffsetOutOfRange.
// The caller must Close the Slice.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (*Slice, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	if offset < l.startOffset || offset > l.endOffset {
		start, end := l.startOffset, l.endOffset
		l.mu.RUnlock()
		return nil, fmt.Errorf("%w: %d is outside [%d, %d]", ErrOffsetOutOfRange, offset, start, end)
	}
	if offset == l.endOffset {
		l.mu.RUnlock()
		return &Slice{first: offset, next: offset}, nil
	}
	i := max(sort.Search(len(l.segments), func(i int) bool { return l.segments[i].baseOffset > offset })-1, 0)
	s, size, interval := l.segments[i], l.segments[i].size, l.cfg.IndexIntervalBytes
	s.acquire()
	l.mu.RUnlock()
	for {
		slice, found, err := s.read(offset, maxBytes, maxOffset, size, interval)
		if err != nil || !found {
			s.release()
		}
		if err != nil || found {
			if found && slice.n == 0 {
				s.release()
				slice.seg = nil
			}
			return slice, err
		}
		// offset lies past this segment's data (a gap left by truncation
		// from the start): continue with the next segment.
		l.mu.RLock()
		j := sort.Search(len(l.segments), func(j int) bool { return l.segments[j].baseOffset > s.baseOffset })
		if j == len(l.segments) || l.closed {
			l.mu.RUnlock()
			return &Slice{first: offset, next: offset}, nil
		}
		s, size = l.segments[j], l.segments[j].size
		offset = max(offset, s.baseOffset)
		s.acquire()
		l.mu.RUnlock()
	}
}

// read finds offset in the segment's first size bytes. found is false if
// the segment holds nothing at or after offset. A returned Slice carries the
// caller's reference.
//
// Batch headers are read through a headerWindow, so a run of small batches
// costs one pread; and the end of the read is first advanced through the
// offset index, whose entries mark batch boundaries, so only the headers
// after the last usable entry are read at all.
func (s *segment) read(offset int64, maxBytes int, maxOffset, size int64, interval int) (*Slice, bool, error) {
	s.mu.Lock()
	err := s.ensureLoadedLocked(size, interval)
	pos := lookupOffset(s.index, uint32(max(offset-s.baseOffset, 0)))
	s.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	w := newHeaderWindow(s)
	defer w.release()
	var first batchSpan
	for {
		b, err := w.spanAt(pos, size)
		if err != nil {
			return nil, false, err
		}
		if b.size == 0 {
			return nil, false, nil
		}
		if b.last >= offset {
			first = b
			break
		}
		pos += b.size
	}
	if first.last >= maxOffset {
		return &Slice{seg: s, first: offset, next: offset}, true, nil
	}
	total, next := first.size, first.last+1
	p := pos + total
	s.mu.Lock()
	if e, ok := lastEntryWithin(s.index, p, min(pos+int64(maxBytes), size), maxOffset-s.baseOffset); ok {
		// The batches between p and the entry's batch are whole, inside
		// the byte budget and the segment, and (offsets being dense) all
		// end below the entry's base offset, which is at most maxOffset.
		p, total, next = int64(e.pos), int64(e.pos)-pos, s.baseOffset+int64(e.rel)
	}
	s.mu.Unlock()
	for {
		b, err := w.spanAt(p, size)
		if err != nil {
			return nil, false, err
		}
		if b.size == 0 || b.last >= maxOffset || total+b.size > int64(maxBytes) {
			break
		}
		total += b.size
		next = b.last + 1
		p += b.size
	}
	return &Slice{seg: s, pos: pos, n: total, first: first.base, next: next}, true, nil
}

// lastEntryWithin returns the last offset index entry whose batch starts
// after from and at or before limit and whose relative base offset is at
// most maxRel.
func lastEntryWithin(entries []offsetEntry, from, limit, maxRel int64) (offsetEntry, bool) {
	i := sort.Search(len(entries), func(i int) bool {
		return int64(entries[i].pos) > limit || int64(entries[i].rel) > maxRel
	})
	if i == 0 || int64(entries[i-1].pos) <= from {
		return offsetEntry{}, false
	}
	return entries[i-1], true
}

// batchSpan is where one batch lies.
type batchSpan struct {
	base, last int64
	size       int64 // 0 at the end of the segment
}

// headerWindowSize is how much of the segment one header read takes: about
// one index interval, so the headers between two index entries usually come
// in a single pread.
const headerWindowSize = 4096

// headerWindows recycles window buffers between reads.
var headerWindows = sync.Pool{New: func() any { return new([headerWindowSize]byte) }}

// headerWindow reads batch headers of one segment through a buffer: a
// header inside the bytes last read costs no system call.
type headerWindow struct {
	s     *segment
	store *[headerWindowSize]byte
	buf   []byte // the bytes last read
	pos   int64  // their position in the segment
}

func newHeaderWindow(s *segment) *headerWindow {
	return &headerWindow{s: s, store: headerWindows.Get().(*[headerWindowSize]byte)}
}

// release returns the buffer; the window must not be used afterwards.
func (w *headerWindow) release() {
	headerWindows.Put(w.store)
	w.store, w.buf = nil, nil
}

// spanAt reads the batch header at pos, below limit.
func (w *headerWindow) spanAt(pos, limit int64) (batchSpan, error) {
	if pos+batchHeaderSize > limit {
		return batchSpan{}, nil
	}
	if pos < w.pos || pos+readHeaderSize > w.pos+int64(len(w.buf)) {
		buf := w.store[:min(int64(headerWindowSize), limit-pos)]
		n, err := w.s.log.ReadAt(buf, pos)
		if n < readHeaderSize {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			w.buf = nil
			return batchSpan{}, fmt.Errorf("log: reading segment %d at %d: %w", w.s.baseOffset, pos, err)
		}
		w.buf, w.pos = buf[:n], pos
	}
	hdr := w.buf[pos-w.pos:]
	base := int64(binary.BigEndian.Uint64(hdr[offBaseOffset:]))
	size := int64(int32(binary.BigEndian.Uint32(hdr[offLength:]))) + batchLengthOverhead
	delta := int64(int32(binary.BigEndian.Uint32(hdr[offLastOffsetDelta:])))
	if size < batchHeaderSize || pos+size > limit || delta < 0 {
		return batchSpan{}, fmt.Errorf("%w: segment %d has a bad batch header at %d", ErrCorruptBatch, w.s.baseOffset, pos)
	}
	return batchSpan{base: base, last: base + delta, size: size}, nil
}

// OffsetForTimestamp finds the first record with a timestamp at or after ts
// (ListOffsets by time) and returns its offset and timestamp, or offset -1
// if there is none. For compressed CreateTime batches the answer is the
// batch's base offset and largest timestamp: records are not decompressed.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, err error) {
	var after int64 = -1 // base offset of the last segment searched
	for {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return -1, -1, ErrClosed
		}
		start, interval := l.startOffset, l.cfg.IndexIntervalBytes
		var s *segment
		var size int64
		for _, c := range l.segments {
			if c.baseOffset > after && c.maxTimestamp >= ts && c.nextOffset > start && c.size > 0 {
				s, size = c, c.size
				break
			}
		}
		if s == nil {
			l.mu.RUnlock()
			return -1, -1, nil
		}
		s.acquire()
		l.mu.RUnlock()
		offset, timestamp, err = s.offsetForTimestamp(ts, start, size, interval)
		s.release()
		if err != nil || offset >= 0 {
			return offset, timestamp, err
		}
		after = s.baseOffset
	}
}

func (s *segment) offsetForTimestamp(ts, start, size int64, interval int) (int64, int64, error) {
	s.mu.Lock()
	err := s.ensureLoadedLocked(size, interval)
	pos := lookupOffset(s.index, lookupTimeBefore(s.times, ts))
	s.mu.Unlock()
	if err != nil {
		return -1, -1, err
	}
	var hdr [batchHeaderSize]byte
	for pos+batchHeaderSize <= size {
		if _, err := s.log.ReadAt(hdr[:], pos); err != nil {
			return -1, -1, err
		}
		h := recordbatch.HeaderAt(hdr[:])
		if h.Size() < batchHeaderSize || pos+int64(h.Size()) > size {
			return -1, -1, fmt.Errorf("%w: segment %d has a bad batch header at %d", ErrCorruptBatch, s.baseOffset, pos)
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= start {
			if h.LogAppendTime() || h.Compression() != 0 {
				return max(h.BaseOffset, start), h.MaxTimestamp, nil
			}
			body := make([]byte, h.Size()-batchHeaderSize)
			if _, err := s.log.ReadAt(body, pos+batchHeaderSize); err != nil && err != io.EOF {
				return -1, -1, err
			}
			found, foundTs := int64(-1), int64(-1)
			recordbatch.RecordTimestamps(body, h.FirstTimestamp, func(delta, recordTs int64) bool {
				if off := h.BaseOffset + delta; off >= start && recordTs >= ts {
					found, foundTs = off, recordTs
					return false
				}
				return true
			})
			if found >= 0 {
				return found, foundTs, nil
			}
		}
		pos += int64(h.Size())
	}
	return -1, -1, nil
}
