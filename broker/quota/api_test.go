package quota

import (
	"errors"
	"math"
	"testing"
)

func name(s string) *string { return &s }

// TestFilterMatches: KIP-546's match rules. A component matches an entity
// with that type: exact by name, default only the default, any either;
// without strict an entity may have more types than the filter names
// (so {user any} includes user+client-id entities), with strict not.
func TestFilterMatches(t *testing.T) {
	t.Parallel()
	entities := []Entity{
		UserEntity("alice"), UserEntity(Default), ClientEntity("app"), ClientEntity(Default),
		UserClientEntity("alice", "app"), UserClientEntity(Default, Default),
	}
	cases := []struct {
		name   string
		filter Filter
		want   []Entity
	}{
		{"no components: everything", Filter{}, entities},
		{"no components, strict: nothing", Filter{Strict: true}, nil},
		{"exact user", Filter{Components: []FilterComponent{{Type: TypeUser, Match: MatchExact, Name: name("alice")}}},
			[]Entity{UserEntity("alice"), UserClientEntity("alice", "app")}},
		{"exact user, strict", Filter{Strict: true, Components: []FilterComponent{{Type: TypeUser, Match: MatchExact, Name: name("alice")}}},
			[]Entity{UserEntity("alice")}},
		{"default user", Filter{Components: []FilterComponent{{Type: TypeUser, Match: MatchDefault}}},
			[]Entity{UserEntity(Default), UserClientEntity(Default, Default)}},
		{"any client-id, strict", Filter{Strict: true, Components: []FilterComponent{{Type: TypeClientID, Match: MatchAny}}},
			[]Entity{ClientEntity("app"), ClientEntity(Default)}},
		{"any user and any client-id", Filter{Components: []FilterComponent{{Type: TypeUser, Match: MatchAny}, {Type: TypeClientID, Match: MatchAny}}},
			[]Entity{UserClientEntity("alice", "app"), UserClientEntity(Default, Default)}},
		{"an exact name never matches a default", Filter{Components: []FilterComponent{{Type: TypeUser, Match: MatchExact, Name: name(Default)}}}, nil},
		{"ip: none stored", Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchAny}}}, nil},
	}
	for _, c := range cases {
		if err := c.filter.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []Entity
		for _, e := range entities {
			if c.filter.Matches(e) {
				got = append(got, e)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: matched %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: matched %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

// TestRequestChecks: what AlterClientQuotas refuses (INVALID_REQUEST in
// Kafka's ZooKeeper-mode admin manager): entity shapes, unknown keys,
// byte rates that are not whole (Kafka types them LONG), negative values.
func TestRequestChecks(t *testing.T) {
	t.Parallel()
	entities := []struct {
		components []Component
		want       Entity
		ok         bool
	}{
		{[]Component{{TypeUser, name("a b")}}, UserEntity("a%20b"), true},
		{[]Component{{TypeClientID, nil}, {TypeUser, name("u")}}, UserClientEntity("u", Default), true},
		{nil, Entity{}, false},
		{[]Component{{TypeUser, name("a")}, {TypeUser, nil}}, Entity{}, false},
		{[]Component{{TypeIP, name("1.2.3.4")}}, Entity{}, false},
		{[]Component{{"group", name("g")}}, Entity{}, false},
		{[]Component{{TypeClientID, name("")}}, Entity{}, false},
	}
	for _, c := range entities {
		got, err := ParseEntity(c.components)
		if c.ok && (err != nil || got != c.want) || !c.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v %v", c.components, got, err)
		}
	}
	values := []struct {
		key   string
		value float64
		ok    bool
	}{
		{"producer_byte_rate", 1048576, true},
		{"producer_byte_rate", 0, true},
		{"consumer_byte_rate", 1.5, false},
		{"request_percentage", 12.5, true},
		{"controller_mutation_rate", -1, false},
		{"request_percentage", math.NaN(), false},
		{"producer_byte_rate", math.Inf(1), false},
		{"connection_creation_rate", 1, false},
		{"SCRAM-SHA-256", 1, false},
	}
	for _, v := range values {
		if _, err := CheckValue(v.key, v.value); (err == nil) != v.ok {
			t.Errorf("%s=%v: %v", v.key, v.value, err)
		}
	}
	if _, _, err := ParseOps([]Op{{Key: "request_percentage", Value: 1}, {Key: "request_percentage", Remove: true}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a key twice: %v", err)
	}
	set, remove, err := ParseOps([]Op{{Key: "producer_byte_rate", Value: 10}, {Key: "consumer_byte_rate", Value: -5, Remove: true}})
	if err != nil || set[ProducerByteRate] != 10 || len(remove) != 1 || remove[0] != ConsumerByteRate {
		t.Errorf("ops: %v %v %v (a removal's value is ignored)", set, remove, err)
	}
}
