package log

import (
	"errors"
	"sync"
	"time"
)

// retiring holds the segments a log deleted whose files wait out
// file.delete.delay.ms before they are closed and unlinked, as Kafka's
// asynchronous segment deletion does: a reader that looked the segment up
// just before keeps reading it, and the filesystem work happens off the
// append path. That second part matters for latency: closing the last
// descriptor of a large unlinked file frees its blocks in the closing
// thread, and done under appendMu (retention runs there) it stalled every
// produce to the partition behind the filesystem's journal, once per
// deleted segment.
type retiring struct {
	mu     sync.Mutex // guards the following
	timers map[*segment]*time.Timer
	closed bool // the log is closed: release at once
}

// retireLocked renames the doomed segments' files *.deleted at once, so a
// restart does not bring them back, and drops the log's reference to each
// file.delete.delay.ms later (at once when the delay is 0); the last
// reference's release closes and unlinks the files. The caller holds
// appendMu and has taken the segments out of l.segments.
func (l *Log) retireLocked(doomed []*segment) error {
	var errs []error
	for _, s := range doomed {
		errs = append(errs, s.markDeleted())
	}
	delay := l.cfg.FileDeleteDelay
	l.retiring.mu.Lock()
	defer l.retiring.mu.Unlock()
	for _, s := range doomed {
		if delay <= 0 || l.retiring.closed {
			errs = append(errs, s.release())
			continue
		}
		if l.retiring.timers == nil {
			l.retiring.timers = make(map[*segment]*time.Timer)
		}
		l.retiring.timers[s] = time.AfterFunc(delay, func() { l.finishRetiring(s) })
	}
	return errors.Join(errs...)
}

// finishRetiring releases s when its delay is over, unless closeRetiring
// took it first.
func (l *Log) finishRetiring(s *segment) {
	l.retiring.mu.Lock()
	_, ok := l.retiring.timers[s]
	delete(l.retiring.timers, s)
	l.retiring.mu.Unlock()
	if !ok {
		return
	}
	if err := s.release(); err != nil {
		l.logger.Warn("removing a deleted segment's files", "base_offset", s.baseOffset, "err", err)
	}
}

// closeRetiring releases every segment still waiting out its delay (the
// log is closing: nothing reads it any more) and makes later retirements
// release at once.
func (l *Log) closeRetiring() error {
	l.retiring.mu.Lock()
	l.retiring.closed = true
	timers := l.retiring.timers
	l.retiring.timers = nil
	l.retiring.mu.Unlock()
	var errs []error
	for s, t := range timers {
		t.Stop()
		errs = append(errs, s.release())
	}
	return errors.Join(errs...)
}
