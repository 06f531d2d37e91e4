package monitor

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"
)

// The quotas view: one row per client quota entity and kind a broker
// measured, from the broker's per-entity gauges on the ops metrics topic
// (broker/kafka quota_metrics.go): what the entity used, its quota, and
// the throttle time it was given. The broker already bounds the entities
// (recent ones with a quota, the rest summed under <other>); a row whose
// last sample is older than the stale time is gone from the broker's list
// and is dropped here too.

// The broker's per-entity quota gauges, and what each sets in a row.
const (
	quotaUsageMetric    = "millrace_broker_quota_usage"
	quotaLimitMetric    = "millrace_broker_quota_limit"
	quotaThrottleMetric = "millrace_broker_quota_throttle_ratio"
)

// Quota is one client quota entity's use of one quota, as a broker
// measured it over its quota windows.
type Quota struct {
	// Source is the publishing process ("host:component").
	Source string `json:"source"`
	// User and ClientID name the entity, URL-encoded as in the quota
	// paths; empty when the entity has no such component. "<other>" in
	// both is the sum of the entities past the broker's series bound.
	User     string `json:"user,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	// Kind is the quota type (producer_byte_rate, consumer_byte_rate,
	// request_percentage, controller_mutation_rate).
	Kind string `json:"kind"`
	// Usage and Limit are in the quota's unit: bytes per second, percent
	// of a request handler, or partition mutations per second.
	Usage float64 `json:"usage"`
	Limit float64 `json:"limit"`
	// Throttle is the throttle time the entity was given, in seconds per
	// second.
	Throttle float64   `json:"throttle"`
	LastSeen time.Time `json:"last_seen"`
}

// Entity is the row's entity for people: "user=alice, client-id=app".
func (q Quota) Entity() string {
	var parts []string
	if q.User != "" {
		parts = append(parts, "user="+q.User)
	}
	if q.ClientID != "" {
		parts = append(parts, "client-id="+q.ClientID)
	}
	return strings.Join(parts, ", ")
}

// share is Usage over Limit; Usage itself for a limit of 0.
func (q Quota) share() float64 {
	if q.Limit <= 0 {
		return q.Usage
	}
	return q.Usage / q.Limit
}

// quotaKey names a row: source, user, client ID and kind.
type quotaKey [4]string

// quotaSet keeps each row's latest gauges.
type quotaSet struct {
	limit int // most rows kept, so a flood of label values cannot exhaust memory

	mu     sync.Mutex // guards the following
	latest map[quotaKey]*Quota
}

func newQuotaSet(limit int) *quotaSet {
	return &quotaSet{limit: limit, latest: make(map[quotaKey]*Quota)}
}

// add keeps s when it is one of the quota gauges and not older than the
// row's latest (the topic's partitions interleave).
func (q *quotaSet) add(s metricSample) {
	if s.Name != quotaUsageMetric && s.Name != quotaLimitMetric && s.Name != quotaThrottleMetric {
		return
	}
	k := quotaKey{s.Source, s.Labels["user"], s.Labels["client_id"], s.Labels["kind"]}
	q.mu.Lock()
	defer q.mu.Unlock()
	row := q.latest[k]
	if row == nil {
		if len(q.latest) >= q.limit {
			return
		}
		row = &Quota{Source: k[0], User: k[1], ClientID: k[2], Kind: k[3]}
		q.latest[k] = row
	}
	if s.TS.Before(row.LastSeen) {
		return
	}
	row.LastSeen = s.TS
	switch s.Name {
	case quotaUsageMetric:
		row.Usage = s.Value
	case quotaLimitMetric:
		row.Limit = s.Value
	default:
		row.Throttle = s.Value
	}
}

// current lists the rows seen within staleAfter, the most throttled
// first, then the fullest; older rows are forgotten.
func (q *quotaSet) current(now time.Time, staleAfter time.Duration) []Quota {
	out := []Quota{}
	q.mu.Lock()
	for k, row := range q.latest {
		if staleAfter > 0 && now.Sub(row.LastSeen) > staleAfter {
			delete(q.latest, k)
			continue
		}
		out = append(out, *row)
	}
	q.mu.Unlock()
	slices.SortFunc(out, func(a, b Quota) int {
		return cmp.Or(cmp.Compare(b.Throttle, a.Throttle), cmp.Compare(b.share(), a.share()),
			cmp.Compare(a.Source, b.Source), cmp.Compare(a.Entity(), b.Entity()), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}
