package embedded

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"millrace/broker/coord"
	"millrace/broker/coord/coordtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// openServer opens a store in dir and closes it when the test ends.
func openServer(t *testing.T, dir string, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	s, err := OpenOptions(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openSession(t *testing.T, s *Server) coord.Store {
	t.Helper()
	c, err := s.Session()
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) coordtest.Connect {
		s := openServer(t, t.TempDir(), Options{})
		return s.Session
	})
}

// A tiny snapshot threshold makes the suite run through many snapshot and WAL
// resets while sessions are busy.
func TestConformanceSnapshotting(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) coordtest.Connect {
		s := openServer(t, t.TempDir(), Options{SnapshotBytes: 512})
		return s.Session
	})
}

// dump returns every node's path, data and versions, for comparing states.
func dump(t *testing.T, c coord.Store) []string {
	t.Helper()
	var out []string
	var walk func(path string)
	walk = func(path string) {
		data, stat, err := c.Get(path)
		if err != nil {
			t.Fatalf("Get(%s): %v", path, err)
		}
		out = append(out, fmt.Sprintf("%s=%q v%d c%d n%d o%d", path, data, stat.Version, stat.ChildVersion, stat.NumChildren, stat.EphemeralOwner))
		children, err := c.Children(path)
		if err != nil {
			t.Fatalf("Children(%s): %v", path, err)
		}
		for _, child := range children {
			walk(coord.JoinPath(path, child))
		}
	}
	walk("/")
	return out
}

