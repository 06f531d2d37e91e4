package acl

import (
	"encoding/json"
	"testing"
	"time"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/internal/waitfor"
)

func openStore(t *testing.T) (*embedded.Server, func() coord.Store) {
	t.Helper()
	srv, err := embedded.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, func() coord.Store {
		s, err := srv.Session()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func openCache(t *testing.T, s coord.Store) *Cache {
	t.Helper()
	c, err := OpenCache(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestStoreLayout checks that ACLs land where Kafka keeps them, in Kafka's
// JSON, with a notification per change.
func TestStoreLayout(t *testing.T) {
	_, session := openStore(t)
	s := session()
	lit := Binding{Pattern{Topic, "orders", Literal}, Entry{"User:alice", "*", Read, Allow}}
	pre := Binding{Pattern{Group, "sink-", Prefixed}, Entry{"User:bob", "10.1.2.3", Describe, Deny}}
	for i, err := range Add(s, []Binding{lit, pre, lit}) {
		if err != nil {
			t.Fatalf("binding %d: %v", i, err)
		}
	}
	data, _, err := s.Get("/kafka-acl/Topic/orders")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}`
	if string(data) != want {
		t.Errorf("literal node = %s, want %s (the same ACL added twice is stored once)", data, want)
	}
	data, _, err = s.Get("/kafka-acl-extended/prefixed/Group/sink-")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"version":1,"acls":[{"principal":"User:bob","permissionType":"Deny","operation":"Describe","host":"10.1.2.3"}]}`; string(data) != want {
		t.Errorf("prefixed node = %s, want %s", data, want)
	}
	names, err := s.Children("/kafka-acl-changes")
	if err != nil || len(names) != 1 {
		t.Fatalf("literal notifications = %v, %v; want one (the repeated add changed nothing)", names, err)
	}
	if data, _, _ := s.Get("/kafka-acl-changes/" + names[0]); string(data) != "Topic:orders" {
		t.Errorf("literal notification = %q", data)
	}
	names, err = s.Children("/kafka-acl-extended-changes")
	if err != nil || len(names) != 1 {
		t.Fatalf("extended notifications = %v, %v; want one", names, err)
	}
	data, _, _ = s.Get("/kafka-acl-extended-changes/" + names[0])
	if p, err := parseNotification(extendedChangesPath, data); err != nil || p != pre.Pattern {
		t.Errorf("extended notification %s = %v, %v", data, p, err)
	}

	removed, errs := Remove(s, []Filter{{AnyResource, nil, AnyPattern, strp("User:alice"), nil, AnyOperation, AnyPermission}})
	if errs[0] != nil || len(removed[0]) != 1 || removed[0][0] != lit {
		t.Fatalf("Remove = %v, %v", removed, errs)
	}
	if ok, _, _ := s.Exists("/kafka-acl/Topic/orders"); ok {
		t.Error("a pattern left with no ACLs must be deleted")
	}
}

func strp(s string) *string { return &s }

// TestCacheFollowsChanges: a change written through one session reaches the
// cache of another promptly, through the notifications alone.
func TestCacheFollowsChanges(t *testing.T) {
	_, session := openStore(t)
	writer := session()
	early := Binding{Pattern{Topic, "early", Literal}, Entry{"User:a", "*", Write, Allow}}
	if err := Add(writer, []Binding{early})[0]; err != nil {
		t.Fatal(err)
	}
	cache := openCache(t, session())
	allowed := func(name string) bool {
		return cache.Snapshot().Authorize(Settings{}, "User:a", "h", Write, Topic, name)
	}
	if !allowed("early") {
		t.Fatal("ACLs stored before the cache opened are not loaded")
	}
	// The cache re-reads everything only every reloadInterval (a minute):
	// changes seen within waitFor's limit came through the watches.
	if err := Add(writer, []Binding{{Pattern{Topic, "late-", Prefixed}, Entry{"User:a", "*", Write, Allow}}})[0]; err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 5*time.Second, "the prefixed ACL", func() bool { return allowed("late-1") })
	if _, errs := Remove(writer, []Filter{{Topic, strp("early"), Literal, nil, nil, AnyOperation, AnyPermission}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	waitfor.Until(t, 5*time.Second, "the removal", func() bool { return !allowed("early") })
}

// TestPrune: notifications older than NotificationTTL are deleted, newer
// ones kept.
func TestPrune(t *testing.T) {
	_, session := openStore(t)
	s := session()
	cache := openCache(t, s)
	if err := Add(s, []Binding{{Pattern{Topic, "t", Literal}, Entry{"User:a", "*", Read, Allow}}})[0]; err != nil {
		t.Fatal(err)
	}
	cache.prune(literalChangesPath, time.Now())
	if names, _ := s.Children(literalChangesPath); len(names) != 1 {
		t.Fatalf("a fresh notification was pruned: %v", names)
	}
	// The store sets creation times itself, so the notification is judged
	// as if NotificationTTL had passed.
	cache.prune(literalChangesPath, time.Now().Add(NotificationTTL+time.Second))
	if names, _ := s.Children(literalChangesPath); len(names) != 0 {
		t.Fatalf("old notifications left: %v", names)
	}
}
