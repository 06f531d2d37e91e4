package zk

import (
	"fmt"
	"sync"

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

// stateQueue delivers session states in order without ever blocking the
// client's goroutine: states queue until the owner reads them. Its goroutine
// is joined by stop, which closes the channel.
type stateQueue struct {
	out  chan coord.SessionState
	wake chan struct{} // capacity 1
	quit chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex // guards the following
	pending []coord.SessionState
}

func newStateQueue() *stateQueue {
	q := &stateQueue{
		out:  make(chan coord.SessionState),
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go q.run()
	return q
}

// push queues a state.
func (q *stateQueue) push(state coord.SessionState) {
	q.mu.Lock()
	q.pending = append(q.pending, state)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *stateQueue) run() {
	defer close(q.done)
	defer close(q.out)
	for {
		q.mu.Lock()
		var next coord.SessionState
		have := len(q.pending) > 0
		if have {
			next = q.pending[0]
			q.pending = q.pending[1:]
		}
		q.mu.Unlock()
		if !have {
			select {
			case <-q.wake:
				continue
			case <-q.quit:
				return
			}
		}
		select {
		case q.out <- next:
		case <-q.quit:
			return
		}
	}
}

// stop ends delivery (undelivered states are dropped), closes the channel and
// waits for the goroutine.
func (q *stateQueue) stop() {
	q.once.Do(func() { close(q.quit) })
	<-q.done
}