func TestPersistenceAcrossReopen(t *testing.T) {
	for _, threshold := range []int64{0, 300} {
		t.Run(fmt.Sprintf("snapshot-bytes-%d", threshold), func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenOptions(dir, Options{Logger: testLogger(), SnapshotBytes: threshold})
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.Session()
			if err != nil {
				t.Fatal(err)
			}
			firstID := c.SessionID()
			mustOK(t, coord.EnsurePath(c, "/brokers/topics/t"))
			mustOK(t, coord.EnsurePath(c, "/consumers/g/offsets/t"))
			for i := 0; i < 20; i++ {
				p := fmt.Sprintf("/consumers/g/offsets/t/%d", i%4)
				if _, err := c.Create(p, nil, coord.Persistent); err != nil && !errors.Is(err, coord.ErrNodeExists) {
					t.Fatal(err)
				}
				if _, err := c.Set(p, []byte(fmt.Sprint(i)), coord.AnyVersion); err != nil {
					t.Fatal(err)
				}
			}
			seq, err := c.Create("/brokers/seq-", []byte("s"), coord.PersistentSequential)
			mustOK(t, err)
			_, err = c.Create("/brokers/ids", nil, coord.Persistent)
			mustOK(t, err)
			_, err = c.Create("/brokers/ids/1", []byte("host"), coord.Ephemeral)
			mustOK(t, err)
			_, err = c.Create("/brokers/ids/e-", nil, coord.EphemeralSequential)
			mustOK(t, err)
			mustOK(t, c.Multi(
				coord.CreateOp{Path: "/config", Mode: coord.Persistent},
				coord.CreateOp{Path: "/config/topics", Data: []byte("cfg"), Mode: coord.Persistent},
				coord.DeleteOp{Path: seq, Version: 0},
			))
			_, err = c.Set("/brokers/ids/1", []byte("host2"), 0)
			mustOK(t, err)
			want := dump(t, c)
			mustOK(t, s.Close())

			s2 := openServer(t, dir, Options{SnapshotBytes: threshold})
			c2 := openSession(t, s2)
			if c2.SessionID() <= firstID {
				t.Fatalf("session ID %d after reopen, want more than %d", c2.SessionID(), firstID)
			}
			got := dump(t, c2)
			// Ephemerals are gone after a restart; their parent's child
			// version counts their deletion.
			var wantAfter []string
			for _, line := range want {
				switch {
				case strings.HasPrefix(line, "/brokers/ids/"):
				case strings.HasPrefix(line, "/brokers/ids="):
					wantAfter = append(wantAfter, `/brokers/ids="" v0 c4 n0 o0`)
				default:
					wantAfter = append(wantAfter, line)
				}
			}
			if !slices.Equal(got, wantAfter) {
				t.Fatalf("after reopen:\n%q\nwant:\n%q", got, wantAfter)
			}
			// Sequential names continue after the restart: /brokers has had
			// three children created (topics, seq-0000000001, ids).
			next, err := c2.Create("/brokers/seq-", nil, coord.PersistentSequential)
			mustOK(t, err)
			if next != "/brokers/seq-0000000003" {
				t.Fatalf("sequential after reopen %s, want /brokers/seq-0000000003", next)
			}
		})
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTornWAL simulates a crash at every byte of the WAL's last transactions:
// replay must produce exactly the state after some prefix of transactions, and
// the store must keep working (appends after the cut must replay too).
func TestTornWAL(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger())
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	// states[i] is the dump after i+1 mutations; sizes[i] the WAL size then.
	var states [][]string
	var sizes []int64
	record := func() {
		states = append(states, dump(t, c))
		info, err := os.Stat(filepath.Join(dir, walFile))
		mustOK(t, err)
		sizes = append(sizes, info.Size())
	}
	record()
	_, err = c.Create("/a", []byte("a0"), coord.Persistent)
	mustOK(t, err)
	record()
	_, err = c.Set("/a", []byte("a1-longer-value"), coord.AnyVersion)
	mustOK(t, err)
	record()
	mustOK(t, c.Multi(
		coord.CreateOp{Path: "/a/b", Data: []byte("b"), Mode: coord.Persistent},
		coord.CreateOp{Path: "/a/q-", Mode: coord.PersistentSequential},
	))
	record()
	mustOK(t, c.Delete("/a/b", 0))
	record()
	mustOK(t, c.Close())
	mustOK(t, s.Close())
	content, err := os.ReadFile(filepath.Join(dir, walFile))
	mustOK(t, err)
	snapshot, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	mustOK(t, err)

	for cut := sizes[0]; cut <= sizes[len(sizes)-1]; cut++ {
		// The expected state is the last one whose WAL fits in the cut.
		want := 0
		for i, size := range sizes {
			if size <= cut {
				want = i
			}
		}
		crashDir := t.TempDir()
		mustOK(t, os.WriteFile(filepath.Join(crashDir, walFile), content[:cut], 0o644))
		mustOK(t, os.WriteFile(filepath.Join(crashDir, snapshotFile), snapshot, 0o644))
		s2, err := Open(crashDir, testLogger())
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		c2, err := s2.Session()
		mustOK(t, err)
		got := dump(t, c2)
		if !slices.Equal(got, states[want]) {
			t.Fatalf("cut at %d: state\n%q\nwant state %d\n%q", cut, got, want, states[want])
		}
		// The store goes on from there, and that survives another restart.
		_, err = c2.Create("/after", []byte("x"), coord.Persistent)
		mustOK(t, err)
		mustOK(t, s2.Close())
		s3, err := Open(crashDir, testLogger())
		mustOK(t, err)
		c3, err := s3.Session()
		mustOK(t, err)
		if _, _, err := c3.Get("/after"); err != nil {
			t.Fatalf("cut at %d: write after recovery lost: %v", cut, err)
		}
		mustOK(t, s3.Close())
	}
}

