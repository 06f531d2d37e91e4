package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"millrace/broker/coord"
)

// node is one znode. Its data slice is never modified in place (Set replaces
// it), so readers may hand it out after copying.
type node struct {
	data     []byte
	version  int32
	cversion int32
	// seq counts the children ever created: ZooKeeper's sequential-name
	// counter. Unlike cversion, deletes do not move it.
	seq      int32
	owner    int64 // ephemeral owner's session ID, 0 for persistent
	ctime    int64 // Unix ns
	mtime    int64 // Unix ns
	children map[string]struct{}
}

func (n *node) stat() coord.Stat {
	return coord.Stat{
		Version:        n.version,
		ChildVersion:   n.cversion,
		NumChildren:    int32(len(n.children)),
		EphemeralOwner: n.owner,
		Created:        time.Unix(0, n.ctime),
		Modified:       time.Unix(0, n.mtime),
	}
}

func (n *node) sortedChildren() []string {
	return slices.Sorted(maps.Keys(n.children))
}

// tree is the in-memory namespace. It is not safe for concurrent use: the
// Server's mutex guards it. Its primitives do no permission or version checks
// (those are in ops.go); they are also what WAL replay applies.
type tree struct {
	nodes map[string]*node
	// owned indexes ephemeral paths by owner, so closing a session does not
	// scan the whole tree.
	owned map[int64]map[string]struct{}
}

func newTree() *tree {
	return &tree{
		nodes: map[string]*node{"/": {children: map[string]struct{}{}}},
		owned: map[int64]map[string]struct{}{},
	}
}

func (t *tree) own(owner int64, path string) {
	if owner == 0 {
		return
	}
	if t.owned[owner] == nil {
		t.owned[owner] = map[string]struct{}{}
	}
	t.owned[owner][path] = struct{}{}
}

func (t *tree) disown(owner int64, path string) {
	if owner == 0 {
		return
	}
	delete(t.owned[owner], path)
	if len(t.owned[owner]) == 0 {
		delete(t.owned, owner)
	}
}

// create adds a node under an existing, non-ephemeral parent and returns a
// function that undoes it.
func (t *tree) create(path string, data []byte, owner, now int64) (func(), error) {
	if _, ok := t.nodes[path]; ok || path == "/" {
		return nil, fmt.Errorf("%w: %s", coord.ErrNodeExists, path)
	}
	parentPath := coord.ParentPath(path)
	parent, ok := t.nodes[parentPath]
	if !ok {
		return nil, fmt.Errorf("%w: %s", coord.ErrNoNode, parentPath)
	}
	if parent.owner != 0 {
		return nil, fmt.Errorf("%w: %s", coord.ErrEphemeralParent, parentPath)
	}
	name := coord.BaseName(path)
	t.nodes[path] = &node{data: data, owner: owner, ctime: now, mtime: now, children: map[string]struct{}{}}
	t.own(owner, path)
	parent.children[name] = struct{}{}
	parent.cversion++
	parent.seq++
	return func() {
		delete(t.nodes, path)
		t.disown(owner, path)
		delete(parent.children, name)
		parent.cversion--
		parent.seq--
	}, nil
}

// set replaces a node's data and bumps its version.
func (t *tree) set(path string, data []byte, now int64) (func(), error) {
	n, ok := t.nodes[path]
	if !ok {
		return nil, fmt.Errorf("%w: %s", coord.ErrNoNode, path)
	}
	oldData, oldMtime := n.data, n.mtime
	n.data, n.mtime = data, now
	n.version++
	return func() {
		n.data, n.mtime = oldData, oldMtime
		n.version--
	}, nil
}

// remove deletes a childless node and bumps its parent's cversion.
func (t *tree) remove(path string) (func(), error) {
	n, ok := t.nodes[path]
	if !ok {
		return nil, fmt.Errorf("%w: %s", coord.ErrNoNode, path)
	}
	if path == "/" {
		return nil, fmt.Errorf("%w: cannot delete the root", coord.ErrBadPath)
	}
	if len(n.children) > 0 {
		return nil, fmt.Errorf("%w: %s", coord.ErrNotEmpty, path)
	}
	parent := t.nodes[coord.ParentPath(path)]
	name := coord.BaseName(path)
	delete(t.nodes, path)
	t.disown(n.owner, path)
	delete(parent.children, name)
	parent.cversion++
	return func() {
		t.nodes[path] = n
		t.own(n.owner, path)
		parent.children[name] = struct{}{}
		parent.cversion--
	}, nil
}

// apply replays one primitive op.
func (t *tree) apply(op walOp) error {
	var err error
	switch op.kind {
	case opCreate:
		_, err = t.create(op.path, op.data, op.owner, op.time)
	case opSet:
		_, err = t.set(op.path, op.data, op.time)
	case opDelete:
		_, err = t.remove(op.path)
	}
	return err
}

