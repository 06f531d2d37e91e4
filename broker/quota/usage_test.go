package quota

import (
	"testing"
	"time"
)

// TestUsage: a sensor reports its rate, its quota and the throttle time it
// gave, under its key (the user a default applies to); entities idle
// longer than within, and entities whose quota was removed, are left out.
func TestUsage(t *testing.T) {
	t.Parallel()
	m := NewManager(0)
	m.Set(UserEntity(Default), map[Kind]float64{ConsumerByteRate: 100})
	m.Set(ClientEntity("idle"), map[Kind]float64{ProducerByteRate: 100})
	m.Set(ClientEntity("gone"), map[Kind]float64{ProducerByteRate: 100})
	m.Record(ProducerByteRate, "", "idle", 10, t0)
	m.Record(ProducerByteRate, "", "gone", 10, t0.Add(time.Minute))
	m.Set(ClientEntity("gone"), nil)
	// 2,000 bytes from a full bucket of 100 × 11 s = 1,100 leave 900
	// owed at 100 bytes/s: 9 s of throttle. The rate measured is 2,000
	// bytes over the minimum window of 10 s.
	now := t0.Add(time.Minute)
	if d := m.Record(ConsumerByteRate, "alice", "app", 2000, now); d != 9*time.Second {
		t.Fatalf("throttle %v, want 9s", d)
	}
	got := m.Usage(now, 30*time.Second)
	if len(got) != 1 {
		t.Fatalf("usage of %d sensors, want alice's only: %+v", len(got), got)
	}
	u := got[0]
	// 9 s of throttle over the minimum window of 10 s: 0.9 s per second.
	if u.Kind != ConsumerByteRate || u.Entity != UserEntity("alice") || u.Quota != 100 || u.Rate != 200 || u.Throttle != 0.9 || !u.Last.Equal(now) {
		t.Fatalf("usage %+v", u)
	}
}

// TestUsageOfMutations: controller_mutation_rate's usage is what its
// bucket lacks of full over the burst, so a bucket drained to zero reads
// as exactly the quota; a refused mutation counts its throttle.
func TestUsageOfMutations(t *testing.T) {
	t.Parallel()
	m := NewManager(0)
	m.Set(ClientEntity(Default), map[Kind]float64{ControllerMutationRate: 2})
	// A full bucket of 2 × 11 = 22 tokens: take them all, then be refused.
	if _, ok := m.TryMutate("", "admin", 22, t0); !ok {
		t.Fatal("a full bucket refused its burst")
	}
	if _, ok := m.TryMutate("", "admin", 1, t0); !ok {
		t.Fatal("a bucket at zero refused (KIP-599 admits at zero)")
	}
	d, ok := m.TryMutate("", "admin", 1, t0)
	if ok || d != 500*time.Millisecond {
		t.Fatalf("below zero: ok %v, throttle %v; want refused for 500ms", ok, d)
	}
	got := m.Usage(t0, time.Minute)
	if len(got) != 1 {
		t.Fatalf("usage %+v", got)
	}
	// 23 tokens lacking over 11 s; 0.5 s of throttle over 10 s.
	if u := got[0]; u.Rate != 23.0/11 || u.Throttle != 0.05 || u.Entity != ClientEntity("admin") {
		t.Fatalf("usage %+v", u)
	}
}
