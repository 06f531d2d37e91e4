package zk

import (
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"millrace/broker/coord"
)

// watch turns one of the client's watch channels into a coord one. The client
// feeds every watch channel exactly once — with the event, or with
// EventNotWatching when the session expires or the client closes — so each
// translating goroutine ends, and Close waits for all of them.
//
// The translation costs one hop: a watch event reaches the coord channel a
// moment after the client saw it, so it may arrive after the reply to a later
// read. Owners re-read after an event anyway.
func (s *Store) watch(op, path string, zch <-chan gozk.Event) (<-chan coord.Event, error) {
	s.mu.Lock()
	if s.closing {
		// The watch was set as Close began; the client will invalidate it
		// with nobody listening, and the caller learns the store is closed.
		s.mu.Unlock()
		return nil, fmt.Errorf("coord/zk: %s %s: %w", op, path, errClosed())
	}
	// Added under the lock and only before closing is set, so every Add
	// happens before Close's Wait.
	s.watches.Add(1)
	s.mu.Unlock()
	out := make(chan coord.Event, 1)
	go func() {
		defer s.watches.Done()
		defer close(out)
		ev, ok := <-zch
		if !ok {
			out <- coord.Event{Type: coord.EventNotWatching, Path: path}
			return
		}
		out <- coord.Event{Type: eventType(ev.Type), Path: s.eventPath(ev.Path, path)}
	}()
	return out, nil
}

// eventPath maps an event's server path back into the store's, falling back
// to the watched path.
func (s *Store) eventPath(server, watched string) string {
	if server == "" {
		return watched
	}
	return s.relative(server)
}

// eventType maps the client's event types to coord's. Anything else (a
// session event would be one) means the watch can no longer fire.
func eventType(t gozk.EventType) coord.EventType {
	switch t {
	case gozk.EventNodeCreated:
		return coord.EventCreated
	case gozk.EventNodeDeleted:
		return coord.EventDeleted
	case gozk.EventNodeDataChanged:
		return coord.EventDataChanged
	case gozk.EventNodeChildrenChanged:
		return coord.EventChildrenChanged
	}
	return coord.EventNotWatching
}
