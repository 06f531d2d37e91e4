package quota

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sensor bounds.
const (
	// InactiveExpiry is how long a sensor lives without a record, Kafka's
	// inactive sensor expiration for quota sensors (one hour).
	InactiveExpiry = time.Hour
	// DefaultMaxSensors bounds the sensors a Manager keeps per quota type.
	// At about 600 bytes a sensor, 10,000 are 6 MB per type.
	DefaultMaxSensors = 10000
	// sweepEvery is how often expired sensors are looked for.
	sweepEvery = time.Minute
)

// sensorKey names a sensor: one per quota type and entity.
type sensorKey struct {
	kind Kind
	key  Entity
}

// sensor is one entity's usage of one quota type.
type sensor struct {
	rate   rate      // request_percentage; byte rates' usage, for Usage
	bucket bucket    // byte rates and controller_mutation_rate
	last   time.Time // the last record, for expiry
	// match is the entity whose quota applied at the last record, and
	// throttled the throttle time given (seconds) over the same windows
	// as rate: both for Usage.
	match     Entity
	throttled rate
}

// Manager decides quotas: it holds every entity's quotas (loaded from the
// coordination store and kept current by Follow) and one sensor per
// entity a client resolves to. It implements Limiter and is safe for
// concurrent use. With no quota of a type configured anywhere, Record
// and TryMutate for that type cost one atomic load.
type Manager struct {
	// enabled[i] is whether any entity has a quota of Kinds[i]: the
	// request path's first (and with quotas off, only) check.
	enabled [4]atomic.Bool
	// maxSensors bounds sensors per type; see sensorLocked.
	maxSensors int

	mu     sync.RWMutex // guards the following
	quotas map[Entity]map[Kind]float64
	// shapes[i] has bit p set when some entity with a quota of Kinds[i]
	// sits at position p of candidates, so resolve looks up only the
	// positions that can match (one lookup with only a default set).
	shapes [4]uint8

	sensorsMu sync.Mutex // guards the following
	sensors   map[sensorKey]*sensor
	counts    map[Kind]int // sensors per type
	lastSweep time.Time
}

// NewManager returns a Manager with no quotas; maxSensors bounds the
// sensors kept per quota type (DefaultMaxSensors when 0).
func NewManager(maxSensors int) *Manager {
	if maxSensors <= 0 {
		maxSensors = DefaultMaxSensors
	}
	return &Manager{
		maxSensors: maxSensors,
		quotas:     map[Entity]map[Kind]float64{},
		sensors:    map[sensorKey]*sensor{},
		counts:     map[Kind]int{},
	}
}

// kindIndex is kind's index in Kinds; -1 for none.
func kindIndex(kind Kind) int {
	for i, k := range Kinds {
		if k == kind {
			return i
		}
	}
	return -1
}

// Set replaces entity's quotas with values (an empty map removes them).
func (m *Manager) Set(entity Entity, values map[Kind]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(values) == 0 {
		delete(m.quotas, entity)
	} else {
		copied := make(map[Kind]float64, len(values))
		for k, v := range values {
			copied[k] = v
		}
		m.quotas[entity] = copied
	}
	m.refreshEnabledLocked()
}

// Replace replaces every entity's quotas (a full reload).
func (m *Manager) Replace(all map[Entity]map[Kind]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.quotas = map[Entity]map[Kind]float64{}
	for e, values := range all {
		if len(values) > 0 {
			m.quotas[e] = values
		}
	}
	m.refreshEnabledLocked()
}

// refreshEnabledLocked recomputes enabled and shapes from quotas.
func (m *Manager) refreshEnabledLocked() {
	m.shapes = [4]uint8{}
	for e, values := range m.quotas {
		for k := range values {
			if i := kindIndex(k); i >= 0 {
				m.shapes[i] |= 1 << position(e)
			}
		}
	}
	for i, shape := range m.shapes {
		m.enabled[i].Store(shape != 0)
	}
}

// position is the precedence position (candidate) at which e can match.
func position(e Entity) int {
	for p := 0; p < positions; p++ {
		match, _ := candidate(p, "name", "name") // a probe: not Default

		if match.HasUser == e.HasUser && match.HasClientID == e.HasClientID &&
			(match.User == Default) == (e.User == Default) && (match.ClientID == Default) == (e.ClientID == Default) {
			return p
		}
	}
	return positions - 1 // unreachable: the positions cover every shape
}

// Enabled implements Switch: whether any entity has a quota of kind.
func (m *Manager) Enabled(kind Kind) bool {
	i := kindIndex(kind)
	return i >= 0 && m.enabled[i].Load()
}

// Quotas returns a copy of every entity's quotas.
func (m *Manager) Quotas() map[Entity]map[Kind]float64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[Entity]map[Kind]float64, len(m.quotas))
	for e, values := range m.quotas {
		copied := make(map[Kind]float64, len(values))
		for k, v := range values {
			copied[k] = v
		}
		out[e] = copied
	}
	return out
}

// Resolve returns the quota of kind that applies to (user, clientID)
// (raw names) and the entity its usage is recorded under; ok is false
// when no quota applies.
func (m *Manager) Resolve(kind Kind, user, clientID string) (bound float64, key Entity, ok bool) {
	bound, _, key, ok = m.resolve(kind, Sanitize(user), Sanitize(clientID))
	return bound, key, ok
}

