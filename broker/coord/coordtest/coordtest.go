// Package coordtest is the conformance suite for coord.Store backends. Every
// backend (embedded, ZooKeeper) runs the same Run, so the cluster logic above
// can rely on ZooKeeper's semantics whichever backend is configured.
//
// The suite checks behaviour only through the coord.Store interface. Each
// sub-test works under its own fresh persistent node (a sequential child of
// /millrace-coordtest), so a backend may share one store between sub-tests
// and even between runs, as a real ZooKeeper ensemble does.
package coordtest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"millrace/broker/coord"
)

// Connect opens a new client session on the backend under test. Sessions
// opened by one Connect share one store, like several ZooKeeper clients of
// one ensemble.
type Connect func() (coord.Store, error)

// NewBackend prepares a backend for one sub-test and returns how to connect
// to it. Any teardown is registered with t.Cleanup; the suite closes the
// sessions it opens itself.
type NewBackend func(t *testing.T) Connect

// suiteRoot is the persistent node under which every sub-test makes its own.
const suiteRoot = "/millrace-coordtest"

// eventTimeout bounds every wait for a watch or session event.
const eventTimeout = 5 * time.Second

// Run runs the conformance suite against a backend.
func Run(t *testing.T, newBackend NewBackend) {
	t.Run("Nodes", func(t *testing.T) { runNodes(t, newBackend) })
	t.Run("Watches", func(t *testing.T) { runWatches(t, newBackend) })
	t.Run("Sessions", func(t *testing.T) { runSessions(t, newBackend) })
	t.Run("Multi", func(t *testing.T) { runMulti(t, newBackend) })
	t.Run("Concurrency", func(t *testing.T) { runConcurrency(t, newBackend) })
}

// env is one sub-test's view of a backend: two sessions and a private root.
type env struct {
	t       *testing.T
	connect Connect
	a, b    coord.Store
	root    string
}

// setup opens two sessions and creates the sub-test's root node; cleanup
// removes the root (best effort) and closes the sessions.
func setup(t *testing.T, newBackend NewBackend) *env {
	t.Helper()
	e := &env{t: t, connect: newBackend(t)}
	e.a = e.session()
	e.b = e.session()
	if err := coord.EnsurePath(e.a, suiteRoot); err != nil {
		t.Fatalf("EnsurePath(%s): %v", suiteRoot, err)
	}
	root, err := e.a.Create(suiteRoot+"/t-", nil, coord.PersistentSequential)
	if err != nil {
		t.Fatalf("create sub-test root: %v", err)
	}
	e.root = root
	// Registered after the sessions' cleanups, so it runs before them.
	t.Cleanup(func() { removeAll(e.a, root) })
	return e
}

// session opens another session, closed when the sub-test ends.
func (e *env) session() coord.Store {
	e.t.Helper()
	s, err := e.connect()
	if err != nil {
		e.t.Fatalf("open session: %v", err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// path returns the sub-test's root joined with a relative path.
func (e *env) path(rel string) string { return e.root + "/" + rel }

// removeAll deletes a subtree, ignoring errors: it only tidies up.
func removeAll(s coord.Store, path string) {
	children, err := s.Children(path)
	if err != nil {
		return
	}
	for _, child := range children {
		removeAll(s, coord.JoinPath(path, child))
	}
	s.Delete(path, coord.AnyVersion)
}

// mustCreate creates a node or fails the test.
func mustCreate(t *testing.T, s coord.Store, path string, data string, mode coord.CreateMode) string {
	t.Helper()
	created, err := s.Create(path, []byte(data), mode)
	if err != nil {
		t.Fatalf("Create(%s, %v): %v", path, mode, err)
	}
	return created
}

// wantErr fails unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantNoErr fails on a non-nil err.
func wantNoErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitEvent waits for a watch to fire with the given event, then checks that
// the channel is closed (a watch fires once).
func waitEvent(t *testing.T, ch <-chan coord.Event, want coord.Event) {
	t.Helper()
	select {
	case got, ok := <-ch:
		if !ok {
			t.Fatalf("watch channel closed without an event, want %+v", want)
		}
		if got != want {
			t.Fatalf("watch fired %+v, want %+v", got, want)
		}
	case <-time.After(eventTimeout):
		t.Fatalf("watch did not fire within %v, want %+v", eventTimeout, want)
	}
	select {
	case extra, ok := <-ch:
		if ok {
			t.Fatalf("watch fired a second event %+v", extra)
		}
	case <-time.After(eventTimeout):
		t.Fatalf("watch channel not closed after its event")
	}
}

// wantNoEvent checks that a watch has not fired. A client sees a watch event
// before the result of any later read, so callers make a read through the
// watching session first.
func wantNoEvent(t *testing.T, ch <-chan coord.Event, why string) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		t.Fatalf("watch fired (%+v, open=%v) after %s", ev, ok, why)
	default:
	}
}

// waitSession waits for a session state.
func waitSession(t *testing.T, ch <-chan coord.SessionState, want coord.SessionState) {
	t.Helper()
	select {
	case got, ok := <-ch:
		if !ok {
			t.Fatalf("session events closed, want %v", want)
		}
		if got != want {
			t.Fatalf("session event %v, want %v", got, want)
		}
	case <-time.After(eventTimeout):
		t.Fatalf("no session event within %v, want %v", eventTimeout, want)
	}
}

// wantChildren checks a node's children.
func wantChildren(t *testing.T, s coord.Store, path string, want ...string) {
	t.Helper()
	got, err := s.Children(path)
	wantNoErr(t, "Children("+path+")", err)
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Children(%s) = %q, want %q", path, got, want)
	}
}

// wantData checks a node's data.
func wantData(t *testing.T, s coord.Store, path, want string) coord.Stat {
	t.Helper()
	data, stat, err := s.Get(path)
	wantNoErr(t, "Get("+path+")", err)
	if string(data) != want {
		t.Fatalf("Get(%s) = %q, want %q", path, data, want)
	}
	return stat
}

// wantAbsent checks that a node does not exist.
func wantAbsent(t *testing.T, s coord.Store, path string) {
	t.Helper()
	ok, _, err := s.Exists(path)
	wantNoErr(t, "Exists("+path+")", err)
	if ok {
		t.Fatalf("%s exists, want it absent", path)
	}
}

// sequenceSuffix splits a sequential node's name into prefix and counter.
func sequenceSuffix(t *testing.T, created string) (string, string) {
	t.Helper()
	if len(created) < 10 {
		t.Fatalf("sequential name %q too short", created)
	}
	prefix, suffix := created[:len(created)-10], created[len(created)-10:]
	if strings.Trim(suffix, "0123456789") != "" {
		t.Fatalf("sequential name %q does not end in ten digits", created)
	}
	return prefix, suffix
}
