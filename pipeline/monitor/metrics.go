package monitor

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// metricSample is one sample read off an ops topic (see decodeOps).
type metricSample struct {
	Name   string
	Kind   string
	Value  float64
	Labels map[string]string
	TS     time.Time
	Source string
}

// throughputMetric says how one component counter becomes a Component.
type throughputMetric struct {
	kind, unit string
	// name picks the component's name from the sample's labels; false
	// skips the sample (a series that is no throughput, such as rejected
	// beacon events).
	name func(labels map[string]string) (string, bool)
}

// throughputMetrics are the counters shown as component throughput, by
// metric name. The appliance labels its tailers input=<name> and its sinks
// sink=<name> when it registers them.
var throughputMetrics = map[string]throughputMetric{
	"millrace_tail_lines_read_total": {kind: "agent", unit: "lines/s", name: func(l map[string]string) (string, bool) {
		return "tail:" + cmp.Or(l["input"], "default"), true
	}},
	"millrace_ship_records_sent_total": {kind: "agent", unit: "records/s", name: func(map[string]string) (string, bool) {
		return "ship", true
	}},
	"millrace_beacon_events_total": {kind: "beacon", unit: "events/s", name: func(l map[string]string) (string, bool) {
		return cmp.Or(l["stream"], "events"), l["result"] == "accepted"
	}},
	"millrace_lake_rows_total": {kind: "sink", unit: "rows/s", name: func(l map[string]string) (string, bool) {
		return cmp.Or(l["sink"], "lake"), true
	}},
}

// counterPoint is one sample of a counter.
type counterPoint struct {
	value float64
	ts    time.Time
}

// counterSeries keeps the last two samples of one counter, enough for its
// current rate.
type counterSeries struct {
	source, name string
	labels       map[string]string
	prev, last   counterPoint
	hasPrev      bool
}

// rate is the counter's increase per second between its last two samples.
// A counter that went down was reset (its process restarted) and counted
// from zero, as Prometheus's rate() does.
func (s *counterSeries) rate() float64 {
	if !s.hasPrev {
		return 0
	}
	dt := s.last.ts.Sub(s.prev.ts).Seconds()
	if dt <= 0 {
		return 0
	}
	delta := s.last.value - s.prev.value
	if delta < 0 {
		delta = s.last.value
	}
	return delta / dt
}

// counters holds the latest values of the ops counters, per (source, name,
// labels).
type counters struct {
	limit int // most series kept, so a flood of label values cannot exhaust memory

	mu     sync.Mutex // guards the following
	series map[string]*counterSeries
	// published is each source's two newest sample times: a series first
	// seen after the source's previous publication was not in it, so it
	// counted 0 then (a labelled counter is exported from its first
	// increment), and its first value is already an increase, such as the
	// first failed request.
	published map[string]publications
	// dropped counts samples of new series refused at the limit.
	dropped int
}

func newCounters(limit int) *counters {
	return &counters{limit: limit, series: make(map[string]*counterSeries), published: make(map[string]publications)}
}

// add takes one sample off the ops topics. Only counters are kept:
// gauges and histograms carry no throughput. Samples older than the
// latest of their series are ignored (the topic's partitions interleave).
func (c *counters) add(s metricSample) {
	if s.Kind != "counter" {
		return
	}
	key := seriesKey(s.Source, s.Name, s.Labels)
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.series[key]
	if cs == nil {
		if len(c.series) >= c.limit {
			c.dropped++
			return
		}
		cs = &counterSeries{source: s.Source, name: s.Name, labels: s.Labels, last: counterPoint{s.Value, s.TS}}
		if before, ok := c.published[s.Source].before(s.TS); ok {
			cs.prev, cs.hasPrev = counterPoint{0, before}, true
		}
		c.series[key] = cs
		c.notePublishedLocked(s)
		return
	}
	c.notePublishedLocked(s)
	switch {
	case s.TS.After(cs.last.ts):
		cs.prev, cs.last, cs.hasPrev = cs.last, counterPoint{s.Value, s.TS}, true
	case s.TS.Equal(cs.last.ts):
		cs.last.value = s.Value
	}
}

// publications are a source's two newest sample times.
type publications struct{ last, prior time.Time }

// before is the newest publication before t, if one is known.
func (p publications) before(t time.Time) (time.Time, bool) {
	switch {
	case !p.last.IsZero() && p.last.Before(t):
		return p.last, true
	case p.last.Equal(t) && !p.prior.IsZero():
		return p.prior, true
	}
	return time.Time{}, false
}

// notePublishedLocked records s's time as its source's newest publication
// when it is. Only sources with a kept series are noted, so the map is
// bounded as the series are.
func (c *counters) notePublishedLocked(s metricSample) {
	p := c.published[s.Source]
	if s.TS.After(p.last) {
		c.published[s.Source] = publications{last: s.TS, prior: p.last}
	}
}

// seriesKey identifies a series: source, name and labels in key order.
func seriesKey(source, name string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(source)
	b.WriteByte(0)
	b.WriteString(name)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
	}
	return b.String()
}

// components sums the throughput counters per (kind, name, source). A
// component whose last sample is older than staleAfter has stopped
// publishing: it is kept, marked stale, with a rate of 0.
func (c *counters) components(now time.Time, staleAfter time.Duration) []Component {
	type key struct{ kind, name, source, metric string }
	byKey := make(map[key]*Component)
	c.mu.Lock()
	for _, cs := range c.series {
		tm, ok := throughputMetrics[cs.name]
		if !ok {
			continue
		}
		name, ok := tm.name(cs.labels)
		if !ok {
			continue
		}
		k := key{tm.kind, name, cs.source, cs.name}
		comp := byKey[k]
		if comp == nil {
			comp = &Component{Kind: tm.kind, Name: name, Source: cs.source, Metric: cs.name, Unit: tm.unit}
			byKey[k] = comp
		}
		comp.Rate += cs.rate()
		comp.Total += cs.last.value
		if cs.last.ts.After(comp.LastSeen) {
			comp.LastSeen = cs.last.ts
		}
	}
	c.mu.Unlock()
	out := make([]Component, 0, len(byKey))
	for _, comp := range byKey {
		if staleAfter > 0 && now.Sub(comp.LastSeen) > staleAfter {
			comp.Stale, comp.Rate = true, 0
		}
		out = append(out, *comp)
	}
	slices.SortFunc(out, func(a, b Component) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Metric, b.Metric))
	})
	return out
}
