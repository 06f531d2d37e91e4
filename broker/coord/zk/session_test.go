package zk

import (
	"errors"
	"testing"
	"time"

	"millrace/broker/coord"
	"millrace/internal/zktest"
)

// waitFor bounds every wait for an event in these tests.
const waitFor = 20 * time.Second

// nextState waits for the next session state.
func nextState(t *testing.T, s *Store) coord.SessionState {
	t.Helper()
	select {
	case state, ok := <-s.SessionEvents():
		if !ok {
			t.Fatal("session events closed")
		}
		return state
	case <-time.After(waitFor):
		t.Fatalf("no session event within %v", waitFor)
		return 0
	}
}

// waitState skips states until want arrives, failing on any state not in
// allowed.
func waitState(t *testing.T, s *Store, want coord.SessionState, allowed ...coord.SessionState) {
	t.Helper()
	for {
		state := nextState(t, s)
		if state == want {
			return
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == state
		}
		if !ok {
			t.Fatalf("session state %v while waiting for %v", state, want)
		}
	}
}

// waitWatch waits for a watch event.
func waitWatch(t *testing.T, ch <-chan coord.Event, want coord.Event) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("watch fired %+v, want %+v", got, want)
		}
	case <-time.After(waitFor):
		t.Fatalf("watch did not fire %+v within %v", want, waitFor)
	}
}

