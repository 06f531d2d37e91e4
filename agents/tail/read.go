package tail

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// readQuota bounds how much one file is read per pass, so one busy file
// cannot starve the others.
const readQuota = 1 << 20

// retryBackoff spaces out sending a failed record again.
const retryBackoff = time.Second

// readPass reads every open file that may have data and reports whether
// anything was read.
func (t *Tailer) readPass() bool {
	progressed := false
	for _, h := range append([]*harvester(nil), t.files...) {
		if t.stopping() {
			return progressed
		}
		if h.pred != nil {
			// Finish the rotated-away file first so a path's lines stay in
			// order; a closed or drained predecessor no longer holds us.
			if p := h.pred; !p.retired && (p.file != nil && !p.atEOF || p.drain && p.wantOpen) {
				continue
			}
			h.pred = nil
		}
		if h.file == nil {
			if !h.wantOpen || h.gone && !h.drain {
				continue
			}
			if !t.openHarvester(h) {
				continue
			}
		}
		if t.readFile(h) {
			progressed = true
		}
	}
	return progressed
}

// readFile reads h from its position until EOF or the quota.
func (t *Tailer) readFile(h *harvester) bool {
	read := 0
	for read < readQuota && !t.stopping() {
		n, err := h.file.Read(t.buf)
		if n > 0 {
			// Check the file is still the one h follows before using the
			// bytes: after a truncation that the writer already refilled
			// past readPos (easy while reading was paused for the broker)
			// the size alone cannot tell.
			if !t.verifyFingerprint(h) {
				return true
			}
			now := time.Now()
			lines := 0 // counted once per chunk: the metric is shared with scrapes
			h.split(t.buf[:n], h.readPos, t.cfg.MaxLineBytes, func(line []byte, start, end int64, truncated bool) {
				lines++
				t.onLine(h, line, start, end, truncated, now)
			})
			t.metrics.lines.Add(float64(lines))
			h.readPos += int64(n)
			read += n
			h.lastData = now
			h.atEOF = false
			t.metrics.bytes.Add(float64(n))
		}
		if errors.Is(err, io.EOF) || (n == 0 && err == nil) {
			h.atEOF = true
			t.checkTruncated(h)
			break
		}
		if err != nil {
			t.logger.Warn("reading file; closing it", "path", h.currentPath(), "err", err)
			t.closeFile(h)
			break
		}
	}
	return read > 0
}

// checkTruncated detects copytruncate: the file is now shorter than what
// we read, so its content was replaced and reading restarts at 0.
func (t *Tailer) checkTruncated(h *harvester) {
	fi, err := h.file.Stat()
	if err != nil {
		return
	}
	h.mu.Lock()
	h.size = fi.Size()
	h.mu.Unlock()
	if fi.Size() < h.readPos && h.drain {
		t.logger.Warn("file truncated before it was finished; its unread rest is lost", "path", h.currentPath(), "offset", h.readPos)
		t.closeFile(h)
		h.wantOpen = false
		return
	}
	if fi.Size() < h.readPos {
		t.logger.Info("file truncated; reading it again from the start", "path", h.currentPath(), "size", fi.Size(), "offset", h.readPos)
		t.metrics.rotations.WithLabelValues("truncate").Inc()
		t.replace(h)
	}
}

// verifyFingerprint reports whether h's file still starts with the bytes
// h's fingerprint hashed, and extends the fingerprint to more of the
// file's first bytes while it is shorter than fingerprint_bytes. On a
// mismatch (content replaced under the same inode) h is replaced and it
// reports false. One pread per chunk read: cheap beside the chunk.
func (t *Tailer) verifyFingerprint(h *harvester) bool {
	if h.fpLen == t.cfg.FingerprintBytes && h.fpLen > 0 {
		ok, err := t.prefixMatches(h.file, h.fpLen, h.fpHash)
		if err != nil || ok {
			return true // a failed pread proves nothing; the read did work
		}
	} else {
		got, err := h.file.ReadAt(t.fpBuf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return true
		}
		if h.fpLen > 0 && (got < h.fpLen || hashHex(t.fpBuf[:h.fpLen]) != h.fpHash) {
			goto replaced
		}
		if got > h.fpLen {
			fp := hashHex(t.fpBuf[:got])
			h.mu.Lock()
			h.fpLen, h.fpHash = got, fp
			h.mu.Unlock()
		}
		return true
	}
replaced:
	t.logger.Info("file content replaced; reading it again from the start", "path", h.currentPath(), "offset", h.readPos)
	t.metrics.rotations.WithLabelValues("replaced").Inc()
	if h.drain {
		t.logger.Warn("file changed before it was finished; its unread rest is lost", "path", h.currentPath(), "offset", h.readPos)
		t.closeFile(h)
		h.wantOpen = false
		return false
	}
	t.replace(h)
	return false
}

