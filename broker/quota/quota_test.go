package quota

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// TestPrecedence: with a quota at every entity, a client gets the most
// specific, and removing them one by one walks Kafka's order
// (DefaultQuotaCallback; "Quota configs" in Kafka's docs). Each match
// also has its sensor key: defaults apply per user or client, a user's
// quota is shared by the user's clients.
func TestPrecedence(t *testing.T) {
	t.Parallel()
	const u, c = "alice", "app"
	steps := []struct {
		entity Entity
		key    Entity
	}{
		{UserClientEntity(u, c), UserClientEntity(u, c)},             // /config/users/<user>/clients/<client-id>
		{UserClientEntity(u, Default), UserClientEntity(u, c)},       // /config/users/<user>/clients/<default>
		{UserEntity(u), UserEntity(u)},                               // /config/users/<user>
		{UserClientEntity(Default, c), UserClientEntity(u, c)},       // /config/users/<default>/clients/<client-id>
		{UserClientEntity(Default, Default), UserClientEntity(u, c)}, // /config/users/<default>/clients/<default>
		{UserEntity(Default), UserEntity(u)},                         // /config/users/<default>
		{ClientEntity(c), ClientEntity(c)},                           // /config/clients/<client-id>
		{ClientEntity(Default), ClientEntity(c)},                     // /config/clients/<default>
	}
	m := NewManager(0)
	for i, s := range steps {
		m.Set(s.entity, map[Kind]float64{ProducerByteRate: float64(i + 1)})
	}
	// Another type's quota does not shadow: each type resolves alone, as
	// each of Kafka's quota managers keeps its own overrides.
	m.Set(UserClientEntity(u, c), map[Kind]float64{ConsumerByteRate: 99})
	if bound, _, ok := m.Resolve(ProducerByteRate, u, c); !ok || bound != 2 {
		t.Fatalf("a consumer quota at user+client shadowed the producer quota: %v %v", bound, ok)
	}
	m.Set(UserClientEntity(u, c), map[Kind]float64{ProducerByteRate: 1})
	for i, s := range steps {
		bound, key, ok := m.Resolve(ProducerByteRate, u, c)
		if !ok || bound != float64(i+1) || key != s.key {
			t.Fatalf("with %s the most specific: got %v from key %s (ok %v), want %d from %s", s.entity, bound, key, ok, i+1, s.key)
		}
		m.Set(s.entity, nil)
	}
	if _, _, ok := m.Resolve(ProducerByteRate, u, c); ok {
		t.Fatal("a quota applies with none configured")
	}
}

// TestResolveSanitizes: entities are stored under sanitized names, so a
// user with characters Kafka escapes still matches its quota.
func TestResolveSanitizes(t *testing.T) {
	t.Parallel()
	m := NewManager(0)
	m.Set(UserEntity(Sanitize("CN=a b~c*")), map[Kind]float64{ConsumerByteRate: 7})
	if bound, _, ok := m.Resolve(ConsumerByteRate, "CN=a b~c*", "x"); !ok || bound != 7 {
		t.Fatalf("got %v %v", bound, ok)
	}
	// Kafka's Sanitizer: URL encoding, '*' as %2A, a space as %20, '~' as %7E.
	if got := Sanitize("CN=a b~c*"); got != "CN%3Da%20b%7Ec%2A" {
		t.Fatalf("sanitized as %q", got)
	}
	if got := Unsanitize("CN%3Da%20b%7Ec%2A"); got != "CN=a b~c*" {
		t.Fatalf("unsanitized as %q", got)
	}
}

// TestEntityPaths: the notification paths Kafka writes parse back.
func TestEntityPaths(t *testing.T) {
	t.Parallel()
	for _, e := range []Entity{UserEntity("alice"), UserEntity(Default), ClientEntity("app"), ClientEntity(Default),
		UserClientEntity("alice", "app"), UserClientEntity(Default, Default), UserClientEntity("alice", Default),
		IPEntity("10.0.0.1"), IPEntity("::1"), IPEntity(Default)} {
		got, ok := ParseEntityPath(e.Path())
		if !ok || got != e {
			t.Errorf("%q parsed as %v %v", e.Path(), got, ok)
		}
	}
	for _, p := range []string{"topics/x", "users", "users/alice/clients", "brokers/1", "users//clients/x", "clients/%zz", "ips/host.example", "ips/0:0::1", "ips/"} {
		if e, ok := ParseEntityPath(p); ok {
			t.Errorf("%q parsed as %v", p, e)
		}
	}
}

