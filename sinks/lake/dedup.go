package lake

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
)

// Dedup in the worker (doc.go, "Dedup"): event ids are read in eventid.go,
// decided by the pure per-partition set in dedupset.go, and the set of a
// newly assigned partition is rebuilt by a replay in rebuild.go; this file
// counts what was dropped or had no id, per source and hour.

// dedupKey indexes a window's counts.
type dedupKey struct{ source, hour string }

// dedupCounts are a window's counts, merged into the worker's totals when
// the window lands (a discarded window's records are decided again).
type dedupCounts map[dedupKey]*[2]int64 // [deduplicated, no id]

func (c dedupCounts) add(source, hour string, which int) {
	k := dedupKey{source, hour}
	v := c[k]
	if v == nil {
		v = new([2]int64)
		c[k] = v
	}
	v[which]++
}

const (
	countDeduplicated = 0
	countNoID         = 1
)

// mergeDedupCountsLocked adds a landed window's counts to the Prometheus
// counters. The audit reads them per source and hour from the window
// (audit.go).
func (w *Worker) mergeDedupCountsLocked(topic string, c dedupCounts) {
	for _, v := range c {
		w.metrics.duplicates.WithLabelValues(topic).Add(float64(v[countDeduplicated]))
		w.metrics.withoutID.WithLabelValues(topic).Add(float64(v[countNoID]))
	}
}

// dropRepeatLocked decides whether r, decoded into p.row, is a repeat to
// drop, and counts it when it is one or has no id.
func (w *Worker) dropRepeatLocked(p *partitionState, r *kgo.Record) bool {
	kind, repeat := p.dedup.decideRecord(p.row, r)
	if !repeat && kind != idNone {
		return false
	}
	if p.win.dedup == nil {
		p.win.dedup = dedupCounts{}
	}
	which := countNoID
	if repeat {
		which = countDeduplicated
	}
	p.win.dedup.add(w.rowSource(p, p.row), audit.Hour(w.eventTime(p.row, r.Timestamp)), which)
	return repeat
}