// prefixMatches reports whether f's first n bytes hash to want.
func (t *Tailer) prefixMatches(f *os.File, n int, want string) (bool, error) {
	got, err := f.ReadAt(t.fpBuf[:n], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if got < n {
		return false, nil
	}
	var sum [32]byte
	hashInto(&sum, t.fpBuf[:n])
	return string(sum[:]) == want, nil
}

// onLine handles one complete line, joining multiline events when set.
func (t *Tailer) onLine(h *harvester, line []byte, start, end int64, truncated bool, now time.Time) {
	if t.multiline == nil {
		t.ship(h, lineEvent{offset: start, line: line, truncated: truncated}, end, now)
		return
	}
	if p := h.ml; p != nil && !t.multiline.Match(line) {
		p.lines++
		p.end, p.at = end, now
		if truncated {
			p.truncated = true
		}
		if p.lines > t.cfg.Multiline.MaxLines {
			p.truncated = true
			return
		}
		room := t.cfg.MaxLineBytes - len(p.buf) - 1
		if room < len(line) {
			p.truncated = true
			if room < 0 {
				return
			}
			line = line[:room]
		}
		p.buf = append(append(p.buf, '\n'), line...)
		return
	}
	t.flushPending(h, now)
	h.ml = &pendingEvent{start: start, buf: append([]byte(nil), line...), lines: 1, truncated: truncated, end: end, at: now}
}

// flushPending ships h's pending multiline event, if any.
func (t *Tailer) flushPending(h *harvester, now time.Time) {
	p := h.ml
	if p == nil {
		return
	}
	h.ml = nil
	t.ship(h, lineEvent{offset: p.start, line: p.buf, truncated: p.truncated}, p.end, now)
}

// lineRecord is one shipped line: the record, its header, its value and
// what its acknowledgement settles. Reused once acknowledged (reuse.go).
type lineRecord struct {
	rec    kgo.Record
	header [1]kgo.RecordHeader
	chunk  *valueChunk // holds rec.Value, or nil
	t      *Tailer
	h      *harvester
	seq    uint64
	ack    ship.Promise // lr.settled wrapped by the producer, made once per lineRecord
}

// eventIDAt is where the event id sits in an encoded value: right after
// `{"event_id":"`. The header shares those bytes instead of a copy.
const eventIDAt = len(`{"event_id":"`)

// ship encodes one event and hands it to the producer; it may block while
// the producer's buffer is full, which pauses all reading.
func (t *Tailer) ship(h *harvester, ev lineEvent, end int64, now time.Time) {
	t.idBuf = eventID(t.idBuf[:0], &h.idPrefix, ev.offset)
	// The event's ts, which the sink buckets by and the audit counts by:
	// the read time, or the time the line names (timestamp.go).
	ts := now
	if t.timestamp != nil {
		if parsed, ok := t.timestamp.parse(ev.line, now); ok {
			ts = parsed
		} else {
			t.metrics.unparsed.Inc()
		}
	}
	var invalid bool
	t.valueBuf, invalid = t.enc.encode(t.valueBuf[:0], t.idBuf, h.sourceJS, ts, ev)
	if invalid {
		t.metrics.invalid.Inc()
	}
	if ev.truncated {
		t.metrics.truncated.Inc()
	}
	// Encoded in scratch, then copied into value space that lives until
	// the broker answers.
	lr := t.newLine()
	var value []byte
	value, lr.chunk = t.valueSpace(len(t.valueBuf))
	copy(value, t.valueBuf)
	if cap(t.valueBuf) > maxChunkedValue {
		t.valueBuf = nil // one long line must not pin a large buffer
	}
	lr.h = h
	lr.header[0] = kgo.RecordHeader{Key: "event_id", Value: value[eventIDAt : eventIDAt+len(t.idBuf) : eventIDAt+len(t.idBuf)]}
	// The read time, already taken once per chunk, is the record's
	// timestamp (left zero, kgo would read the clock again for every
	// record), also when ts was parsed: the broker's timestamp bounds and
	// time retention judge when the line arrived (see Timestamp). The
	// audit counts the line in the hour of its ts, where the sink lands it.
	lr.rec = kgo.Record{Topic: t.cfg.Topic, Key: h.key, Value: value, Headers: lr.header[:], Timestamp: now}
	lr.seq = h.track(ev.offset, end, hourOf(ts))
	t.producer.ProduceWrapped(t.runCtx, &lr.rec, lr.ack)
}

// settled settles the line when the broker answers.
func (lr *lineRecord) settled(_ *kgo.Record, err error) {
	t, h, seq := lr.t, lr.h, lr.seq
	if err == nil {
		h.settle(seq)
		lr.release()
		return
	}
	if t.runCtx.Err() != nil || ship.Classify(err) == ship.KindClosed {
		// Stopping (or the producer is gone): the line stays
		// unacknowledged and after the checkpoint, so the next start
		// reads it again.
		return
	}
	if !ship.IsRetryable(err) {
		// Sending it again would fail the same way; holding the
		// checkpoint behind it would stall the file forever.
		t.logger.Error("broker rejected a line permanently; skipping it", "source", h.source, "offset", h.inflightStart(seq), "err", err)
		t.metrics.dropped.Inc()
		h.skip(seq)
		lr.release()
		return
	}
	t.retryMu.Lock()
	t.retries = append(t.retries, retry{line: lr, at: time.Now()})
	t.retryMu.Unlock()
	t.wake()
}

func (h *harvester) inflightStart(seq uint64) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := int(seq - h.seqBase); seq >= h.seqBase && i < len(h.inflight)-h.head {
		return h.inflight[h.head+i].start
	}
	return -1
}