func TestSessionExpiry(t *testing.T) {
	server := zktest.Start(t)
	s := connectTo(t, server.Connect())
	observer := connectTo(t, server.Connect())
	waitState(t, s, coord.SessionConnected)

	if _, err := s.Create("/data", []byte("d"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("/member", nil, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	_, _, ownWatch, err := s.GetW("/data")
	if err != nil {
		t.Fatal(err)
	}
	_, _, observed, err := observer.ExistsW("/member")
	if err != nil {
		t.Fatal(err)
	}
	oldID := s.SessionID()

	if err := s.ExpireSession(); err != nil {
		t.Fatalf("ExpireSession: %v", err)
	}
	// The takeover may first show as a lost connection.
	waitState(t, s, coord.SessionExpired, coord.SessionDisconnected)
	waitState(t, s, coord.SessionConnected)

	waitWatch(t, observed, coord.Event{Type: coord.EventDeleted, Path: "/member"})
	waitWatch(t, ownWatch, coord.Event{Type: coord.EventNotWatching, Path: "/data"})
	if ok, _, err := observer.Exists("/member"); err != nil || ok {
		t.Fatalf("ephemeral of the expired session: exists=%v err=%v", ok, err)
	}

	newID := s.SessionID()
	if newID == 0 || newID == oldID {
		t.Fatalf("session ID after expiry %#x, was %#x", newID, oldID)
	}
	// The store works again, and new ephemerals belong to the new session.
	if _, err := s.Create("/member", nil, coord.Ephemeral); err != nil {
		t.Fatalf("re-create ephemeral: %v", err)
	}
	_, stat, err := observer.Get("/member")
	if err != nil {
		t.Fatal(err)
	}
	if stat.EphemeralOwner != newID {
		t.Fatalf("re-created ephemeral owned by %#x, want %#x", stat.EphemeralOwner, newID)
	}
	_, _, again, err := s.GetW("/data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := observer.Set("/data", []byte("e"), coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitWatch(t, again, coord.Event{Type: coord.EventDataChanged, Path: "/data"})
}

// A dropped connection that comes back within the session timeout keeps the
// session: same ID, ephemerals intact, watches still armed.
func TestReconnectKeepsSession(t *testing.T) {
	server := zktest.Start(t)
	s := connectTo(t, server.Connect())
	other := connectTo(t, server.Connect())
	waitState(t, s, coord.SessionConnected)
	if _, err := s.Create("/member", nil, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("/data", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := s.GetW("/data")
	if err != nil {
		t.Fatal(err)
	}
	id := s.SessionID()

	s.dialer.dropConnection()
	waitState(t, s, coord.SessionDisconnected)
	waitState(t, s, coord.SessionConnected)
	if got := s.SessionID(); got != id {
		t.Fatalf("session ID %#x after reconnect, want %#x", got, id)
	}
	_, stat, err := other.Get("/member")
	if err != nil {
		t.Fatalf("ephemeral after reconnect: %v", err)
	}
	if stat.EphemeralOwner != id {
		t.Fatalf("ephemeral owner %#x, want %#x", stat.EphemeralOwner, id)
	}
	if _, err := other.Set("/data", []byte("x"), coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	waitWatch(t, watch, coord.Event{Type: coord.EventDataChanged, Path: "/data"})
}

// With the only server down, operations fail with ErrConnectionLoss instead
// of hanging, and work again once it is back.
func TestServerDownFailsOperations(t *testing.T) {
	server := zktest.Start(t)
	s := connectTo(t, server.Connect())
	waitState(t, s, coord.SessionConnected)
	if _, err := s.Create("/data", []byte("1"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	id := s.SessionID()

	server.Stop()
	waitState(t, s, coord.SessionDisconnected)
	result := make(chan error, 1)
	go func() {
		_, _, err := s.Get("/data")
		result <- err
	}()
	select {
	case err := <-result:
		if !errors.Is(err, ErrConnectionLoss) {
			t.Fatalf("Get with the server down: %v, want ErrConnectionLoss", err)
		}
	case <-time.After(waitFor):
		t.Fatalf("Get with the server down did not return within %v", waitFor)
	}

	server.Restart()
	waitState(t, s, coord.SessionConnected)
	if got := s.SessionID(); got != id {
		t.Fatalf("session %#x after the server restarted, want %#x", got, id)
	}
	data, _, err := s.Get("/data")
	if err != nil || string(data) != "1" {
		t.Fatalf("Get after restart = %q, %v", data, err)
	}
}

func TestConnectErrors(t *testing.T) {
	for _, servers := range []string{"", "127.0.0.1:1,", "127.0.0.1:1/bad/", "127.0.0.1:1/a//b"} {
		if s, err := Connect(servers, testSessionTimeout, testLogger()); err == nil {
			s.Close()
			t.Errorf("Connect(%q) succeeded", servers)
		}
	}
	// Nothing listens: Connect gives up rather than waiting forever.
	port := zktest.Start(t)
	addr := port.Connect()
	port.Stop()
	start := time.Now()
	s, err := Connect(addr, time.Second, testLogger())
	if err == nil {
		s.Close()
		t.Fatal("Connect to a stopped server succeeded")
	}
	if !errors.Is(err, ErrConnectionLoss) {
		t.Fatalf("Connect to a stopped server: %v, want ErrConnectionLoss", err)
	}
	t.Logf("gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestChrootPaths(t *testing.T) {
	server := zktest.Start(t)
	s := connectTo(t, server.Connect()+"/apps/millrace")
	raw := connectTo(t, server.Connect())
	created, err := s.Create("/", nil, coord.PersistentSequential)
	if err != nil {
		t.Fatal(err)
	}
	if created != "/0000000000" {
		t.Fatalf("sequential create of / in a chroot = %q", created)
	}
	if _, _, err := raw.Get("/apps/millrace/0000000000"); err != nil {
		t.Fatalf("node not under the chroot: %v", err)
	}
	_, ch, err := s.ChildrenW("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create("/apps/millrace/x", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	waitWatch(t, ch, coord.Event{Type: coord.EventChildrenChanged, Path: "/"})
	names, err := s.Children("/")
	if err != nil || len(names) != 2 {
		t.Fatalf("Children(/) in chroot = %q, %v", names, err)
	}
	if _, err := s.Create("/", nil, coord.Persistent); !errors.Is(err, coord.ErrNodeExists) {
		t.Fatalf("Create of the chroot itself: %v, want ErrNodeExists", err)
	}
}

// ZooKeeper's sequence counter counts the children ever created under the
// parent; the child version a stat reports counts creations and deletions
// (the server derives it as 2×creations − current children). The two agree
// only until the first deletion.
func TestSequenceCountsCreationsOnly(t *testing.T) {
	server := zktest.Start(t)
	s := connectTo(t, server.Connect())
	if _, err := s.Create("/q", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/q/a", "/q/b"} {
		if _, err := s.Create(name, nil, coord.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"/q/a", "/q/b"} {
		if err := s.Delete(name, coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	_, stat, err := s.Get("/q")
	if err != nil {
		t.Fatal(err)
	}
	created, err := s.Create("/q/item-", nil, coord.PersistentSequential)
	if err != nil {
		t.Fatal(err)
	}
	if stat.ChildVersion != 4 || created != "/q/item-0000000002" {
		t.Fatalf("after 2 creates and 2 deletes: child version %d, sequential name %s; want 4 and /q/item-0000000002",
			stat.ChildVersion, created)
	}
}
