package tail

import (
	"errors"
	"time"

	"millrace/audit"
)

// Audit counts, kept with the checkpoint.
//
// The tailer's audit counts are "distinct": every line is counted once,
// even across crashes and re-sends. A line is counted when the checkpoint
// moves past it having been acknowledged (settle), not when its own ack
// arrives: acks come out of order, and a line acknowledged beyond the
// checkpoint is read and sent again after a crash. Each harvester gathers
// its counts under the same lock as its checkpoint; snapshot moves them
// into the tailer's ledger while reading the checkpoint, and the registry
// stores the ledger beside the checkpoints in one atomic write. After a
// SIGKILL the tailer reloads counts that cover exactly the lines before
// the checkpoints it resumes from; lines sent again beyond them are counted
// when the checkpoint passes them. Only the persisted ledger is published,
// so a published total never exceeds what a restart reloads.

// hourCount is a harvester's count of acknowledged lines of one hour (hours
// since the Unix epoch of the line's ts) not yet moved into the ledger.
type hourCount struct {
	hour int32
	n    int64
}

// ledgerKey is a ledger count's source path and hour.
type ledgerKey struct {
	source string
	hour   int32
}

// AuditCount is one persisted count: the lines of Source whose ts falls in
// Hour (audit.HourLayout) that are before the checkpoints of the same
// registry.
type AuditCount struct {
	Source   string `json:"source"`
	Hour     string `json:"hour"`
	Accepted int64  `json:"accepted"`

	hour int32 // Hour as hours since the Unix epoch
}

// SetAudit makes the tailer publish its counts through c, which it sets
// from the persisted ledger (see the comment above). Call it before Start.
func (t *Tailer) SetAudit(c *audit.Counter) {
	t.auditor = c
}

// hourOf is the audit hour of a line whose ts is ts.
func hourOf(ts time.Time) int32 { return int32(audit.HourOf(ts)) }

// countLocked counts one acknowledged line of hour as it goes before the
// checkpoint. Lines of one file mostly share an hour: look at the last
// count first.
func (h *harvester) countLocked(hour int32) {
	if k := len(h.counts); k > 0 && h.counts[k-1].hour == hour {
		h.counts[k-1].n++
		return
	}
	for i := range h.counts {
		if h.counts[i].hour == hour {
			h.counts[i].n++
			return
		}
	}
	h.counts = append(h.counts, hourCount{hour: hour, n: 1})
}

// foldLocked moves h's counts into the ledger; t.mu and h.mu are held.
func (t *Tailer) foldLocked(h *harvester) {
	for _, c := range h.counts {
		t.ledger[ledgerKey{h.source, c.hour}] += c.n
		t.ledgerChanged = true
	}
	h.counts = h.counts[:0]
}

// ledgerSnapshotLocked drops hours past the audit retention and returns the
// ledger as stored in the registry; t.mu is held.
func (t *Tailer) ledgerSnapshotLocked(now time.Time) []AuditCount {
	if t.auditor == nil {
		// Counting without publishing would only grow the registry.
		clear(t.ledger)
		return nil
	}
	oldest := hourOf(now.Add(-t.auditor.Retention()))
	out := make([]AuditCount, 0, len(t.ledger))
	for k, n := range t.ledger {
		if k.hour < oldest {
			delete(t.ledger, k)
			t.ledgerChanged = true
			continue
		}
		out = append(out, AuditCount{Source: k.source, Hour: audit.Hour(time.Unix(int64(k.hour)*3600, 0)), Accepted: n, hour: k.hour})
	}
	return out
}

// loadLedger restores the counts of a registry read at start.
func (t *Tailer) loadLedger(counts []AuditCount) error {
	for _, c := range counts {
		at, err := audit.ParseHour(c.Hour)
		if err != nil {
			return err
		}
		if c.Accepted < 0 {
			return errors.New("tail: registry has a negative audit count")
		}
		t.ledger[ledgerKey{c.Source, hourOf(at)}] = c.Accepted
	}
	return nil
}

// publishAudit hands the persisted counts to the audit counter, which
// publishes the ones that changed.
func (t *Tailer) publishAudit(counts []AuditCount) {
	if t.auditor == nil {
		return
	}
	for _, c := range counts {
		t.auditor.Set(t.cfg.Topic, audit.LogSource(t.cfg.Host, c.Source), int64(c.hour), c.Accepted)
	}
}
