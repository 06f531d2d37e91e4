package tail

import (
	"bytes"
	"os"
	"sync"
	"time"
)

// inflightLine is a shipped line waiting for the broker's answer.
type inflightLine struct {
	start int64 // offset of the line's first byte
	hour  int32 // audit hour of the line's ts (hourOf)
	done  bool  // acknowledged (or dropped as undeliverable)
	acked bool  // acknowledged: counted by the audit once before the checkpoint
}

// harvester follows one file identity. Fields above mu are owned by the
// tailer's loop goroutine; the acknowledgement state under mu is shared
// with the producer's callbacks.
type harvester struct {
	id        string   // persisted identity, fixed for the harvester's life; event ids derive from it
	idPrefix  [16]byte // eventIDPrefix(id)
	source    string   // path at discovery: the record's "source" and key
	sourceJS  []byte   // source as a JSON string
	key       []byte
	dev, ino  uint64   // written under mu (a drained copy changes them); the loop reads them freely
	file      *os.File // nil while closed (inactive, or evicted by max_open_files)
	readPos   int64    // offset of the next byte to read
	lastData  time.Time
	atEOF     bool
	gone      bool       // no longer found at any watched path (renamed away or deleted)
	drain     bool       // gone, but found outside the globs with bytes unread: read to EOF (finish.go)
	pred      *harvester // rotated-away file at the same path to finish first
	wantOpen  bool       // closed, and a scan saw it grow
	retired   bool       // replaced after a truncation; acks still drain here
	order     uint64     // creation order, for fair reading
	lineStart int64      // offset where the partial line began
	partial   []byte     // bytes of a line whose newline is not read yet
	partTrunc bool       // partial exceeded max_line_bytes; the rest is being dropped
	ml        *pendingEvent

	mu       sync.Mutex // guards the following
	path     string     // where the file was last seen
	seen     time.Time  // when a scan last found it
	fpLen    int
	fpHash   string
	size     int64          // last known file size, for the lag metric
	inflight []inflightLine // in offset order; inflight[head] is the oldest unacknowledged
	head     int            // settled lines before it, kept to reuse their room
	seqBase  uint64         // sequence number of inflight[head]
	nextSeq  uint64
	emitted  int64       // end offset of the last line handed to the producer
	counts   []hourCount // acknowledged lines now before the checkpoint, not yet in the ledger (audit.go)
}

// pendingEvent is a multiline event still collecting continuation lines.
type pendingEvent struct {
	start     int64
	buf       []byte
	lines     int
	truncated bool
	end       int64     // offset after its last line
	at        time.Time // when its last line arrived
}

// checkpoint is the offset the registry may store: the start of the oldest
// unacknowledged line, or, with nothing in flight, the end of the last line
// shipped (lines read but still pending in a multiline event stay after it).
func (h *harvester) checkpoint() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.checkpointLocked()
}

func (h *harvester) checkpointLocked() int64 {
	if h.head < len(h.inflight) {
		return h.inflight[h.head].start
	}
	return h.emitted
}

// keepInflight is the largest in-flight array kept for reuse once every
// line is settled (16 bytes a line).
const keepInflight = 1 << 16

// track records a line of audit hour hour about to be shipped and returns
// its sequence number.
func (h *harvester) track(start, end int64, hour int32) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq := h.nextSeq
	h.nextSeq++
	if live := len(h.inflight) - h.head; len(h.inflight) == cap(h.inflight) && h.head > 0 && h.head >= live {
		// Reuse the settled front instead of growing: slicing it off
		// made append reallocate the whole window every few thousand
		// lines. Moving the live lines costs no more than the settled
		// ones that made the room.
		n := copy(h.inflight, h.inflight[h.head:])
		h.inflight, h.head = h.inflight[:n], 0
	}
	h.inflight = append(h.inflight, inflightLine{start: start, hour: hour})
	h.emitted = end
	return seq
}

// settle marks line seq delivered and drops every settled line from the
// front. Acknowledgements arrive out of order (different partitions, resent
// lines), so only the front decides the checkpoint.
func (h *harvester) settle(seq uint64) { h.settleAs(seq, true) }

// skip settles line seq without delivering it (the broker refused it for
// good): the checkpoint moves past it, the audit does not count it.
func (h *harvester) skip(seq uint64) { h.settleAs(seq, false) }

func (h *harvester) settleAs(seq uint64, acked bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := int(seq - h.seqBase)
	if seq < h.seqBase || i >= len(h.inflight)-h.head {
		return
	}
	h.inflight[h.head+i].done = true
	h.inflight[h.head+i].acked = acked
	n := 0
	for h.head+n < len(h.inflight) && h.inflight[h.head+n].done {
		if l := &h.inflight[h.head+n]; l.acked {
			h.countLocked(l.hour)
		}
		n++
	}
	if n > 0 {
		h.head += n
		h.seqBase += uint64(n)
		if h.head == len(h.inflight) {
			h.inflight, h.head = h.inflight[:0], 0
			if cap(h.inflight) > keepInflight {
				h.inflight = nil // let a large backing array go
			}
		}
	}
}

func (h *harvester) inflightCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.inflight) - h.head
}

// split cuts read bytes into lines, honouring max_line_bytes. It calls
// emit for each complete line with its start and end (after the newline).
func (h *harvester) split(data []byte, chunkStart int64, maxLine int, emit func(line []byte, start, end int64, truncated bool)) {
	pos := 0
	for pos < len(data) {
		i := bytes.IndexByte(data[pos:], '\n')
		if i < 0 {
			h.appendPartial(data[pos:], chunkStart+int64(pos), maxLine)
			return
		}
		seg := data[pos : pos+i]
		start := chunkStart + int64(pos)
		truncated := false
		line := seg
		if len(h.partial) > 0 || h.partTrunc {
			start = h.lineStart
			truncated = h.partTrunc
			room := maxLine - len(h.partial)
			if len(seg) > room {
				seg, truncated = seg[:room], true
			}
			h.partial = append(h.partial, seg...)
			line = h.partial
		} else if len(line) > maxLine {
			line, truncated = line[:maxLine], true
		}
		if n := len(line); n > 0 && line[n-1] == '\r' && !truncated {
			line = line[:n-1]
		}
		end := chunkStart + int64(pos+i+1)
		emit(line, start, end, truncated)
		h.partial, h.partTrunc = h.partial[:0], false
		if cap(h.partial) > 64<<10 {
			h.partial = nil // one long line must not pin a large buffer
		}
		pos += i + 1
	}
}

func (h *harvester) appendPartial(b []byte, at int64, maxLine int) {
	if len(h.partial) == 0 && !h.partTrunc {
		h.lineStart = at
	}
	room := maxLine - len(h.partial)
	if len(b) > room {
		b, h.partTrunc = b[:room], true
	}
	h.partial = append(h.partial, b...)
}

// resetLine forgets a partial line and any pending multiline event, used
// when the file is truncated under us.
func (h *harvester) resetLine() {
	h.partial, h.partTrunc, h.ml = nil, false, nil
}
