package log

// Durability on demand, and flush.ms on time.
//
// Kafka acknowledges what is in the page cache and leaves durability to
// replication; millrace does the same by default. millrace.flush.on.ack
// (Config.FlushOnAck) makes the broker wait for an fsync instead, as
// Redpanda does for acks=all. One fsync per produce would cap a partition at
// the disk's fsync rate, so SyncTo is a group commit: the first caller to
// find the log not durable enough fsyncs every segment written since the
// last fsync, up to the log end at that moment, outside the append lock, so
// producers keep appending meanwhile. Callers that arrive during that fsync
// wait for it to end and then one of them fsyncs again for all of them: a
// single fsync covers every batch appended while the previous one ran.
//
// SyncTo fsyncs only the .log files (and the directory, once per new
// segment): that is what recovery needs to find the records again. The
// index files, recovery point and flush.messages / flush.ms accounting stay
// with flushLocked, so a crash in this mode rescans more of the log at the
// next start but loses nothing that SyncTo reported durable.
//
// flush.ms is kept by a timer per log, armed by the first append after an
// fsync for the moment that append is flush.ms old (Kafka checks every
// log.flush.scheduler.interval.ms instead; a timer per log costs nothing
// while the log is idle and is never late by a polling interval). The log
// owns the timer: Close stops it and waits for a firing in progress.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"millrace/internal/durable"
)

// flushState is the Log's part for SyncTo and the flush.ms timer.
type flushState struct {
	// durable is the offset below which every record is fsynced. Read
	// lock-free (the high watermark in flush-on-ack mode); written under
	// Log.appendMu.
	durable atomic.Int64

	// Guarded by Log.appendMu:
	firstUnflushed time.Time // the oldest append flushLocked has not fsynced yet
	truncations    uint64    // bumped by every truncation, so a sync that raced one claims nothing
	dirSynced      *segment  // the newest segment whose directory entry is known durable

	mu      sync.Mutex    // guards the following
	syncing bool          // a SyncTo caller is fsyncing
	done    chan struct{} // closed when that fsync ends

	timer flushTimer
}

// DurableOffset is the offset below which every record is fsynced: what a
// power cut cannot take away.
func (l *Log) DurableOffset() int64 { return l.flush.durable.Load() }

