package quota

import (
	"math"
	"time"
)

// Usage is one sensor's recent state: what Kafka exposes per quota entity
// as its byte-rate, request-time and throttle-time metrics.
type Usage struct {
	// Kind is the quota type measured.
	Kind Kind
	// Entity is the entity usage is recorded under (the sensor's key):
	// the user or client a default's quota applies to, or the configured
	// entity itself; sanitized names, Default only for a flood folded
	// into a default's own sensor.
	Entity Entity
	// Quota is the bound that applies now.
	Quota float64
	// Rate is the measured usage in the quota's unit: bytes per second,
	// percent of a handler thread, or, for controller_mutation_rate,
	// what the token bucket lacks of full spread over its burst
	// (WindowNum windows), so that Rate/Quota is 1 at an empty bucket.
	Rate float64
	// Throttle is the throttle time this quota gave the entity's
	// clients, in seconds per second over the quota windows.
	Throttle float64
	// Last is when the entity was last recorded.
	Last time.Time
}

// Usage lists the sensors recorded within the last within before now
// whose entity still has a quota of their kind, in no particular order.
// It holds the sensors' lock while it measures, as Record does for one.
func (m *Manager) Usage(now time.Time, within time.Duration) []Usage {
	quotas := m.Quotas()
	m.sensorsMu.Lock()
	defer m.sensorsMu.Unlock()
	var out []Usage
	for k, s := range m.sensors {
		if now.Sub(s.last) > within {
			continue
		}
		bound, ok := quotas[s.match][k.kind]
		if !ok {
			continue // removed since: no quota to measure against
		}
		u := Usage{Kind: k.kind, Entity: k.key, Quota: bound, Throttle: s.throttled.measure(now), Last: s.last}
		if k.kind == ControllerMutationRate {
			u.Rate = s.bucket.lack(bound, now) / (WindowNum * WindowSize).Seconds()
		} else {
			u.Rate = s.rate.measure(now)
		}
		out = append(out, u)
	}
	return out
}

// lack is how many tokens the bucket is short of full at now, without
// refilling it (Usage only reads).
func (b *bucket) lack(rate float64, now time.Time) float64 {
	if b.last.IsZero() {
		return 0
	}
	burst := rate * WindowNum * WindowSize.Seconds()
	tokens := b.tokens
	if elapsed := now.Sub(b.last); elapsed > 0 {
		tokens = math.Min(burst, tokens+rate*elapsed.Seconds())
	}
	return burst - tokens
}
