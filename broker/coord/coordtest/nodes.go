package coordtest

import (
	"fmt"
	"testing"

	"millrace/broker/coord"
)

func runNodes(t *testing.T, newBackend NewBackend) {
	t.Run("CreatePersistentAndGet", func(t *testing.T) {
		e := setup(t, newBackend)
		p := e.path("node")
		if got := mustCreate(t, e.a, p, "hello", coord.Persistent); got != p {
			t.Fatalf("Create returned %q, want %q", got, p)
		}
		stat := wantData(t, e.a, p, "hello")
		if stat.Version != 0 || stat.ChildVersion != 0 || stat.NumChildren != 0 || stat.EphemeralOwner != 0 {
			t.Fatalf("new node stat %+v, want versions 0, no children, no owner", stat)
		}
		if stat.Created.IsZero() || stat.Modified.IsZero() {
			t.Fatalf("new node stat %+v has zero times", stat)
		}
		// Another session sees it too.
		wantData(t, e.b, p, "hello")
		ok, stat, err := e.b.Exists(p)
		wantNoErr(t, "Exists", err)
		if !ok || stat.Version != 0 {
			t.Fatalf("Exists = %v, %+v", ok, stat)
		}
	})

	t.Run("CreateEmptyData", func(t *testing.T) {
		e := setup(t, newBackend)
		p := e.path("empty")
		if _, err := e.a.Create(p, nil, coord.Persistent); err != nil {
			t.Fatal(err)
		}
		data, _, err := e.a.Get(p)
		wantNoErr(t, "Get", err)
		if len(data) != 0 {
			t.Fatalf("Get = %q, want empty", data)
		}
	})

	t.Run("CreateNeedsParent", func(t *testing.T) {
		e := setup(t, newBackend)
		_, err := e.a.Create(e.path("missing/child"), nil, coord.Persistent)
		wantErr(t, "Create under a missing parent", err, coord.ErrNoNode)
		_, err = e.a.Create(e.path("missing/seq-"), nil, coord.PersistentSequential)
		wantErr(t, "sequential Create under a missing parent", err, coord.ErrNoNode)
		wantAbsent(t, e.a, e.path("missing"))
	})

	t.Run("CreateDuplicate", func(t *testing.T) {
		e := setup(t, newBackend)
		p := e.path("dup")
		mustCreate(t, e.a, p, "first", coord.Persistent)
		_, err := e.b.Create(p, []byte("second"), coord.Persistent)
		wantErr(t, "second Create", err, coord.ErrNodeExists)
		_, err = e.b.Create(p, []byte("third"), coord.Ephemeral)
		wantErr(t, "ephemeral Create over a persistent node", err, coord.ErrNodeExists)
		wantData(t, e.a, p, "first")
	})

	t.Run("Sequential", func(t *testing.T) {
		e := setup(t, newBackend)
		parent := mustCreate(t, e.a, e.path("queue"), "", coord.Persistent)
		prev := ""
		for i := 0; i < 3; i++ {
			created := mustCreate(t, e.a, parent+"/item-", fmt.Sprint(i), coord.PersistentSequential)
			prefix, suffix := sequenceSuffix(t, created)
			if prefix != parent+"/item-" {
				t.Fatalf("sequential node %q does not start with %q", created, parent+"/item-")
			}
			// ZooKeeper's counter is the number of children ever created.
			if want := fmt.Sprintf("%010d", i); suffix != want {
				t.Fatalf("sequential suffix %s, want %s (children created before it)", suffix, want)
			}
			if created <= prev {
				t.Fatalf("sequential names not increasing: %q after %q", created, prev)
			}
			prev = created
			wantData(t, e.a, created, fmt.Sprint(i))
		}
		// Creating another child moves the counter on and deleting it does not
		// move it back, so names are never reused; deletes do not count
		// (they do bump the child version).
		other := mustCreate(t, e.b, parent+"/other", "", coord.Persistent)
		wantNoErr(t, "Delete", e.b.Delete(other, coord.AnyVersion))
		ephemeral := mustCreate(t, e.b, parent+"/eph-", "", coord.EphemeralSequential)
		_, suffix := sequenceSuffix(t, ephemeral)
		if suffix != "0000000004" {
			t.Fatalf("after 3 sequential creates and a create+delete, suffix %s, want 0000000004", suffix)
		}
		_, stat, err := e.a.Get(ephemeral)
		wantNoErr(t, "Get ephemeral sequential", err)
		if stat.EphemeralOwner != e.b.SessionID() {
			t.Fatalf("ephemeral sequential owner %d, want %d", stat.EphemeralOwner, e.b.SessionID())
		}
		// A trailing slash names the child by its counter alone.
		bare := mustCreate(t, e.a, parent+"/", "", coord.PersistentSequential)
		if bare != parent+"/0000000005" {
			t.Fatalf("Create(%s/) = %s, want %s/0000000005", parent, bare, parent)
		}
	})

	t.Run("Ephemeral", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("eph"), "x", coord.Ephemeral)
		_, stat, err := e.b.Get(p)
		wantNoErr(t, "Get", err)
		if stat.EphemeralOwner == 0 || stat.EphemeralOwner != e.a.SessionID() {
			t.Fatalf("EphemeralOwner = %d, want session %d", stat.EphemeralOwner, e.a.SessionID())
		}
		_, err = e.a.Create(p+"/child", nil, coord.Persistent)
		wantErr(t, "child of an ephemeral", err, coord.ErrEphemeralParent)
		_, err = e.a.Create(p+"/child", nil, coord.Ephemeral)
		wantErr(t, "ephemeral child of an ephemeral", err, coord.ErrEphemeralParent)
		_, err = e.a.Create(p+"/seq-", nil, coord.EphemeralSequential)
		wantErr(t, "sequential child of an ephemeral", err, coord.ErrEphemeralParent)
		// Another session may change or delete it.
		_, err = e.b.Set(p, []byte("y"), 0)
		wantNoErr(t, "Set by another session", err)
		wantNoErr(t, "Delete by another session", e.b.Delete(p, 1))
		wantAbsent(t, e.a, p)
	})

	t.Run("SetVersions", func(t *testing.T) {
		e := setup(t, newBackend)
		p := mustCreate(t, e.a, e.path("v"), "0", coord.Persistent)
		stat, err := e.a.Set(p, []byte("1"), 0)
		wantNoErr(t, "Set at version 0", err)
		if stat.Version != 1 {
			t.Fatalf("Set returned version %d, want 1", stat.Version)
		}
		_, err = e.b.Set(p, []byte("stale"), 0)
		wantErr(t, "Set at a stale version", err, coord.ErrBadVersion)
		_, err = e.b.Set(p, []byte("future"), 7)
		wantErr(t, "Set at a future version", err, coord.ErrBadVersion)
		stat = wantData(t, e.a, p, "1")
		if stat.Version != 1 {
			t.Fatalf("version %d after failed Sets, want 1", stat.Version)
		}
		stat, err = e.b.Set(p, []byte("any"), coord.AnyVersion)
		wantNoErr(t, "Set at AnyVersion", err)
		if stat.Version != 2 {
			t.Fatalf("Set at AnyVersion returned version %d, want 2", stat.Version)
		}
		stat = wantData(t, e.a, p, "any")
		if stat.Version != 2 || stat.Modified.Before(stat.Created) {
			t.Fatalf("stat %+v after two Sets", stat)
		}
		_, err = e.a.Set(e.path("missing"), nil, coord.AnyVersion)
		wantErr(t, "Set of a missing node", err, coord.ErrNoNode)
		_, _, err = e.a.Get(e.path("missing"))
		wantErr(t, "Get of a missing node", err, coord.ErrNoNode)
	})

	t.Run("DataIsCopied", func(t *testing.T) {
		e := setup(t, newBackend)
		buf := []byte("abc")
		p := e.path("copy")
		if _, err := e.a.Create(p, buf, coord.Persistent); err != nil {
			t.Fatal(err)
		}
		buf[0] = 'X'
		data, _, err := e.a.Get(p)
		wantNoErr(t, "Get", err)
		data[1] = 'Y'
		wantData(t, e.a, p, "abc")
	})

	t.Run("Delete", func(t *testing.T) {
		e := setup(t, newBackend)
		parent := mustCreate(t, e.a, e.path("parent"), "", coord.Persistent)
		child := mustCreate(t, e.a, parent+"/child", "", coord.Persistent)
		wantErr(t, "Delete with children", e.a.Delete(parent, coord.AnyVersion), coord.ErrNotEmpty)
		if _, err := e.a.Set(child, []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "Delete at a stale version", e.b.Delete(child, 0), coord.ErrBadVersion)
		wantNoErr(t, "Delete at the current version", e.b.Delete(child, 1))
		wantErr(t, "Delete twice", e.b.Delete(child, coord.AnyVersion), coord.ErrNoNode)
		wantNoErr(t, "Delete the emptied parent", e.a.Delete(parent, coord.AnyVersion))
		wantAbsent(t, e.b, parent)
		// The name can be used again, from version 0.
		mustCreate(t, e.a, parent, "again", coord.Persistent)
		if stat := wantData(t, e.a, parent, "again"); stat.Version != 0 {
			t.Fatalf("re-created node at version %d, want 0", stat.Version)
		}
	})

	t.Run("ChildrenAndStat", func(t *testing.T) {
		e := setup(t, newBackend)
		parent := mustCreate(t, e.a, e.path("p"), "", coord.Persistent)
		wantChildren(t, e.a, parent)
		for _, name := range []string{"zeta", "alpha", "mid", "Beta", "10", "9"} {
			mustCreate(t, e.a, parent+"/"+name, "", coord.Persistent)
		}
		mustCreate(t, e.b, parent+"/eph", "", coord.Ephemeral)
		wantChildren(t, e.b, parent, "10", "9", "Beta", "alpha", "eph", "mid", "zeta")
		stat := wantData(t, e.a, parent, "")
		if stat.NumChildren != 7 || stat.ChildVersion != 7 || stat.Version != 0 {
			t.Fatalf("parent stat %+v, want 7 children, child version 7, version 0", stat)
		}
		// Changing a child's data is not a change of the parent's children.
		if _, err := e.a.Set(parent+"/mid", []byte("x"), coord.AnyVersion); err != nil {
			t.Fatal(err)
		}
		wantNoErr(t, "Delete", e.a.Delete(parent+"/alpha", coord.AnyVersion))
		stat = wantData(t, e.a, parent, "")
		if stat.NumChildren != 6 || stat.ChildVersion != 8 || stat.Version != 0 {
			t.Fatalf("parent stat %+v after a child Set and Delete, want 6 children, child version 8, version 0", stat)
		}
		_, err := e.a.Children(e.path("missing"))
		wantErr(t, "Children of a missing node", err, coord.ErrNoNode)
		// The root always exists.
		ok, _, err := e.a.Exists("/")
		wantNoErr(t, "Exists(/)", err)
		if !ok {
			t.Fatal("root does not exist")
		}
		names, err := e.a.Children("/")
		wantNoErr(t, "Children(/)", err)
		found := false
		for _, name := range names {
			found = found || "/"+name == suiteRoot
		}
		if !found {
			t.Fatalf("Children(/) = %q lacks %s", names, suiteRoot)
		}
	})

	t.Run("BadPaths", func(t *testing.T) {
		e := setup(t, newBackend)
		for _, path := range []string{"", "relative", e.root + "/", e.root + "//x", e.root + "/./x",
			e.root + "/../x", e.root + "/x/..", e.root + "/a\x00b", "//"} {
			_, err := e.a.Create(path, nil, coord.Persistent)
			wantErr(t, fmt.Sprintf("Create(%q)", path), err, coord.ErrBadPath)
			_, _, err = e.a.Get(path)
			wantErr(t, fmt.Sprintf("Get(%q)", path), err, coord.ErrBadPath)
			_, _, _, err = e.a.GetW(path)
			wantErr(t, fmt.Sprintf("GetW(%q)", path), err, coord.ErrBadPath)
			_, _, err = e.a.Exists(path)
			wantErr(t, fmt.Sprintf("Exists(%q)", path), err, coord.ErrBadPath)
			_, _, _, err = e.a.ExistsW(path)
			wantErr(t, fmt.Sprintf("ExistsW(%q)", path), err, coord.ErrBadPath)
			_, err = e.a.Set(path, nil, coord.AnyVersion)
			wantErr(t, fmt.Sprintf("Set(%q)", path), err, coord.ErrBadPath)
			wantErr(t, fmt.Sprintf("Delete(%q)", path), e.a.Delete(path, coord.AnyVersion), coord.ErrBadPath)
			_, err = e.a.Children(path)
			wantErr(t, fmt.Sprintf("Children(%q)", path), err, coord.ErrBadPath)
			_, _, err = e.a.ChildrenW(path)
			wantErr(t, fmt.Sprintf("ChildrenW(%q)", path), err, coord.ErrBadPath)
		}
		wantChildren(t, e.a, e.root)
	})

	t.Run("EnsurePath", func(t *testing.T) {
		e := setup(t, newBackend)
		deep := e.path("a/b/c")
		wantNoErr(t, "EnsurePath", coord.EnsurePath(e.a, deep))
		wantNoErr(t, "EnsurePath again", coord.EnsurePath(e.b, deep))
		wantChildren(t, e.a, e.path("a"), "b")
		wantChildren(t, e.a, e.path("a/b"), "c")
		_, stat, err := e.a.Get(deep)
		wantNoErr(t, "Get", err)
		if stat.EphemeralOwner != 0 {
			t.Fatal("EnsurePath made an ephemeral node")
		}
		wantErr(t, "EnsurePath of a bad path", coord.EnsurePath(e.a, "no/slash"), coord.ErrBadPath)
	})
}