// TestCorruptWALMiddle flips a byte inside the WAL: replay stops at the
// damaged transaction instead of applying garbage.
func TestCorruptWALMiddle(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger())
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	_, err = c.Create("/one", []byte("1"), coord.Persistent)
	mustOK(t, err)
	info, err := os.Stat(filepath.Join(dir, walFile))
	mustOK(t, err)
	_, err = c.Create("/two", []byte("2"), coord.Persistent)
	mustOK(t, err)
	mustOK(t, s.Close())

	path := filepath.Join(dir, walFile)
	content, err := os.ReadFile(path)
	mustOK(t, err)
	content[info.Size()+frameHeaderSize+2] ^= 0xff
	mustOK(t, os.WriteFile(path, content, 0o644))

	s2 := openServer(t, dir, Options{})
	c2 := openSession(t, s2)
	wantData := func(p string, ok bool) {
		t.Helper()
		found, _, err := c2.Exists(p)
		mustOK(t, err)
		if found != ok {
			t.Fatalf("%s exists=%v, want %v", p, found, ok)
		}
	}
	wantData("/one", true)
	wantData("/two", false)
}

func TestSnapshotAndWALReplay(t *testing.T) {
	dir := t.TempDir()
	// A small threshold forces snapshots midway; the tail stays in the WAL.
	s, err := OpenOptions(dir, Options{Logger: testLogger(), SnapshotBytes: 2048})
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	mustOK(t, coord.EnsurePath(c, "/offsets"))
	for i := 0; i < 200; i++ {
		p := fmt.Sprintf("/offsets/%d", i%10)
		if i < 10 {
			_, err = c.Create(p, nil, coord.Persistent)
			mustOK(t, err)
		}
		_, err = c.Set(p, []byte(fmt.Sprint(i)), coord.AnyVersion)
		mustOK(t, err)
	}
	want := dump(t, c)
	mustOK(t, s.Close())
	walInfo, err := os.Stat(filepath.Join(dir, walFile))
	mustOK(t, err)
	if _, err := os.Stat(filepath.Join(dir, snapshotFile)); err != nil {
		t.Fatalf("no snapshot written: %v", err)
	}
	if walInfo.Size() > 2048+int64(len(walMagic)) {
		t.Fatalf("WAL is %d bytes, past the 2048-byte threshold: never reset", walInfo.Size())
	}

	s2 := openServer(t, dir, Options{})
	got := dump(t, openSession(t, s2))
	if !slices.Equal(got, want) {
		t.Fatalf("after reopen:\n%q\nwant:\n%q", got, want)
	}
}

// TestSnapshotWithStaleWAL covers a crash after a snapshot was published but
// before the WAL was reset: the WAL's transactions are already in the
// snapshot and must not be applied twice.
func TestSnapshotWithStaleWAL(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger())
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	_, err = c.Create("/n", []byte("0"), coord.Persistent)
	mustOK(t, err)
	_, err = c.Set("/n", []byte("1"), 0)
	mustOK(t, err)
	wal, err := os.ReadFile(filepath.Join(dir, walFile))
	mustOK(t, err)
	mustOK(t, s.Close())

	// Reopening compacts into a snapshot and empties the WAL; put the old WAL
	// back as if the reset never happened.
	s2, err := Open(dir, testLogger())
	mustOK(t, err)
	mustOK(t, s2.Close())
	mustOK(t, os.WriteFile(filepath.Join(dir, walFile), wal, 0o644))

	s3 := openServer(t, dir, Options{})
	c3 := openSession(t, s3)
	data, stat, err := c3.Get("/n")
	mustOK(t, err)
	if string(data) != "1" || stat.Version != 1 {
		t.Fatalf("/n = %q version %d, want \"1\" version 1", data, stat.Version)
	}
}

func TestCorruptSnapshotRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger())
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	_, err = c.Create("/n", []byte("data"), coord.Persistent)
	mustOK(t, err)
	mustOK(t, s.Close())
	s, err = Open(dir, testLogger()) // compacts /n into the snapshot
	mustOK(t, err)
	mustOK(t, s.Close())

	path := filepath.Join(dir, snapshotFile)
	content, err := os.ReadFile(path)
	mustOK(t, err)
	mustOK(t, os.WriteFile(path, content[:len(content)-3], 0o644))
	if s, err := Open(dir, testLogger()); err == nil {
		s.Close()
		t.Fatal("Open accepted a truncated snapshot")
	}
}

