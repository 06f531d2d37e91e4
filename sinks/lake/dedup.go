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

// mergeDedupCounts adds a landed window's counts to the Prometheus
// counters. The audit reads them per source and hour from the window
// (audit.go).
// The caller holds w.landing.
func (w *Worker) mergeDedupCounts(topic string, c dedupCounts) {
	for _, v := range c {
		w.metrics.duplicates.WithLabelValues(topic).Add(float64(v[countDeduplicated]))
		w.metrics.withoutID.WithLabelValues(topic).Add(float64(v[countNoID]))
	}
}

// countDedup counts r, decoded into p.row, in win as a repeat
// dropped (countDeduplicated) or a row without id (countNoID).
// The caller holds w.landing.
func (w *Worker) countDedup(p *partitionState, win *window, r *kgo.Record, which int) {
	if win.dedup == nil {
		win.dedup = dedupCounts{}
	}
	win.dedup.add(w.rowSource(p, p.row), audit.Hour(w.eventTime(p.row, r.Timestamp)), which)
}
