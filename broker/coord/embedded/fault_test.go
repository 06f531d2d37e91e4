package embedded

import (
	"errors"
	"testing"

	"millrace/broker/coord"

	"millrace/internal/waitfor"
)

var errInjected = errors.New("injected disk failure")

// faultyLog fails every Sync once armed, like a disk that went away.
type faultyLog struct {
	logFile
	failSync bool
	writes   int
}

func (f *faultyLog) Write(p []byte) (int, error) {
	f.writes++
	return f.logFile.Write(p)
}

func (f *faultyLog) Sync() error {
	if f.failSync {
		return errInjected
	}
	return f.logFile.Sync()
}

// After a failed fsync the store refuses every further mutation (a later
// transaction must never reach disk without an earlier one), keeps serving
// reads, and what was acknowledged before survives a reopen.
func TestFailedSyncIsSticky(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger())
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	_, err = c.Create("/n", []byte("durable"), coord.Persistent)
	mustOK(t, err)

	faulty := &faultyLog{logFile: s.wal, failSync: true}
	s.mu.Lock()
	s.wal = faulty
	s.mu.Unlock()

	if _, err := c.Set("/n", []byte("lost"), coord.AnyVersion); !errors.Is(err, errInjected) {
		t.Fatalf("Set with a failing fsync: %v, want the injected error", err)
	}
	writes := faulty.writes
	if _, err := c.Create("/m", nil, coord.Persistent); !errors.Is(err, errInjected) {
		t.Fatalf("Create after a failed fsync: %v, want the sticky error", err)
	}
	if faulty.writes != writes {
		t.Fatal("the WAL was written after a failed fsync")
	}
	if _, err := s.Session(); !errors.Is(err, errInjected) {
		t.Fatalf("Session after a failed fsync: %v, want the sticky error", err)
	}
	if _, _, err := c.Get("/n"); err != nil {
		t.Fatalf("Get after a failed fsync: %v", err)
	}
	mustOK(t, c.Close())
	mustOK(t, s.Close())

	s2 := openServer(t, dir, Options{})
	c2 := openSession(t, s2)
	data, stat, err := c2.Get("/n")
	mustOK(t, err)
	// The failed Set reached the page cache (only its fsync failed), so it may
	// or may not be there; the acknowledged Create must be.
	if string(data) != "durable" && string(data) != "lost" {
		t.Fatalf("/n = %q (version %d) after reopen", data, stat.Version)
	}
	if ok, _, err := c2.Exists("/m"); err != nil || ok {
		t.Fatalf("/m after reopen: exists=%v err=%v, want absent", ok, err)
	}
}

// Once the disk works again the store persists again by itself: a retry
// snapshots the tree (which holds the change whose fsync failed) and resets
// the WAL, mutations are accepted, and everything survives a reopen.
func TestFailedSyncRecovers(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger())
	mustOK(t, err)
	c, err := s.Session()
	mustOK(t, err)
	_, err = c.Create("/n", []byte("durable"), coord.Persistent)
	mustOK(t, err)
	faulty := &faultyLog{logFile: s.wal, failSync: true}
	s.mu.Lock()
	s.wal = faulty
	s.mu.Unlock()
	if _, err := c.Set("/n", []byte("applied"), coord.AnyVersion); !errors.Is(err, errInjected) {
		t.Fatalf("Set with a failing fsync: %v, want the injected error", err)
	}

	s.mu.Lock()
	faulty.failSync = false
	s.mu.Unlock()
	waitfor.Until(t, 5*PersistRetryInterval, "a Create once the disk came back", func() bool {
		_, err := c.Create("/m", nil, coord.Persistent)
		if err != nil && !errors.Is(err, errInjected) {
			t.Fatalf("Create after the disk came back: %v", err)
		}
		return err == nil
	})
	mustOK(t, c.Close())
	mustOK(t, s.Close())

	s2 := openServer(t, dir, Options{})
	c2 := openSession(t, s2)
	if data, _, err := c2.Get("/n"); err != nil || string(data) != "applied" {
		t.Fatalf("/n after reopen: %q, %v; want the change the retry's snapshot made durable", data, err)
	}
	if ok, _, err := c2.Exists("/m"); err != nil || !ok {
		t.Fatalf("/m after reopen: exists=%v err=%v", ok, err)
	}
}