// TestByteRateThrottle is Kafka's ClientQuotaManagerTest
// TestByteRateThrottle: a byte rate is KIP-599's token bucket: a 500 B/s
// quota has a burst of 5500 B (11 windows of 1 s); a request may take it
// below zero and is throttled until it is back at zero.
func TestByteRateThrottle(t *testing.T) {
	t.Parallel()
	m := NewManager(0)
	m.Set(ClientEntity(Default), map[Kind]float64{ProducerByteRate: 500})
	steps := []struct {
		at     time.Duration
		bytes  float64
		want   time.Duration
		reason string
	}{
		{0, 5500, 0, "the whole burst at once: 5500 → 0"},
		{0, 1000, 2 * time.Second, "1000 over: 2 s at 500/s"},
		{2 * time.Second, 500, time.Second, "back at zero after 2 s, 500 more: 1 s"},
		{3 * time.Second, 400, 800 * time.Millisecond, "at the quota's pace, each request waits its own bytes' worth"},
	}
	for _, s := range steps {
		if d := m.Record(ProducerByteRate, "ANONYMOUS", "unknown", s.bytes, t0.Add(s.at)); d != s.want {
			t.Fatalf("%s: throttled %v, want %v", s.reason, d, s.want)
		}
	}
	// Another client has its own sensor under the default.
	if d := m.Record(ProducerByteRate, "ANONYMOUS", "other", 400, t0); d != 0 {
		t.Fatalf("another client throttled %v", d)
	}
	// The bucket refills to its burst, no further: after a quiet minute
	// the client may send 5500 again, and no more.
	later := t0.Add(time.Minute)
	if d := m.Record(ProducerByteRate, "ANONYMOUS", "unknown", 5500, later); d != 0 {
		t.Fatalf("throttled %v within the refilled burst", d)
	}
	if d := m.Record(ProducerByteRate, "ANONYMOUS", "unknown", 50, later); d != 100*time.Millisecond {
		t.Fatalf("throttled %v past the refilled burst, want 100ms", d)
	}
}

// TestByteRateFlatOut: a client that sends 64 KiB each time its throttle
// ends, as a KIP-219 client producing flat out does, is held at its
// 1 MiB/s quota within 5% over every 30 s after its first burst. (Over
// Kafka's sampled Rate the same client sends 11 MiB at once every 11 s
// and next to nothing between: a 30 s span holds 2 or 3 bursts.)
func TestByteRateFlatOut(t *testing.T) {
	t.Parallel()
	const quota, request = 1 << 20, 64 << 10
	m := NewManager(0)
	m.Set(ClientEntity("flat"), map[Kind]float64{ProducerByteRate: quota})
	type sent struct {
		at    time.Duration
		bytes float64
	}
	var log []sent
	for at := time.Duration(0); at < 2*time.Minute; {
		log = append(log, sent{at, request})
		at += m.Record(ProducerByteRate, "ANONYMOUS", "flat", request, t0.Add(at))
	}
	burst := float64(quota * WindowNum)
	var first float64
	for _, s := range log {
		if s.at > 0 {
			break
		}
		first += s.bytes
	}
	if first < burst || first > burst+request {
		t.Fatalf("the first burst was %v bytes, want the bucket's %v", first, burst)
	}
	for start := time.Second; start+30*time.Second <= 2*time.Minute; start += 7 * time.Second {
		var bytes float64
		for _, s := range log {
			if s.at >= start && s.at < start+30*time.Second {
				bytes += s.bytes
			}
		}
		if rate := bytes / 30; rate < 0.95*quota || rate > 1.05*quota {
			t.Errorf("%v to %v: %.0f B/s, want %d within 5%%", start, start+30*time.Second, rate, quota)
		}
	}
}

// TestThrottleFormula: QuotaUtilsTest's cases: at the quota nothing,
// 100 against 50 over 2 s is 2000 ms, and request_percentage is capped
// at one window (boundedThrottleTime).
func TestThrottleFormula(t *testing.T) {
	t.Parallel()
	cases := []struct {
		observed, bound float64
		window, max     time.Duration
		want            time.Duration
	}{
		{18.2, 18.2, 11 * time.Second, 0, 0},
		{10, 20.4, 11 * time.Second, 0, 0},
		{100, 50, 2 * time.Second, 0, 2000 * time.Millisecond},
		{1000, 50, 10 * time.Second, time.Second, time.Second},
		{1, 0, 10 * time.Second, time.Second, time.Second},
	}
	for _, c := range cases {
		if got := throttle(c.observed, c.bound, c.window, c.max); got != c.want {
			t.Errorf("throttle(%v, %v, %v, %v) = %v, want %v", c.observed, c.bound, c.window, c.max, got, c.want)
		}
	}
}

// TestRequestPercentage: handler time counts as percent of a second, so
// 1 s of handler time (100%) over the 10 s minimum window is 10%/s, at a
// 10% quota; more is throttled, at most one window.
func TestRequestPercentage(t *testing.T) {
	t.Parallel()
	m := NewManager(0)
	m.Set(UserEntity(Default), map[Kind]float64{RequestPercentage: 10})
	if d := m.Record(RequestPercentage, "bob", "c", float64(time.Second), t0); d != 0 {
		t.Fatalf("100%% over a 10 s window is 10%%/s, at the quota; throttled %v", d)
	}
	if d := m.Record(RequestPercentage, "bob", "c", float64(5*time.Second), t0); d != WindowSize {
		t.Fatalf("throttled %v, want the one-window cap", d)
	}
}