// SyncTo returns once every record below offset is fsynced, fsyncing if
// needed together with every other caller waiting meanwhile (group commit).
// It fails with the log's sticky write error, ErrClosed, ctx's error, or
// ErrOffsetOutOfRange when the log no longer reaches offset (truncated).
func (l *Log) SyncTo(ctx context.Context, offset int64) error {
	for l.flush.durable.Load() < offset {
		f := &l.flush
		f.mu.Lock()
		if f.syncing {
			done := f.done
			f.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		f.syncing, f.done = true, make(chan struct{})
		f.mu.Unlock()
		end, err := l.syncOnce()
		f.mu.Lock()
		f.syncing = false
		close(f.done)
		f.mu.Unlock()
		if err != nil {
			return err
		}
		if end < offset {
			return fmt.Errorf("%w: offset %d is beyond the log end %d", ErrOffsetOutOfRange, offset, end)
		}
	}
	return nil
}

// syncOnce fsyncs what was written up to the current log end and returns
// that end. Only one runs at a time (SyncTo's syncing flag).
func (l *Log) syncOnce() (int64, error) {
	l.appendMu.Lock()
	if err := l.writableLocked(); err != nil {
		// A closed log was fsynced whole by Close.
		end := l.endOffset
		l.appendMu.Unlock()
		if errors.Is(err, ErrClosed) && l.flush.durable.Load() >= end {
			return end, nil
		}
		return 0, err
	}
	target, from, generation := l.endOffset, l.flush.durable.Load(), l.flush.truncations
	var pending []*segment
	for _, s := range l.segments {
		if s.nextOffset > from {
			s.acquire() // a concurrent retention or truncation must not close it under us
			pending = append(pending, s)
		}
	}
	active := l.segments[len(l.segments)-1]
	syncDir := active != l.flush.dirSynced
	l.appendMu.Unlock()

	var err error
	if syncDir {
		// A segment created since: its name must survive a power cut too.
		err = durable.SyncDir(l.dir)
	}
	for _, s := range pending {
		if err == nil {
			err = s.log.Sync()
		}
		// Ours may be the last reference to a segment deleted meanwhile;
		// failing to unlink it is no reason to refuse appends.
		if rerr := s.release(); rerr != nil {
			l.logger.Warn("releasing a segment after fsync", "segment", s.baseOffset, "err", rerr)
		}
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err != nil {
		if l.writeErr == nil {
			l.logger.Error("fsync failed", "err", err)
		}
		return 0, l.failWritesLocked(fmt.Errorf("log: fsync failed; log refuses appends until reopened: %w", err), false)
	}
	if syncDir {
		l.flush.dirSynced = active
	}
	if l.flush.truncations == generation && target > l.flush.durable.Load() {
		l.flush.durable.Store(target)
	}
	return target, nil
}

// markDurableLocked records that flushLocked fsynced everything below end.
func (l *Log) markDurableLocked(end int64) {
	l.flush.durable.Store(max(l.flush.durable.Load(), end))
}

// noteTruncatedLocked lowers the durable offset to a truncated log's end:
// records appended there later are new and not fsynced yet.
func (l *Log) noteTruncatedLocked(end int64) {
	l.flush.truncations++
	if l.flush.durable.Load() > end {
		l.flush.durable.Store(end)
	}
}

// noteAppendLocked starts the flush.ms clock at the first append after an
// fsync by flushLocked. Called before l.unflushed counts the append.
func (l *Log) noteAppendLocked(now time.Time) {
	if l.unflushed != 0 {
		return
	}
	l.flush.firstUnflushed = now
	if d := l.cfg.FlushInterval; d != never {
		l.flush.timer.arm(d, l.flushTimerFired)
	}
}

// beforeConfigLocked fsyncs everything when cfg turns FlushOnAck on: the
// high watermark stops at the durable offset from then on, and must not
// step back behind records consumers could already see.
func (l *Log) beforeConfigLocked(cfg Config) error {
	if !cfg.FlushOnAck || l.cfg.FlushOnAck || l.flush.durable.Load() >= l.endOffset {
		return nil
	}
	if err := l.writableLocked(); err != nil {
		return err
	}
	return l.flushLocked()
}

// rearmFlushTimerLocked re-arms the timer after a config change, which may
// have brought flush.ms closer.
func (l *Log) rearmFlushTimerLocked() {
	if l.unflushed == 0 || l.cfg.FlushInterval == never {
		return
	}
	due := l.flush.firstUnflushed.Add(l.cfg.FlushInterval)
	l.flush.timer.arm(max(due.Sub(l.now()), 0), l.flushTimerFired)
}

// flushTimerFired flushes if the oldest unflushed append is flush.ms old,
// else re-arms for when it will be.
func (l *Log) flushTimerFired() {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed || l.writeErr != nil || l.unflushed == 0 || l.cfg.FlushInterval == never {
		return
	}
	now := l.now()
	if due := l.flush.firstUnflushed.Add(l.cfg.FlushInterval); now.Before(due) {
		l.flush.timer.arm(due.Sub(now), l.flushTimerFired)
		return
	}
	// flushLocked logs and records its own failure.
	_ = l.flushLocked()
}

// FlushIfDue flushes if the oldest append not yet fsynced is at least
// flush.ms old at now. The timer does this on its own; the manager's
// periodic check calls it as a backstop.
func (l *Log) FlushIfDue(now time.Time) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed || l.unflushed == 0 || l.cfg.FlushInterval == never || now.Sub(l.flush.firstUnflushed) < l.cfg.FlushInterval {
		return nil
	}
	if l.writeErr != nil {
		return l.writeErr
	}
	return l.flushLocked()
}

// flushTimer is a one-shot timer that can be re-armed and whose firings are
// joined by stop.
type flushTimer struct {
	mu      sync.Mutex // guards the following
	timer   *time.Timer
	at      time.Time // when the armed firing is due
	stopped bool
	firing  sync.WaitGroup // one per firing scheduled and not yet finished
}

// arm schedules fire in d unless a firing no later than that is already
// scheduled: fire re-evaluates and re-arms, so an early firing is enough.
func (t *flushTimer) arm(d time.Duration, fire func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	now := time.Now()
	at := now.Add(d)
	if t.timer != nil && now.Before(t.at) && !at.Before(t.at) {
		return
	}
	t.at = at
	if t.timer != nil && t.timer.Reset(d) {
		return // the pending firing moved; it is counted already
	}
	t.firing.Add(1)
	if t.timer == nil {
		t.timer = time.AfterFunc(d, func() { t.run(fire) })
	}
}

// run is the timer's function: fire unless stopped.
func (t *flushTimer) run(fire func()) {
	defer t.firing.Done()
	t.mu.Lock()
	stopped := t.stopped
	t.mu.Unlock()
	if !stopped {
		fire()
	}
}

// stop prevents further firings and waits for one in progress.
func (t *flushTimer) stop() {
	t.mu.Lock()
	t.stopped = true
	if t.timer != nil && t.timer.Stop() {
		t.firing.Done() // that firing will not run
	}
	t.mu.Unlock()
	t.firing.Wait()
}
