package coordtest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"millrace/broker/coord"
)

func runSessions(t *testing.T, newBackend NewBackend) {
	t.Run("ConnectedAndDistinctIDs", func(t *testing.T) {
		e := setup(t, newBackend)
		c := e.session()
		waitSession(t, e.a.SessionEvents(), coord.SessionConnected)
		waitSession(t, c.SessionEvents(), coord.SessionConnected)
		ids := map[int64]bool{}
		for _, s := range []coord.Store{e.a, e.b, c} {
			id := s.SessionID()
			if id == 0 || ids[id] {
				t.Fatalf("session ID %d is zero or repeated among %v", id, ids)
			}
			ids[id] = true
		}
	})

	t.Run("EphemeralsVanishOnClose", func(t *testing.T) {
		e := setup(t, newBackend)
		parent := mustCreate(t, e.a, e.path("members"), "", coord.Persistent)
		c := e.session()
		eph := mustCreate(t, c, parent+"/m1", "", coord.Ephemeral)
		seq := mustCreate(t, c, parent+"/seq-", "", coord.EphemeralSequential)
		kept := mustCreate(t, c, parent+"/kept", "", coord.Persistent)
		mine := mustCreate(t, e.b, parent+"/other", "", coord.Ephemeral)
		_, _, ephCh, err := e.b.ExistsW(eph)
		wantNoErr(t, "ExistsW", err)
		_, _, seqCh, err := e.b.GetW(seq)
		wantNoErr(t, "GetW", err)
		_, childCh, err := e.a.ChildrenW(parent)
		wantNoErr(t, "ChildrenW", err)

		wantNoErr(t, "Close", c.Close())
		waitEvent(t, ephCh, coord.Event{Type: coord.EventDeleted, Path: eph})
		waitEvent(t, seqCh, coord.Event{Type: coord.EventDeleted, Path: seq})
		waitEvent(t, childCh, coord.Event{Type: coord.EventChildrenChanged, Path: parent})
		wantAbsent(t, e.a, eph)
		wantAbsent(t, e.a, seq)
		wantData(t, e.a, kept, "")
		wantData(t, e.a, mine, "")
		wantChildren(t, e.a, parent, "kept", "other")
	})

	t.Run("ClosedSession", func(t *testing.T) {
		e := setup(t, newBackend)
		c := e.session()
		p := mustCreate(t, e.a, e.path("n"), "", coord.Persistent)
		_, _, ch, err := c.GetW(p)
		wantNoErr(t, "GetW", err)
		events := c.SessionEvents()
		wantNoErr(t, "Close", c.Close())

		// The watch can no longer fire: it says so once, then closes.
		waitEvent(t, ch, coord.Event{Type: coord.EventNotWatching, Path: p})
		// The session channel drains (at most the initial Connected) and closes.
		deadline := time.After(eventTimeout)
	drain:
		for {
			select {
			case state, ok := <-events:
				if !ok {
					break drain
				}
				if state != coord.SessionConnected {
					t.Fatalf("session event %v after Close", state)
				}
			case <-deadline:
				t.Fatal("SessionEvents not closed by Close")
			}
		}
		closed := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, coord.ErrClosed) {
				t.Fatalf("%s after Close: got %v, want ErrClosed", what, err)
			}
		}
		_, err = c.Create(e.path("late"), nil, coord.Persistent)
		closed("Create", err)
		_, _, err = c.Get(p)
		closed("Get", err)
		_, _, _, err = c.GetW(p)
		closed("GetW", err)
		_, _, err = c.Exists(p)
		closed("Exists", err)
		_, err = c.Set(p, nil, coord.AnyVersion)
		closed("Set", err)
		closed("Delete", c.Delete(p, coord.AnyVersion))
		_, err = c.Children(p)
		closed("Children", err)
		closed("Multi", c.Multi(coord.CheckOp{Path: p, Version: coord.AnyVersion}))
		wantAbsent(t, e.a, e.path("late"))
		wantData(t, e.a, p, "")
	})
}

