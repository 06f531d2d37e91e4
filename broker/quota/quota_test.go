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
// testQuotaViolation: a 500 B/s quota, 400 bytes a second for ten
// seconds is within it; 2300 more half a second later make
// (4000+2300)/10.5 s = 600 B/s, throttled (600-500)/500 × 10.5 s = 2100 ms.
func TestByteRateThrottle(t *testing.T) {
	t.Parallel()
	m := NewManager(0)
	m.Set(ClientEntity(Default), map[Kind]float64{ProducerByteRate: 500})
	now := t0
	for i := 0; i < 10; i++ {
		if d := m.Record(ProducerByteRate, "ANONYMOUS", "unknown", 400, now); d != 0 {
			t.Fatalf("second %d: throttled %v within the quota", i, d)
		}
		now = now.Add(time.Second)
	}
	now = now.Add(500 * time.Millisecond)
	if d := m.Record(ProducerByteRate, "ANONYMOUS", "unknown", 2300, now); d != 2100*time.Millisecond {
		t.Fatalf("throttled %v, want 2100ms", d)
	}
	// Another client has its own sensor under the default.
	if d := m.Record(ProducerByteRate, "ANONYMOUS", "other", 400, now); d != 0 {
		t.Fatalf("another client throttled %v", d)
	}
	// Samples older than 11 windows are forgotten: after a quiet 11 s
	// the same client is within its quota again.
	if d := m.Record(ProducerByteRate, "ANONYMOUS", "unknown", 400, now.Add(11*time.Second)); d != 0 {
		t.Fatalf("throttled %v after the window passed", d)
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

	// The 47 beyond the bound share one sensor: 4700 B over the 10 s
	// minimum window is 470 B/s; 47 more clients make it 940, one more
	// puts it over.
	for i := 0; i < 58; i++ {
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