// TestControllerMutationBucket is KIP-599's token bucket: a 10/s quota
// has a burst of 110 (quota × 11 windows × 1 s); a request may take the
// bucket below zero once, the next is refused until it is back at zero,
// with the time that takes.
func TestControllerMutationBucket(t *testing.T) {
	t.Parallel()
	m := NewManager(0)
	m.Set(UserEntity("alice"), map[Kind]float64{ControllerMutationRate: 10})
	steps := []struct {
		at     time.Duration
		n      int
		ok     bool
		wait   time.Duration
		reason string
	}{
		{0, 100, true, 0, "within the burst: 110 → 10"},
		{0, 50, true, 0, "the bucket is at 10 ≥ 0: admitted, to -40"},
		{0, 1, false, 4 * time.Second, "below zero: refused, 40 tokens at 10/s"},
		{2 * time.Second, 1, false, 2 * time.Second, "refilled to -20"},
		{4 * time.Second, 1, true, 0, "back at zero: admitted"},
	}
	for _, s := range steps {
		wait, ok := m.TryMutate("alice", "any", s.n, t0.Add(s.at))
		if ok != s.ok || wait != s.wait {
			t.Fatalf("%s: got ok=%v wait=%v, want ok=%v wait=%v", s.reason, ok, wait, s.ok, s.wait)
		}
	}
	// The permissive form (KIP-599, old request versions) always takes
	// the tokens and only throttles: the last admitted request left the
	// bucket at -1, 29 more put it at -30, 3 s at 10/s.
	if d := m.Record(ControllerMutationRate, "alice", "any", 29, t0.Add(4*time.Second)); d != 3*time.Second {
		t.Fatalf("permissive mutations throttled %v, want 3s", d)
	}
	if _, ok := m.TryMutate("bob", "any", 1000, t0); !ok {
		t.Fatal("a user with no quota was refused")
	}
}

// TestNoQuotaIsFree: with no quota of a type configured, Record and
// TryMutate allocate nothing and never throttle, even while other types
// have quotas. (Not parallel: AllocsPerRun counts the whole process.)
func TestNoQuotaIsFree(t *testing.T) {
	m := NewManager(0)
	m.Set(ClientEntity(Default), map[Kind]float64{ConsumerByteRate: 1})
	allocs := testing.AllocsPerRun(100, func() {
		if m.Record(ProducerByteRate, "alice", "app", 1e9, t0) != 0 {
			t.Fatal("throttled without a quota")
		}
		if _, ok := m.TryMutate("alice", "app", 1e6, t0); !ok {
			t.Fatal("refused without a quota")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call with quotas off", allocs)
	}
	var limiter Limiter = m
	if sw, ok := limiter.(Switch); !ok || sw.Enabled(ProducerByteRate) || !sw.Enabled(ConsumerByteRate) {
		t.Fatal("the manager does not say which kinds are on")
	}
	if m.Sensors() != 0 {
		t.Fatalf("%d sensors with quotas off", m.Sensors())
	}
}

// TestSensorBounds: a flood of client IDs under a default quota keeps at
// most maxSensors sensors per type (the rest share one, so they are
// throttled together), and sensors idle for an hour are dropped.
func TestSensorBounds(t *testing.T) {
	t.Parallel()
	m := NewManager(3)
	m.Set(ClientEntity(Default), map[Kind]float64{ProducerByteRate: 1000})
	for i := 0; i < 50; i++ {
		m.Record(ProducerByteRate, "", "flood-"+string(rune('a'+i)), 100, t0)
	}
	if n := m.Sensors(); n != 4 {
		t.Fatalf("%d sensors for 50 clients with a bound of 3, want 3 and the default's shared one", n)
	}

	// The 47 beyond the bound share one sensor: 4700 B of its 11000 B
	// burst; 63 more clients take the rest, one more puts it below zero.
	for i := 0; i < 63; i++ {
		m.Record(ProducerByteRate, "", "more-"+string(rune('a'+i)), 100, t0)
	}
	if d := m.Record(ProducerByteRate, "", "last", 100, t0); d == 0 {
		t.Fatal("the clients beyond the bound are not throttled together")
	}
	// A configured client still gets a sensor of its own (configured
	// entities are bounded by what an operator stored): 100 B against its
	// 1000 B/s is within it, where the shared sensor is over.
	m.Set(ClientEntity("vip"), map[Kind]float64{ProducerByteRate: 1000})
	if d := m.Record(ProducerByteRate, "", "vip", 100, t0); d != 0 {
		t.Fatalf("the configured client shares the flood's sensor: throttled %v", d)
	}
	m.Record(ProducerByteRate, "", "late", 100, t0.Add(InactiveExpiry+sweepEvery))
	if n := m.Sensors(); n != 1 {
		t.Fatalf("%d sensors after an hour idle, want only the new one", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		m := NewManager(0)
		for i := 0; i < b.N; i++ {
			m.Record(ProducerByteRate, "alice", "app", 1000, t0)
		}
	})
	b.Run("on", func(b *testing.B) {
		m := NewManager(0)
		m.Set(ClientEntity(Default), map[Kind]float64{ProducerByteRate: 1e12})
		now := t0
		for i := 0; i < b.N; i++ {
			m.Record(ProducerByteRate, "alice", "app", 1000, now)
		}
	})
}