func runMulti(t *testing.T, newBackend NewBackend) {
	t.Run("AppliesAll", func(t *testing.T) {
		e := setup(t, newBackend)
		old := mustCreate(t, e.a, e.path("old"), "", coord.Persistent)
		counter := mustCreate(t, e.a, e.path("counter"), "1", coord.Persistent)
		_, childCh, err := e.b.ChildrenW(e.root)
		wantNoErr(t, "ChildrenW", err)
		_, _, dataCh, err := e.b.GetW(counter)
		wantNoErr(t, "GetW", err)
		err = e.a.Multi(
			coord.CheckOp{Path: counter, Version: 0},
			coord.CreateOp{Path: e.path("dir"), Data: []byte("d"), Mode: coord.Persistent},
			coord.CreateOp{Path: e.path("dir/child"), Data: []byte("c"), Mode: coord.Persistent},
			coord.CreateOp{Path: e.path("dir/eph"), Mode: coord.Ephemeral},
			coord.SetOp{Path: counter, Data: []byte("2"), Version: 0},
			coord.DeleteOp{Path: old, Version: 0},
		)
		wantNoErr(t, "Multi", err)
		wantData(t, e.b, e.path("dir"), "d")
		wantData(t, e.b, e.path("dir/child"), "c")
		_, stat, err := e.b.Get(e.path("dir/eph"))
		wantNoErr(t, "Get ephemeral", err)
		if stat.EphemeralOwner != e.a.SessionID() {
			t.Fatalf("ephemeral from Multi owned by %d, want %d", stat.EphemeralOwner, e.a.SessionID())
		}
		if stat := wantData(t, e.b, counter, "2"); stat.Version != 1 {
			t.Fatalf("counter version %d, want 1", stat.Version)
		}
		wantAbsent(t, e.b, old)
		waitEvent(t, childCh, coord.Event{Type: coord.EventChildrenChanged, Path: e.root})
		waitEvent(t, dataCh, coord.Event{Type: coord.EventDataChanged, Path: counter})
	})

	t.Run("Empty", func(t *testing.T) {
		e := setup(t, newBackend)
		wantNoErr(t, "empty Multi", e.a.Multi())
	})

	failures := []struct {
		name   string
		ops    func(e *env) []coord.Op
		index  int
		target error
	}{
		{"CheckFailsFirst", func(e *env) []coord.Op {
			return []coord.Op{
				coord.CheckOp{Path: e.path("counter"), Version: 3},
				coord.CreateOp{Path: e.path("new"), Mode: coord.Persistent},
			}
		}, 0, coord.ErrBadVersion},
		{"SetFailsSecond", func(e *env) []coord.Op {
			return []coord.Op{
				coord.CreateOp{Path: e.path("new"), Mode: coord.Persistent},
				coord.SetOp{Path: e.path("counter"), Data: []byte("x"), Version: 9},
			}
		}, 1, coord.ErrBadVersion},
		{"CreateExists", func(e *env) []coord.Op {
			return []coord.Op{
				coord.SetOp{Path: e.path("counter"), Data: []byte("x"), Version: 0},
				coord.CreateOp{Path: e.path("new"), Mode: coord.Persistent},
				coord.CreateOp{Path: e.path("counter"), Mode: coord.Persistent},
			}
		}, 2, coord.ErrNodeExists},
		{"DeleteMissing", func(e *env) []coord.Op {
			return []coord.Op{
				coord.CreateOp{Path: e.path("new"), Mode: coord.Ephemeral},
				coord.DeleteOp{Path: e.path("missing"), Version: coord.AnyVersion},
			}
		}, 1, coord.ErrNoNode},
		{"DeleteNotEmpty", func(e *env) []coord.Op {
			return []coord.Op{
				coord.CreateOp{Path: e.path("new"), Mode: coord.Persistent},
				coord.CreateOp{Path: e.path("new/child"), Mode: coord.Persistent},
				coord.DeleteOp{Path: e.path("new"), Version: coord.AnyVersion},
			}
		}, 2, coord.ErrNotEmpty},
		{"CheckMissing", func(e *env) []coord.Op {
			return []coord.Op{
				coord.CreateOp{Path: e.path("new"), Mode: coord.Persistent},
				coord.DeleteOp{Path: e.path("counter"), Version: 0},
				coord.CheckOp{Path: e.path("counter"), Version: coord.AnyVersion},
			}
		}, 2, coord.ErrNoNode},
	}
	for _, tc := range failures {
		t.Run("Atomic/"+tc.name, func(t *testing.T) {
			e := setup(t, newBackend)
			counter := mustCreate(t, e.a, e.path("counter"), "0", coord.Persistent)
			_, childCh, err := e.b.ChildrenW(e.root)
			wantNoErr(t, "ChildrenW", err)
			_, _, dataCh, err := e.b.GetW(counter)
			wantNoErr(t, "GetW", err)
			_, before, err := e.a.Get(e.root)
			wantNoErr(t, "Get root", err)

			err = e.a.Multi(tc.ops(e)...)
			var multiErr *coord.MultiError
			if !errors.As(err, &multiErr) {
				t.Fatalf("Multi error %v (%T), want *coord.MultiError", err, err)
			}
			if multiErr.Index != tc.index {
				t.Fatalf("MultiError.Index = %d, want %d (%v)", multiErr.Index, tc.index, err)
			}
			wantErr(t, "Multi", err, tc.target)

			// Nothing was applied and no watch fired.
			wantAbsent(t, e.a, e.path("new"))
			if stat := wantData(t, e.a, counter, "0"); stat.Version != 0 {
				t.Fatalf("counter version %d after a failed Multi, want 0", stat.Version)
			}
			_, after, err := e.a.Get(e.root)
			wantNoErr(t, "Get root", err)
			if after.ChildVersion != before.ChildVersion || after.NumChildren != before.NumChildren {
				t.Fatalf("root stat %+v after a failed Multi, was %+v", after, before)
			}
			wantChildren(t, e.b, e.root, "counter")
			wantNoEvent(t, childCh, "a failed Multi")
			wantNoEvent(t, dataCh, "a failed Multi")
			// The next sequential name is unaffected too.
			seq := mustCreate(t, e.a, e.path("s-"), "", coord.PersistentSequential)
			if want := e.path("s-0000000001"); seq != want {
				t.Fatalf("sequential after a failed Multi: %s, want %s", seq, want)
			}
		})
	}
}

