package embedded

import "millrace/broker/coord"

// watch is one armed one-shot watch. Its channel has room for the single event
// it will ever carry, so delivering never blocks on a slow reader.
type watch struct {
	ch    chan coord.Event
	owner *session
}

// firing is a watch taken out of the registry under the lock, to be delivered
// after the lock is released.
type firing struct {
	w     *watch
	event coord.Event
}

func deliver(firings []firing) {
	for _, f := range firings {
		f.w.ch <- f.event
		close(f.w.ch)
	}
}

// watches is the registry of armed watches, by kind and path, as ZooKeeper
// keeps them: data watches (GetW, ExistsW on an existing node), existence
// watches (ExistsW on a missing node) and child watches (ChildrenW). It is
// guarded by the Server's mutex.
type watches struct {
	data     map[string][]*watch
	exist    map[string][]*watch
	children map[string][]*watch
}

func newWatches() *watches {
	return &watches{
		data:     map[string][]*watch{},
		exist:    map[string][]*watch{},
		children: map[string][]*watch{},
	}
}

func (ws *watches) add(registry map[string][]*watch, path string, owner *session) <-chan coord.Event {
	w := &watch{ch: make(chan coord.Event, 1), owner: owner}
	registry[path] = append(registry[path], w)
	return w.ch
}

// take removes every watch on path from registry and queues its event.
func (ws *watches) take(firings []firing, registry map[string][]*watch, path string, typ coord.EventType) []firing {
	for _, w := range registry[path] {
		firings = append(firings, firing{w: w, event: coord.Event{Type: typ, Path: path}})
	}
	delete(registry, path)
	return firings
}

// change is one applied primitive, kept to trigger watches once the whole
// transaction has been applied.
type change struct {
	kind byte // opCreate, opSet or opDelete
	path string
}

// trigger takes the watches a transaction's changes fire, in ZooKeeper's
// manner: a create fires the node's existence watches and its parent's child
// watches; a set fires the node's data watches; a delete fires the node's data
// and child watches (EventDeleted) and its parent's child watches.
func (ws *watches) trigger(changes []change) []firing {
	var firings []firing
	for _, c := range changes {
		switch c.kind {
		case opCreate:
			firings = ws.take(firings, ws.exist, c.path, coord.EventCreated)
			firings = ws.take(firings, ws.children, coord.ParentPath(c.path), coord.EventChildrenChanged)
		case opSet:
			firings = ws.take(firings, ws.data, c.path, coord.EventDataChanged)
		case opDelete:
			firings = ws.take(firings, ws.data, c.path, coord.EventDeleted)
			firings = ws.take(firings, ws.children, c.path, coord.EventDeleted)
			firings = ws.take(firings, ws.children, coord.ParentPath(c.path), coord.EventChildrenChanged)
		}
	}
	return firings
}

// dropOwner takes every watch armed by owner (all watches when owner is nil)
// with EventNotWatching: the session that would have received them is gone.
func (ws *watches) dropOwner(owner *session) []firing {
	var firings []firing
	for _, registry := range []map[string][]*watch{ws.data, ws.exist, ws.children} {
		for path, list := range registry {
			kept := list[:0]
			for _, w := range list {
				if owner == nil || w.owner == owner {
					firings = append(firings, firing{w: w, event: coord.Event{Type: coord.EventNotWatching, Path: path}})
				} else {
					kept = append(kept, w)
				}
			}
			if len(kept) == 0 {
				delete(registry, path)
			} else {
				registry[path] = kept
			}
		}
	}
	return firings
}
