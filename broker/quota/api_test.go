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
// (so {user any} includes user+client-id entities), with strict not. IP
// entities (KIP-612) have only the ip type, so a filter naming a user or a
// client-id never lists them, and one naming an ip lists nothing else.
func TestFilterMatches(t *testing.T) {
	t.Parallel()
	entities := []Entity{
		UserEntity("alice"), UserEntity(Default), ClientEntity("app"), ClientEntity(Default),
		UserClientEntity("alice", "app"), UserClientEntity(Default, Default),
		IPEntity("10.0.0.1"), IPEntity("::1"), IPEntity(Default),
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
		{"any ip: ip entities only", Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchAny}}},
			[]Entity{IPEntity("10.0.0.1"), IPEntity("::1"), IPEntity(Default)}},
		{"exact ip, another spelling of the address", Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchExact, Name: name("0:0::1")}}},
			[]Entity{IPEntity("::1")}},
		{"default ip, strict", Filter{Strict: true, Components: []FilterComponent{{Type: TypeIP, Match: MatchDefault}}},
			[]Entity{IPEntity(Default)}},
		{"any user: no ip entity", Filter{Components: []FilterComponent{{Type: TypeUser, Match: MatchAny}}},
			[]Entity{UserEntity("alice"), UserEntity(Default), UserClientEntity("alice", "app"), UserClientEntity(Default, Default)}},
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
		{"SCRAM-SHA-256", 1, false},
	}
	for _, v := range values {
		if _, err := CheckValue(v.key, v.value); (err == nil) != v.ok {
			t.Errorf("%s=%v: %v", v.key, v.value, err)
		}
	}
	if _, _, err := ParseOps(UserEntity("u"), []Op{{Key: "request_percentage", Value: 1}, {Key: "request_percentage", Remove: true}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a key twice: %v", err)
	}
	set, remove, err := ParseOps(UserEntity("u"), []Op{{Key: "producer_byte_rate", Value: 10}, {Key: "consumer_byte_rate", Value: -5, Remove: true}})
	if err != nil || set[ProducerByteRate] != 10 || len(remove) != 1 || remove[0] != ConsumerByteRate {
		t.Errorf("ops: %v %v %v (a removal's value is ignored)", set, remove, err)
	}
}

// TestIPEntityRules: KIP-612's ip entity as Kafka's quota APIs take it
// (ClientQuotaControlManager.configKeysForEntityType and
// validateQuotaKeyValue, ClientQuotasImage.describe): an ip alone, never
// with a user or a client-id; its name an address or null for the
// default (millrace resolves no host names, and spells the address one
// way); its one key connection_creation_rate, an INT, which no user or
// client-id entity may have.
func TestIPEntityRules(t *testing.T) {
	t.Parallel()
	entities := []struct {
		rule       string
		components []Component
		want       Entity
		ok         bool
	}{
		{"an IPv4 address", []Component{{TypeIP, name("10.0.0.1")}}, IPEntity("10.0.0.1"), true},
		{"null is the default ip", []Component{{TypeIP, nil}}, IPEntity(Default), true},
		{"an IPv6 address, spelled canonically", []Component{{TypeIP, name("0:0:0:0:0:0:0:1")}}, IPEntity("::1"), true},
		{"an IPv4-mapped address is the IPv4 one", []Component{{TypeIP, name("::ffff:10.0.0.1")}}, IPEntity("10.0.0.1"), true},
		{"not combined with a user", []Component{{TypeIP, name("10.0.0.1")}, {TypeUser, name("u")}}, Entity{}, false},
		{"not combined with a client-id", []Component{{TypeClientID, nil}, {TypeIP, nil}}, Entity{}, false},
		{"ip twice", []Component{{TypeIP, name("10.0.0.1")}, {TypeIP, nil}}, Entity{}, false},
		{"a host name is not resolved", []Component{{TypeIP, name("example.invalid")}}, Entity{}, false},
		{"an address with a port is not an address", []Component{{TypeIP, name("10.0.0.1:9092")}}, Entity{}, false},
		{"an empty name", []Component{{TypeIP, name("")}}, Entity{}, false},
		{"an IPv6 zone, which no peer address has", []Component{{TypeIP, name("fe80::1%eth0")}}, Entity{}, false},
	}
	for _, c := range entities {
		got, err := ParseEntity(c.components)
		if c.ok && (err != nil || got != c.want) || !c.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v %v", c.rule, got, err)
		}
	}
	ip, user := IPEntity("10.0.0.1"), UserEntity("u")
	values := []struct {
		rule   string
		entity Entity
		key    string
		value  float64
		ok     bool
	}{
		{"an ip's rate", ip, "connection_creation_rate", 10, true},
		{"0 is a valid INT at least 0", ip, "connection_creation_rate", 0, true},
		{"the default, Int.MaxValue", ip, "connection_creation_rate", math.MaxInt32, true},
		{"beyond an INT", ip, "connection_creation_rate", math.MaxInt32 + 1, false},
		{"not a whole number (an INT)", ip, "connection_creation_rate", 2.5, false},
		{"negative", ip, "connection_creation_rate", -1, false},
		{"a client quota on an ip", ip, "producer_byte_rate", 1024, false},
		{"an ip quota on a user", user, "connection_creation_rate", 10, false},
		{"an ip quota on a client-id", ClientEntity(Default), "connection_creation_rate", 10, false},
	}
	for _, v := range values {
		if _, err := v.entity.Check(v.key, v.value); (err == nil) != v.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %s=%v on %s: %v", v.rule, v.key, v.value, v.entity, err)
		}
	}
	if _, _, err := ParseOps(ip, []Op{{Key: "request_percentage", Remove: true}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("removing a client quota from an ip: %v, want invalid", err)
	}
	filters := []struct {
		rule   string
		filter Filter
		ok     bool
	}{
		{"ip alone", Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchAny}}}, true},
		{"ip with user", Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchDefault}, {Type: TypeUser, Match: MatchAny}}}, false},
		{"ip with client-id", Filter{Components: []FilterComponent{{Type: TypeClientID, Match: MatchExact, Name: name("c")}, {Type: TypeIP, Match: MatchAny}}}, false},
		{"exact ip without a name", Filter{Components: []FilterComponent{{Type: TypeIP, Match: MatchExact}}}, false},
	}
	for _, f := range filters {
		if err := f.filter.Validate(); (err == nil) != f.ok {
			t.Errorf("%s: %v", f.rule, err)
		}
	}
	back := IPEntity(Default).Components()
	if len(back) != 1 || back[0].Type != TypeIP || back[0].Name != nil {
		t.Errorf("the default ip's components: %+v, want one ip with a null name", back)
	}
}