func runConcurrency(t *testing.T, newBackend NewBackend) {
	t.Run("CompareAndSetLosesNoUpdate", func(t *testing.T) {
		e := setup(t, newBackend)
		counter := mustCreate(t, e.a, e.path("counter"), "0", coord.Persistent)
		sessions := []coord.Store{e.a, e.b, e.session()}
		const workersPerSession, increments = 3, 20
		var wg sync.WaitGroup
		errs := make(chan error, len(sessions)*workersPerSession)
		for _, s := range sessions {
			for w := 0; w < workersPerSession; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- increment(s, counter, increments)
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			wantNoErr(t, "increment", err)
		}
		want := len(sessions) * workersPerSession * increments
		stat := wantData(t, e.a, counter, strconv.Itoa(want))
		if int(stat.Version) != want {
			t.Fatalf("counter version %d, want %d", stat.Version, want)
		}
	})

	t.Run("ConcurrentCreateOneWins", func(t *testing.T) {
		e := setup(t, newBackend)
		p := e.path("leader")
		sessions := []coord.Store{e.a, e.b, e.session(), e.session()}
		var wg sync.WaitGroup
		results := make([]error, len(sessions))
		for i, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i] = s.Create(p, []byte(strconv.Itoa(i)), coord.Ephemeral)
			}()
		}
		wg.Wait()
		winners := 0
		for i, err := range results {
			switch {
			case err == nil:
				winners++
				_, stat, gerr := e.a.Get(p)
				wantNoErr(t, "Get", gerr)
				if stat.EphemeralOwner != sessions[i].SessionID() {
					t.Fatalf("winner %d does not own the node", i)
				}
			case !errors.Is(err, coord.ErrNodeExists):
				t.Fatalf("session %d: %v", i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("%d sessions created the same node", winners)
		}
	})
}

// increment adds one to a decimal counter n times by compare-and-set.
func increment(s coord.Store, path string, n int) error {
	for done := 0; done < n; {
		data, stat, err := s.Get(path)
		if err != nil {
			return err
		}
		value, err := strconv.Atoi(string(data))
		if err != nil {
			return err
		}
		_, err = s.Set(path, []byte(strconv.Itoa(value+1)), stat.Version)
		switch {
		case err == nil:
			done++
		case !errors.Is(err, coord.ErrBadVersion):
			return err
		}
	}
	return nil
}
