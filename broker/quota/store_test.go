package quota

import (
	"encoding/json"
	"testing"
	"time"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/broker/users"
	"millrace/internal/waitfor"
)

func openServer(t *testing.T) *embedded.Server {
	t.Helper()
	srv, err := embedded.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func session(t *testing.T, srv *embedded.Server) coord.Store {
	t.Helper()
	s, err := srv.Session()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func nodeJSON(t *testing.T, s coord.Store, path string) map[string]any {
	t.Helper()
	data, _, err := s.Get(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s is %q: %v", path, data, err)
	}
	return v
}

// TestStoreLayout: quotas land in Kafka's znodes and format, share a
// user's node with its SCRAM credentials without losing either, and
// every write leaves Kafka's version 2 change notification.
func TestStoreLayout(t *testing.T) {
	t.Parallel()
	s := session(t, openServer(t))
	cred, err := users.NewCredential(users.SCRAMSHA256, "pencil", users.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Upsert(s, "al ice", cred); err != nil {
		t.Fatal(err)
	}
	alice := UserEntity(Sanitize("al ice"))
	if err := Alter(s, alice, map[Kind]float64{ProducerByteRate: 1048576, RequestPercentage: 12.5}, nil); err != nil {
		t.Fatal(err)
	}
	got := nodeJSON(t, s, "/config/users/al%20ice")
	config := got["config"].(map[string]any)
	if got["version"] != 1.0 || config["producer_byte_rate"] != "1048576" || config["request_percentage"] != "12.5" || config[users.SCRAMSHA256] == nil {
		t.Fatalf("user node %v", got)
	}
	// A credential written after the quota keeps the quota.
	if err := users.Upsert(s, "al ice", cred); err != nil {
		t.Fatal(err)
	}
	if v, err := Read(s, alice); err != nil || v[ProducerByteRate] != 1048576 {
		t.Fatalf("quota after a credential write: %v %v", v, err)
	}
	// Removing the quotas keeps the credential.
	if err := Alter(s, alice, nil, []Kind{ProducerByteRate, RequestPercentage}); err != nil {
		t.Fatal(err)
	}
	if _, err := users.Get(s, "al ice"); err != nil {
		t.Fatalf("credential after removing the quotas: %v", err)
	}

	for _, e := range []Entity{ClientEntity("app"), ClientEntity(Default), UserClientEntity("bob", "app"), UserClientEntity(Default, Default)} {
		if err := Alter(s, e, map[Kind]float64{ConsumerByteRate: 2048}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/config/clients/app", "/config/clients/<default>", "/config/users/bob/clients/app", "/config/users/<default>/clients/<default>"} {
		if c := nodeJSON(t, s, p)["config"].(map[string]any); c["consumer_byte_rate"] != "2048" {
			t.Errorf("%s: %v", p, c)
		}
	}
	all, err := List(s)
	if err != nil || len(all) != 4 {
		t.Fatalf("listed %v (%v)", all, err)
	}
	names, err := notifications(s)
	if err != nil || len(names) == 0 {
		t.Fatal(names, err)
	}
	last := nodeJSON(t, s, ChangesPath+"/"+names[len(names)-1])
	if last["version"] != 2.0 || last["entity_path"] != "users/<default>/clients/<default>" {
		t.Fatalf("last notification %v", last)
	}
	// Deleting a user+client quota leaves no empty nodes behind.
	if err := Alter(s, UserClientEntity("bob", "app"), nil, []Kind{ConsumerByteRate}); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := s.Exists("/config/users/bob"); ok {
		t.Fatal("/config/users/bob left behind")
	}
}

// TestFollowers: two brokers' Managers on one store; a change written
// through either session reaches the other within 2 s, removals too.
func TestFollowers(t *testing.T) {
	t.Parallel()
	srv := openServer(t)
	a, b := session(t, srv), session(t, srv)
	if err := Alter(a, ClientEntity(Default), map[Kind]float64{ProducerByteRate: 100}, nil); err != nil {
		t.Fatal(err)
	}
	managers := []*Manager{NewManager(0), NewManager(0)}
	for i, s := range []coord.Store{a, b} {
		f := NewFollower(s, managers[i], nil)
		f.Start()
		t.Cleanup(func() { f.Close() })
	}
	for _, m := range managers {
		if bound, _, ok := m.Resolve(ProducerByteRate, "u", "c"); !ok || bound != 100 {
			t.Fatalf("the first load missed the default: %v %v", bound, ok)
		}
	}
	has := func(m *Manager, kind Kind, want float64) func() bool {
		return func() bool {
			bound, _, ok := m.Resolve(kind, "alice", "app")
			return ok && bound == want || !ok && want == 0
		}
	}
	if err := Alter(a, UserClientEntity("alice", "app"), map[Kind]float64{ProducerByteRate: 5}, nil); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 2*time.Second, "the change reaches the other broker", has(managers[1], ProducerByteRate, 5))
	if err := Alter(b, UserClientEntity("alice", "app"), nil, []Kind{ProducerByteRate}); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 2*time.Second, "the removal reaches the first broker", has(managers[0], ProducerByteRate, 100))
	if err := Alter(b, ClientEntity(Default), nil, []Kind{ProducerByteRate}); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 2*time.Second, "the last quota's removal", has(managers[0], ProducerByteRate, 0))
	if managers[0].enabled[kindIndex(ProducerByteRate)].Load() {
		t.Fatal("quotas still on with none configured")
	}
}

// TestIPStoreLayout: IP quotas land where Kafka keeps them,
// /config/ips/<ip> and /config/ips/<default>, in its entity config format
// with the INT written whole, each write with a version 2 notification
// naming "ips/<ip>"; a follower's manager applies them, the address's own
// over the default (ConnectionQuotas.connectionRateForIp); a node holding
// a client quota or named in another spelling of an address is not read.
func TestIPStoreLayout(t *testing.T) {
	t.Parallel()
	srv := openServer(t)
	s := session(t, srv)
	m := NewManager(0)
	f := NewFollower(session(t, srv), m, nil)
	f.Start()
	t.Cleanup(func() { f.Close() })

	if err := Alter(s, IPEntity("127.0.0.1"), map[Kind]float64{ConnectionCreationRate: 10}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Alter(s, IPEntity(Default), map[Kind]float64{ConnectionCreationRate: 100}, nil); err != nil {
		t.Fatal(err)
	}
	if c := nodeJSON(t, s, "/config/ips/127.0.0.1"); c["version"] != 1.0 || c["config"].(map[string]any)["connection_creation_rate"] != "10" {
		t.Fatalf("/config/ips/127.0.0.1: %v", c)
	}
	if c := nodeJSON(t, s, "/config/ips/<default>")["config"].(map[string]any); c["connection_creation_rate"] != "100" {
		t.Fatalf("/config/ips/<default>: %v", c)
	}
	names, err := notifications(s)
	if err != nil || len(names) != 2 {
		t.Fatal(names, err)
	}
	if n := nodeJSON(t, s, ChangesPath+"/"+names[0]); n["version"] != 2.0 || n["entity_path"] != "ips/127.0.0.1" {
		t.Fatalf("notification %v", n)
	}
	rate := func(ip string, want int, wantOK bool) func() bool {
		return func() bool { r, ok := m.ConnectionCreationRate(ip); return r == want && ok == wantOK }
	}
	waitfor.Until(t, 2*time.Second, "127.0.0.1 at its own rate", rate("127.0.0.1", 10, true))
	waitfor.Until(t, 2*time.Second, "another address at the default's", rate("10.0.0.9", 100, true))

	// Written by hand: a client quota in an ip node, and a node named in
	// a spelling no connection's address has.
	if _, err := s.Create("/config/ips/0:0::2", []byte(`{"version":1,"config":{"connection_creation_rate":"1"}}`), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set("/config/ips/127.0.0.1", []byte(`{"version":1,"config":{"connection_creation_rate":"10","producer_byte_rate":"5"}}`), coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	all, err := List(s)
	if err != nil || len(all) != 2 || len(all[IPEntity("127.0.0.1")]) != 1 || all[IPEntity(Default)][ConnectionCreationRate] != 100 {
		t.Fatalf("listed %v (%v): the two ip entities, each with connection_creation_rate only", all, err)
	}

	if err := Alter(s, IPEntity("127.0.0.1"), nil, []Kind{ConnectionCreationRate}); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 2*time.Second, "127.0.0.1 back at the default", rate("127.0.0.1", 100, true))
	if err := Alter(s, IPEntity(Default), nil, []Kind{ConnectionCreationRate}); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := s.Exists("/config/ips/<default>"); ok {
		t.Fatal("/config/ips/<default> left behind with no quota")
	}
	waitfor.Until(t, 2*time.Second, "no ip quota left", rate("127.0.0.1", 0, false))
}