// resend produces records again whose backoff has passed. The producer
// must not be called from an ack callback, so failures queue up here.
func (t *Tailer) resend(now time.Time) {
	t.retryMu.Lock()
	var due, later []retry
	for _, r := range t.retries {
		if now.Sub(r.at) >= retryBackoff {
			due = append(due, r)
		} else {
			later = append(later, r)
		}
	}
	t.retries = later
	t.retryMu.Unlock()
	for _, r := range due {
		t.metrics.resent.Inc()
		t.producer.ProduceWrapped(t.runCtx, &r.line.rec, r.line.ack)
	}
}

// housekeep runs the timers: multiline timeouts, close_inactive, resends,
// and forgetting drained files that are gone.
func (t *Tailer) housekeep(now time.Time) {
	t.resend(now)
	var drop []*harvester
	for _, h := range t.files {
		if h.ml != nil && now.Sub(h.ml.at) >= t.cfg.Multiline.Timeout {
			t.flushPending(h, now)
		}
		// Only a file read to its end is closed: a deleted or renamed-away
		// file's unread rest would be lost with its descriptor, and after
		// a broker outage every file looks idle.
		if h.file != nil && h.atEOF && now.Sub(h.lastData) >= t.cfg.CloseInactive && !t.grew(h) {
			t.logger.Debug("closing inactive file", "path", h.currentPath(), "gone", h.gone)
			t.closeFile(h)
		}
		if h.gone && h.file == nil && !(h.drain && h.wantOpen) && h.ml == nil && h.inflightCount() == 0 {
			drop = append(drop, h)
		}
	}
	if len(drop) > 0 {
		t.forget(drop, now)
	}
}

// grew reports whether h's open file has bytes after the read position.
func (t *Tailer) grew(h *harvester) bool {
	fi, err := h.file.Stat()
	return err == nil && fi.Size() > h.readPos
}