func TestDirectoryLocked(t *testing.T) {
	dir := t.TempDir()
	openServer(t, dir, Options{})
	if s, err := Open(dir, testLogger()); err == nil {
		s.Close()
		t.Fatal("a second Server opened the same directory")
	}
}

func TestExpireSession(t *testing.T) {
	s := openServer(t, t.TempDir(), Options{})
	a := openSession(t, s)
	b := openSession(t, s)
	waitState(t, a.SessionEvents(), coord.SessionConnected)
	_, err := a.Create("/eph", nil, coord.Ephemeral)
	mustOK(t, err)
	_, err = a.Create("/kept", nil, coord.Persistent)
	mustOK(t, err)
	_, _, own, err := a.GetW("/kept")
	mustOK(t, err)
	_, _, other, err := b.ExistsW("/eph")
	mustOK(t, err)

	oldID := a.SessionID()
	s.ExpireSession(oldID)
	waitState(t, a.SessionEvents(), coord.SessionExpired)
	waitState(t, a.SessionEvents(), coord.SessionConnected)
	if a.SessionID() <= oldID {
		t.Fatalf("session ID %d after expiry, want a new one above %d", a.SessionID(), oldID)
	}
	waitWatch(t, own, coord.Event{Type: coord.EventNotWatching, Path: "/kept"})
	waitWatch(t, other, coord.Event{Type: coord.EventDeleted, Path: "/eph"})
	// The client is usable under its new ID.
	_, err = a.Create("/eph", nil, coord.Ephemeral)
	mustOK(t, err)
	_, stat, err := b.Get("/eph")
	mustOK(t, err)
	if stat.EphemeralOwner != a.SessionID() {
		t.Fatalf("new ephemeral owned by %d, want %d", stat.EphemeralOwner, a.SessionID())
	}
	s.ExpireSession(12345) // unknown: ignored
}

func TestServerCloseEndsSessions(t *testing.T) {
	s, err := Open(t.TempDir(), testLogger())
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	_, err = c.Create("/n", nil, coord.Persistent)
	mustOK(t, err)
	_, _, ch, err := c.GetW("/n")
	mustOK(t, err)
	mustOK(t, s.Close())
	waitWatch(t, ch, coord.Event{Type: coord.EventNotWatching, Path: "/n"})
	if _, _, err := c.Get("/n"); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Get after server Close: %v, want ErrClosed", err)
	}
	if _, err := s.Session(); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Session after server Close: %v, want ErrClosed", err)
	}
	mustOK(t, c.Close())
	mustOK(t, s.Close())
}

// A watcher that never reads its channels must not stall the store.
func TestSlowWatcherDoesNotBlock(t *testing.T) {
	s := openServer(t, t.TempDir(), Options{})
	a := openSession(t, s)
	b := openSession(t, s)
	_, err := a.Create("/n", nil, coord.Persistent)
	mustOK(t, err)
	for i := 0; i < 100; i++ {
		if _, _, _, err := b.GetW("/n"); err != nil { // never read
			t.Fatal(err)
		}
		if _, err := a.Set("/n", []byte(fmt.Sprint(i)), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	// b never reads SessionEvents either; expiring it queues more states.
	for i := 0; i < 5; i++ {
		s.ExpireSession(b.SessionID())
	}
	_, err = b.Set("/n", nil, coord.AnyVersion)
	mustOK(t, err)
}

func waitState(t *testing.T, ch <-chan coord.SessionState, want coord.SessionState) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("session state %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no session state, want %v", want)
	}
}

func waitWatch(t *testing.T, ch <-chan coord.Event, want coord.Event) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("event %+v, want %+v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no event, want %+v", want)
	}
	if _, ok := <-ch; ok {
		t.Fatal("watch channel not closed after its event")
	}
}
