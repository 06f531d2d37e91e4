package tail

import (
	"slices"
	"time"
)

func (h *harvester) entryLocked() RegistryEntry {
	return RegistryEntry{
		ID:             h.id,
		Source:         h.source,
		Path:           h.path,
		Device:         h.dev,
		Inode:          h.ino,
		FingerprintLen: h.fpLen,
		Fingerprint:    h.fpHash,
		Offset:         h.checkpointLocked(),
		Seen:           h.seen,
	}
}

// snapshot collects the registry entries of followed and dormant files,
// the audit counts of the lines before their checkpoints (each harvester's
// moved into the ledger under the lock its checkpoint is read under, see
// audit.go), whether those counts changed, the checkpoint lag in bytes and
// the lines in flight.
func (t *Tailer) snapshot() ([]RegistryEntry, []AuditCount, bool, int64, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	entries := make([]RegistryEntry, 0, len(t.files)+len(t.dormant))
	var lag int64
	inflight := 0
	for _, h := range t.files {
		h.mu.Lock()
		inflight += len(h.inflight) - h.head
		t.foldLocked(h)
		if !h.retired {
			e := h.entryLocked()
			if h.size > e.Offset {
				lag += h.size - e.Offset
			}
			entries = append(entries, e)
		}
		h.mu.Unlock()
	}
	kept := t.retiredFiles[:0]
	for _, h := range t.retiredFiles {
		h.mu.Lock()
		t.foldLocked(h)
		if n := len(h.inflight) - h.head; n > 0 {
			inflight += n
			kept = append(kept, h)
		}
		h.mu.Unlock()
	}
	clear(t.retiredFiles[len(kept):])
	t.retiredFiles = kept
	for _, e := range t.dormant {
		entries = append(entries, e)
	}
	counts := t.ledgerSnapshotLocked(time.Now())
	changed := t.ledgerChanged
	t.ledgerChanged = false
	return entries, counts, changed, lag, inflight
}

// persist writes the registry if it changed since the last write, then
// hands the audit counts it stored to the audit counter.
func (t *Tailer) persist() error {
	entries, counts, countsChanged, lag, inflight := t.snapshot()
	t.metrics.lag.Set(float64(lag))
	// Set here rather than counted per line: two goroutines adding to one
	// gauge for every line cost more than the line's bookkeeping.
	t.metrics.inflight.Set(float64(inflight))
	t.regMu.Lock()
	defer t.regMu.Unlock()
	sortEntries(entries)
	if !countsChanged && t.lastEntries != nil && slices.Equal(entries, t.lastEntries) {
		return nil
	}
	if err := writeRegistry(t.cfg.DataDir, entries, counts); err != nil {
		// The counts stay in the ledger: the next write stores them.
		t.mu.Lock()
		t.ledgerChanged = true
		t.mu.Unlock()
		return err
	}
	t.lastEntries = entries
	if countsChanged {
		t.publishAudit(counts)
	}
	return nil
}

func sortEntries(es []RegistryEntry) {
	slices.SortFunc(es, func(a, b RegistryEntry) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// checkpointer writes the registry every checkpoint_interval and forgets
// dormant entries older than forget_after. It stops without a final write
// when the run context ends: Shutdown writes the last one itself, and a
// killed tailer must behave like a crashed one.
func (t *Tailer) checkpointer() {
	tick := time.NewTicker(t.cfg.CheckpointInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.runCtx.Done():
			return
		case now := <-tick.C:
			t.mu.Lock()
			for id, e := range t.dormant {
				if now.Sub(e.Seen) > t.cfg.ForgetAfter {
					delete(t.dormant, id)
				}
			}
			t.mu.Unlock()
			if err := t.persist(); err != nil {
				t.logger.Error("writing registry", "err", err)
			}
		}
	}
}
