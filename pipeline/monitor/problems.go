package monitor

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// problemMetric is the gauge a producer publishes per topic and cause while
// records fail for a reason only the operator can fix (agents/ship): 1
// while it lasts, 0 once a record to the topic was acknowledged again. Its
// message label says what to do.
const problemMetric = "millrace_ship_problem"

// Problem is something that keeps a component's records from shipping, as
// the component itself reported it on the ops metrics topic.
type Problem struct {
	// Source is the reporting process ("host:component").
	Source string `json:"source"`
	// Topic is the topic whose records fail; empty when every topic fails
	// alike (refused credentials).
	Topic string `json:"topic,omitempty"`
	// Cause is the short name of the reason (topic_missing, topic_denied,
	// cluster_denied, auth_failed, invalid_topic).
	Cause string `json:"cause"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
	// LastSeen is the newest sample that reported it.
	LastSeen time.Time `json:"last_seen"`
}

// problemSet keeps the latest problem sample per (source, topic, cause).
type problemSet struct {
	limit int // most kept, so a flood of label values cannot exhaust memory

	mu     sync.Mutex // guards the following
	latest map[[3]string]problemSample
}

type problemSample struct {
	value   float64
	ts      time.Time
	message string
}

func newProblemSet(limit int) *problemSet {
	return &problemSet{limit: limit, latest: make(map[[3]string]problemSample)}
}

// add keeps s when it is a problem sample newer than the one kept.
func (p *problemSet) add(s metricSample) {
	if s.Name != problemMetric {
		return
	}
	k := [3]string{s.Source, s.Labels["topic"], s.Labels["cause"]}
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.latest[k]
	if !ok && len(p.latest) >= p.limit {
		return
	}
	if ok && !s.TS.After(old.ts) {
		return // the topic's partitions interleave
	}
	p.latest[k] = problemSample{value: s.Value, ts: s.TS, message: s.Labels["message"]}
}

// current lists the problems whose latest sample says they last (value 1)
// and is no older than staleAfter: a source that stopped publishing tells
// nothing any more.
func (p *problemSet) current(now time.Time, staleAfter time.Duration) []Problem {
	out := []Problem{}
	p.mu.Lock()
	for k, s := range p.latest {
		if s.value < 1 || staleAfter > 0 && now.Sub(s.ts) > staleAfter {
			continue
		}
		out = append(out, Problem{Source: k[0], Topic: k[1], Cause: k[2], Message: s.message, LastSeen: s.ts})
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Cause, b.Cause))
	})
	return out
}
