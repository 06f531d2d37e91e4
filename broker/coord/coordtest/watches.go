package coordtest

import (
	"testing"

	"millrace/broker/coord"
)

func runWatches(t *testing.T, newBackend NewBackend) {
	t.Run("GetWFiresOnSet", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("n"), "0", coord.Persistent)
		data, stat, ch, err := e.a.GetW(p)
		wantNoErr(t, "GetW", err)
		if string(data) != "0" || stat.Version != 0 {
			t.Fatalf("GetW = %q, %+v", data, stat)
		}
		if _, err := e.b.Set(p, []byte("1"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ch, coord.Event{Type: coord.EventDataChanged, Path: p})
		// One-shot: a later change does not reach the spent watch, but a
		// re-armed one does.
		_, _, again, err := e.a.GetW(p)
		wantNoErr(t, "GetW re-arm", err)
		if _, err := e.b.Set(p, []byte("2"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, again, coord.Event{Type: coord.EventDataChanged, Path: p})
	})

	t.Run("GetWFiresOnDelete", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("n"), "", coord.Persistent)
		_, _, ch, err := e.a.GetW(p)
		wantNoErr(t, "GetW", err)
		wantNoErr(t, "Delete", e.b.Delete(p, coord.AnyVersion))
		waitEvent(t, ch, coord.Event{Type: coord.EventDeleted, Path: p})
	})

	t.Run("GetWOnMissingNodeSetsNoWatch", func(t *testing.T) {
		e := setup(t, newBackend)
		_, _, ch, err := e.a.GetW(e.path("missing"))
		wantErr(t, "GetW of a missing node", err, coord.ErrNoNode)
		if ch != nil {
			t.Fatal("GetW of a missing node returned a watch channel")
		}
	})

	t.Run("GetWIgnoresChildren", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("n"), "", coord.Persistent)
		_, _, ch, err := e.a.GetW(p)
		wantNoErr(t, "GetW", err)
		mustCreate(t, e.b, p+"/child", "", coord.Persistent)
		wantData(t, e.a, p, "")
		wantNoEvent(t, ch, "a child was created")
		if _, err := e.b.Set(p, []byte("now"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ch, coord.Event{Type: coord.EventDataChanged, Path: p})
	})

	t.Run("ExistsWFiresOnCreate", func(t *testing.T) {
		e := setup(t, newBackend)
		p := e.path("later")
		ok, _, ch, err := e.a.ExistsW(p)
		wantNoErr(t, "ExistsW", err)
		if ok {
			t.Fatal("ExistsW reports a node that was never created")
		}
		mustCreate(t, e.b, p, "", coord.Ephemeral)
		waitEvent(t, ch, coord.Event{Type: coord.EventCreated, Path: p})
	})

	t.Run("ExistsWFiresOnSetAndDelete", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("n"), "", coord.Persistent)
		ok, stat, ch, err := e.a.ExistsW(p)
		wantNoErr(t, "ExistsW", err)
		if !ok || stat.Version != 0 {
			t.Fatalf("ExistsW = %v, %+v", ok, stat)
		}
		if _, err := e.b.Set(p, []byte("x"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ch, coord.Event{Type: coord.EventDataChanged, Path: p})
		_, _, ch, err = e.a.ExistsW(p)
		wantNoErr(t, "ExistsW re-arm", err)
		wantNoErr(t, "Delete", e.b.Delete(p, coord.AnyVersion))
		waitEvent(t, ch, coord.Event{Type: coord.EventDeleted, Path: p})
	})

	t.Run("ChildrenWFiresOnChildCreateAndDelete", func(t *testing.T) {
		e := setup(t, newBackend)
		parent := mustCreate(t, e.a, e.path("p"), "", coord.Persistent)
		names, ch, err := e.a.ChildrenW(parent)
		wantNoErr(t, "ChildrenW", err)
		if len(names) != 0 {
			t.Fatalf("ChildrenW = %q, want none", names)
		}
		child := mustCreate(t, e.b, parent+"/c", "", coord.Persistent)
		waitEvent(t, ch, coord.Event{Type: coord.EventChildrenChanged, Path: parent})

		names, ch, err = e.a.ChildrenW(parent)
		wantNoErr(t, "ChildrenW re-arm", err)
		if len(names) != 1 || names[0] != "c" {
			t.Fatalf("ChildrenW = %q, want [c]", names)
		}
		// Neither the parent's data nor a child's data are its children.
		if _, err := e.b.Set(child, []byte("x"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		if _, err := e.b.Set(parent, []byte("x"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, e.b, child+"/grandchild", "", coord.Persistent)
		wantChildren(t, e.a, parent, "c")
		wantNoEvent(t, ch, "data changes and a grandchild")
		wantNoErr(t, "Delete grandchild", e.b.Delete(child+"/grandchild", coord.AnyVersion))
		wantNoErr(t, "Delete child", e.b.Delete(child, coord.AnyVersion))
		waitEvent(t, ch, coord.Event{Type: coord.EventChildrenChanged, Path: parent})
	})

	t.Run("ChildrenWFiresOnNodeDelete", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("p"), "", coord.Persistent)
		_, ch, err := e.a.ChildrenW(p)
		wantNoErr(t, "ChildrenW", err)
		wantNoErr(t, "Delete", e.b.Delete(p, coord.AnyVersion))
		waitEvent(t, ch, coord.Event{Type: coord.EventDeleted, Path: p})
	})

	t.Run("EveryWatcherFires", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("n"), "", coord.Persistent)
		_, _, fromA1, err := e.a.GetW(p)
		wantNoErr(t, "GetW", err)
		_, _, fromA2, err := e.a.ExistsW(p)
		wantNoErr(t, "ExistsW", err)
		_, _, fromB, err := e.b.GetW(p)
		wantNoErr(t, "GetW", err)
		c := e.session()
		if _, err := c.Set(p, []byte("x"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		want := coord.Event{Type: coord.EventDataChanged, Path: p}
		waitEvent(t, fromA1, want)
		waitEvent(t, fromA2, want)
		waitEvent(t, fromB, want)
	})

	t.Run("OwnChangesFireOwnWatches", func(t *testing.T) {
		e := setup(t, newBackend)
		p := e.path("self")
		_, _, ch, err := e.a.ExistsW(p)
		wantNoErr(t, "ExistsW", err)
		mustCreate(t, e.a, p, "", coord.Persistent)
		waitEvent(t, ch, coord.Event{Type: coord.EventCreated, Path: p})
	})

	t.Run("UnrelatedChangesDoNotFire", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("n"), "", coord.Persistent)
		_, _, dataCh, err := e.a.GetW(p)
		wantNoErr(t, "GetW", err)
		_, childCh, err := e.a.ChildrenW(p)
		wantNoErr(t, "ChildrenW", err)
		_, _, existCh, err := e.a.ExistsW(e.path("other"))
		wantNoErr(t, "ExistsW", err)
		mustCreate(t, e.b, e.path("n2"), "", coord.Persistent)
		if _, err := e.b.Set(e.path("n2"), []byte("x"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		_, err = e.b.Set(p, []byte("x"), 5)
		wantErr(t, "Set at a bad version", err, coord.ErrBadVersion)
		_, err = e.b.Create(p, nil, coord.Persistent)
		wantErr(t, "duplicate Create", err, coord.ErrNodeExists)
		wantData(t, e.a, p, "")
		wantNoEvent(t, dataCh, "unrelated and failed changes")
		wantNoEvent(t, childCh, "unrelated and failed changes")
		wantNoEvent(t, existCh, "unrelated and failed changes")
	})
}
