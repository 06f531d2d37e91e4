package tier

// Total retention of a tiered partition. retention.ms and retention.bytes
// bound the whole partition, remote and local, as in Kafka (KIP-405's
// RLMExpirationTask): the leader removes the oldest remote segments whose
// largest timestamp is older than retention.ms, then the oldest while the
// remote segments and the local records not yet remote together exceed
// retention.bytes, and every segment wholly below the log start offset
// that DeleteRecords set. The state is written first, with the log start
// offset moved past what went; only then are the objects removed, so a
// crash in between leaves unreferenced objects for the sweep and never a
// state that references a missing object. Local retention is the log's
// (local.retention.*, broker/log/retention.go).

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"millrace/broker/log"
)

// expireCount returns how many of st's oldest segments total retention
// removes under cfg at now, and the log start offset after it. localBytes
// is the size of the local records not yet remote.
func expireCount(st State, cfg log.Config, localBytes int64, now time.Time) (n int, start int64) {
	segments := st.Segments
	for n < len(segments) && segments[n].LastOffset < st.LogStartOffset {
		n++
	}
	if cfg.Retention >= 0 && cfg.Deletes() {
		cutoff := now.Add(-cfg.Retention).UnixMilli()
		for n < len(segments) && segments[n].MaxTimestamp < cutoff {
			n++
		}
	}
	if cfg.RetentionBytes >= 0 && cfg.Deletes() {
		remaining := localBytes
		for _, s := range segments[n:] {
			remaining += s.Size
		}
		for n < len(segments) && remaining-segments[n].Size >= cfg.RetentionBytes {
			remaining -= segments[n].Size
			n++
		}
	}
	start = st.LogStartOffset
	if n > 0 {
		start = max(start, segments[n-1].LastOffset+1)
	}
	return n, start
}

// expire applies total retention to the leader's partition.
func (m *Manager) expire(ctx context.Context, w *writer, logger *slog.Logger) error {
	p := w.p
	var localBytes int64
	for _, s := range p.Log.Segments() {
		if s.NextOffset > w.state.End() {
			localBytes += s.Size
		}
	}
	n, start := expireCount(w.state, p.Log.Config(), localBytes, m.now())
	if n == 0 {
		return nil
	}
	if err := m.dropSegments(ctx, w, n, start); err != nil {
		return err
	}
	logger.Info("remote segments expired", "segments", n, "remote_log_start_offset", start)
	// Kafka moves the log start offset with the remote one: local records
	// below it go too (they are expired by the same total retention).
	if start > p.Log.StartOffset() && start <= p.Log.EndOffset() {
		if err := p.Log.AdvanceStartOffset(start); err != nil {
			return fmt.Errorf("tier: advancing the local log start offset to the remote one, %d: %w", start, err)
		}
	}
	return nil
}

// dropSegments writes w's state without its n oldest segments and with
// the log start offset start, then removes their objects; only the state
// write can fail it.
func (m *Manager) dropSegments(ctx context.Context, w *writer, n int, start int64) error {
	doomed := w.state.Segments[:n]
	next := w.state
	next.Segments = append([]Segment(nil), w.state.Segments[n:]...)
	next.LogStartOffset = start
	if err := m.commit(w, next); err != nil {
		return err
	}
	m.metrics.expiredSegments.Add(float64(n))
	if err := m.removeSegments(ctx, doomed); err != nil {
		// The state no longer references them: the sweep removes them.
		m.logger.Warn("removing expired remote segments; the sweep will", "topic", w.p.Topic, "partition", w.p.Partition, "err", err)
	}
	return nil
}

// deleteRecordsAttempts bounds DeleteRecords' retries when the state
// changes under it (a concurrent upload of the leader's round).
const deleteRecordsAttempts = 3

// DeleteRecords moves a tiered partition's remote log start offset up to
// offset (Kafka's DeleteRecords on a tiered topic) and removes the remote
// segments wholly below it; the caller then advances the local log. p
// must be led by this broker. It returns the remote log start offset
// afterwards (offset, unless it was already higher), or -1 when the
// partition has no remote state.
func (m *Manager) DeleteRecords(ctx context.Context, p Partition, offset int64) (int64, error) {
	for attempt := 1; ; attempt++ {
		w, err := m.openWriter(p)
		if err != nil {
			return -1, err
		}
		if w == nil || !w.exists {
			return -1, nil
		}
		if offset <= w.state.LogStartOffset {
			return w.state.LogStartOffset, nil
		}
		n := 0
		for n < len(w.state.Segments) && w.state.Segments[n].LastOffset < offset {
			n++
		}
		err = m.dropSegments(ctx, w, n, offset)
		if err == nil || attempt == deleteRecordsAttempts || !isConflict(err) {
			if err != nil {
				return -1, err
			}
			return offset, nil
		}
	}
}