// ephemerals lists, sorted, the paths of the nodes owned by a session (by any
// session when owner is 0). Ephemerals have no children, so any order of
// deletion works; sorting keeps the WAL deterministic.
func (t *tree) ephemerals(owner int64) []string {
	var paths []string
	for id, owned := range t.owned {
		if owner == 0 || id == owner {
			for path := range owned {
				paths = append(paths, path)
			}
		}
	}
	slices.Sort(paths)
	return paths
}

// encodeSnapshot serialises every node, parents before children. Ephemerals
// are included so that WAL transactions after the snapshot (a Set on an
// ephemeral, its deletion at session close) replay exactly; Open drops them
// after replay.
func (t *tree) encodeSnapshot(zxid, lastSession int64) []byte {
	paths := slices.Collect(maps.Keys(t.nodes))
	// Sorting by depth then name puts every parent before its children.
	slices.SortFunc(paths, func(a, b string) int {
		if da, db := strings.Count(a, "/"), strings.Count(b, "/"); da != db {
			return da - db
		}
		return strings.Compare(a, b)
	})
	var header []byte
	header = binary.AppendUvarint(header, uint64(zxid))
	header = binary.AppendUvarint(header, uint64(lastSession))
	header = binary.AppendUvarint(header, uint64(len(paths)))
	buf := append([]byte(snapshotMagic), nil...)
	buf = appendFrame(buf, header)
	var payload []byte
	for _, path := range paths {
		n := t.nodes[path]
		payload = appendString(payload[:0], path)
		payload = appendBytes(payload, n.data)
		payload = binary.AppendVarint(payload, int64(n.version))
		payload = binary.AppendVarint(payload, int64(n.cversion))
		payload = binary.AppendVarint(payload, int64(n.seq))
		payload = binary.AppendVarint(payload, n.ctime)
		payload = binary.AppendVarint(payload, n.mtime)
		payload = binary.AppendVarint(payload, n.owner)
		buf = appendFrame(buf, payload)
	}
	return buf
}

// decodeSnapshot rebuilds a tree from a snapshot file's content. Unlike the
// WAL, a snapshot is only ever published whole (rename after fsync), so any
// damage is an error rather than a tail to cut.
func decodeSnapshot(content []byte) (t *tree, zxid, lastSession int64, err error) {
	if !bytes.HasPrefix(content, []byte(snapshotMagic)) {
		return nil, 0, 0, fmt.Errorf("%w: snapshot magic", errCorrupt)
	}
	r := bytes.NewReader(content[len(snapshotMagic):])
	header, err := readFrame(r)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("snapshot header: %w", err)
	}
	d := &decoder{buf: header}
	zxid = int64(d.uvarint())
	lastSession = int64(d.uvarint())
	count := d.uvarint()
	if d.err != nil {
		return nil, 0, 0, fmt.Errorf("snapshot header: %w", d.err)
	}
	t = newTree()
	for i := uint64(0); i < count; i++ {
		payload, err := readFrame(r)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("snapshot node %d of %d: %w", i, count, err)
		}
		d := &decoder{buf: payload}
		path := string(d.bytes())
		n := &node{data: d.bytes(), children: map[string]struct{}{}}
		n.version = int32(d.varint())
		n.cversion = int32(d.varint())
		n.seq = int32(d.varint())
		n.ctime = d.varint()
		n.mtime = d.varint()
		n.owner = d.varint()
		if d.err == nil && len(d.buf) != 0 {
			d.fail()
		}
		if d.err != nil {
			return nil, 0, 0, fmt.Errorf("snapshot node %d: %w", i, d.err)
		}
		if path == "/" {
			n.children = t.nodes["/"].children
			t.nodes["/"] = n
			continue
		}
		if err := coord.ValidatePath(path); err != nil {
			return nil, 0, 0, fmt.Errorf("%w: snapshot node %d: %v", errCorrupt, i, err)
		}
		parent, ok := t.nodes[coord.ParentPath(path)]
		if !ok {
			return nil, 0, 0, fmt.Errorf("%w: snapshot node %s before its parent", errCorrupt, path)
		}
		if _, dup := t.nodes[path]; dup {
			return nil, 0, 0, fmt.Errorf("%w: snapshot node %s twice", errCorrupt, path)
		}
		parent.children[coord.BaseName(path)] = struct{}{}
		t.nodes[path] = n
		t.own(n.owner, path)
	}
	if r.Len() != 0 {
		return nil, 0, 0, fmt.Errorf("%w: %d bytes after the last snapshot node", errCorrupt, r.Len())
	}
	return t, zxid, lastSession, nil
}