// resolve is Resolve over sanitized names, with the entity matched.
func (m *Manager) resolve(kind Kind, user, clientID string) (bound float64, match, key Entity, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	shape := m.shapes[kindIndex(kind)]
	for p := 0; p < positions; p++ {
		if shape&(1<<p) == 0 {
			continue
		}
		match, key := candidate(p, user, clientID)
		if v, ok := m.quotas[match][kind]; ok {
			return v, match, key, true
		}
	}
	return 0, Entity{}, Entity{}, false
}

// Record implements Limiter: Kafka's record-then-check. A
// request_percentage value is handler time in nanoseconds, counted as
// percent of a second (ClientRequestQuotaManager.nanosToPercentage), into
// Kafka's sampled Rate: when the rate is then over the quota, the throttle
// is what brings it back under (QuotaUtils.throttleTime), capped at one
// window as Kafka caps it.
//
// Byte rates and controller_mutation_rate go into KIP-599's token bucket
// (Kafka's TokenBucket, a burst of the quota × WindowNum × WindowSize),
// taken unconditionally, and the throttle is how long until the bucket is
// back at zero. For mutations that is Kafka's
// PermissiveControllerMutationQuota, for requests too old to be refused
// (CreateTopics before v6, CreatePartitions before v3, DeleteTopics
// before v5). For byte rates Kafka uses the sampled Rate, which KIP-599
// replaced for mutations because a large sample holds the rate over the
// quota until it expires: a client producing or fetching flat out then
// sends its whole window's allowance (11 MB at 1 MB/s) at once every
// WindowNum windows and next to nothing between, so over 30 s its rate
// is some 20% under or 15% over the quota, as it holds 2 or 3 bursts.
// The bucket allows the same first burst and the same long-run rate, and
// after the burst holds the client at the quota.
func (m *Manager) Record(kind Kind, user, clientID string, value float64, now time.Time) time.Duration {
	i := kindIndex(kind)
	if i < 0 || !m.enabled[i].Load() {
		return 0
	}
	bound, match, key, ok := m.resolve(kind, Sanitize(user), Sanitize(clientID))
	if !ok {
		return 0
	}
	m.sensorsMu.Lock()
	defer m.sensorsMu.Unlock()
	s := m.sensorLocked(kind, match, key, now)
	var d time.Duration
	switch kind {
	case RequestPercentage:
		s.rate.record(value*100/float64(time.Second), now)
		d = throttle(s.rate.measure(now), bound, s.rate.windowSize(now), WindowSize)
	default:
		if kind != ControllerMutationRate {
			// A byte rate is measured for Usage too; the bucket decides.
			s.rate.record(value, now)
		}
		s.bucket.refill(bound, now)
		s.bucket.tokens -= value
		d = s.bucket.wait(bound)
	}
	s.noteThrottle(d, now)
	return d
}

// TryMutate implements Limiter with KIP-599's token bucket: a request is
// admitted while the bucket is at zero or above, and takes all its n
// tokens even when that leaves it below zero; the next is refused, with
// the time until the bucket is back at zero.
func (m *Manager) TryMutate(user, clientID string, n int, now time.Time) (time.Duration, bool) {
	if !m.enabled[kindIndex(ControllerMutationRate)].Load() {
		return 0, true
	}
	bound, match, key, ok := m.resolve(ControllerMutationRate, Sanitize(user), Sanitize(clientID))
	if !ok {
		return 0, true
	}
	m.sensorsMu.Lock()
	defer m.sensorsMu.Unlock()
	s := m.sensorLocked(ControllerMutationRate, match, key, now)
	d, ok := s.bucket.take(bound, float64(n), now)
	s.noteThrottle(d, now)
	return d, ok
}

// sensorLocked returns the sensor of (kind, key), creating it; match is
// the entity whose quota applies. Sensors idle for InactiveExpiry are
// dropped (swept once a minute). Only defaults make sensors for entities
// nobody configured, so only they can be flooded: when maxSensors of a
// type exist already, a new user or client under a default records into
// the default's own sensor instead of one of its own. The flood then
// shares one quota (throttled together, never less than each would be),
// and sensors stay at most maxSensors plus the configured entities.
func (m *Manager) sensorLocked(kind Kind, match, key Entity, now time.Time) *sensor {
	if now.Sub(m.lastSweep) >= sweepEvery {
		m.sweepLocked(now)
	}
	sk := sensorKey{kind, key}
	s := m.sensors[sk]
	if s == nil && key != match && m.counts[kind] >= m.maxSensors {
		sk = sensorKey{kind, match}
		s = m.sensors[sk]
	}
	if s == nil {
		s = &sensor{}
		m.sensors[sk] = s
		m.counts[kind]++
	}
	s.last, s.match = now, match
	return s
}

// noteThrottle counts a throttle given, for Usage; nothing for none.
func (s *sensor) noteThrottle(d time.Duration, now time.Time) {
	if d > 0 {
		s.throttled.record(d.Seconds(), now)
	}
}

// sweepLocked drops sensors idle for InactiveExpiry.
func (m *Manager) sweepLocked(now time.Time) {
	m.lastSweep = now
	for k, s := range m.sensors {
		if now.Sub(s.last) >= InactiveExpiry {
			delete(m.sensors, k)
			m.counts[k.kind]--
		}
	}
}

// Sensors is the number of sensors held, for tests and metrics.
func (m *Manager) Sensors() int {
	m.sensorsMu.Lock()
	defer m.sensorsMu.Unlock()
	return len(m.sensors)
}
