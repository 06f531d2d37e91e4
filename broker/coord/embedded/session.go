package embedded

import (
	"fmt"
	"time"

	"millrace/broker/coord"
	"millrace/broker/coord/internal/statequeue"
)

// session is one client of a Server; it implements coord.Store. Its id and
// closed fields are guarded by the Server's mutex, since ExpireSession and
// Server.Close change them together with the tree.
type session struct {
	server *Server
	events *statequeue.Queue
	id     int64
	closed bool
}

var _ coord.Store = (*session)(nil)

func newSession(s *Server, id int64) *session {
	return &session{server: s, id: id, events: statequeue.New()}
}

// txn collects a mutation's primitives as they are applied, so it can be
// logged, trigger watches, or be rolled back as a whole.
type txn struct {
	ops     []walOp
	changes []change
	undo    []func()
}

func (tx *txn) rollback() {
	for i := len(tx.undo) - 1; i >= 0; i-- {
		tx.undo[i]()
	}
}

// mutate applies fn under the lock, logs the result as one transaction, waits
// for it to be durable, and then fires the watches it triggered.
func (c *session) mutate(fn func(tx *txn, owner int64, now int64) error) error {
	s := c.server
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return coord.ErrClosed
	}
	if err := s.checkLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	tx := &txn{}
	if err := fn(tx, c.id, time.Now().UnixNano()); err != nil {
		tx.rollback()
		s.mu.Unlock()
		return err
	}
	if len(tx.ops) == 0 {
		s.mu.Unlock()
		return nil
	}
	b, firings := s.commitLocked(tx.ops, tx.changes)
	s.mu.Unlock()
	<-b.done
	// Even if persisting failed the change is in memory, so watchers learn of
	// it; the store refuses further mutations.
	deliver(firings)
	return b.err
}

// read runs fn under the lock on an open session.
func (c *session) read(fn func() error) error {
	s := c.server
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed || s.closed {
		return coord.ErrClosed
	}
	return fn()
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// Create implements coord.Store.
func (c *session) Create(path string, data []byte, mode coord.CreateMode) (string, error) {
	var created string
	err := c.mutate(func(tx *txn, owner, now int64) error {
		var err error
		created, err = c.server.createLocked(tx, path, clone(data), mode, owner, now)
		return err
	})
	return created, err
}

// Get implements coord.Store.
func (c *session) Get(path string) ([]byte, coord.Stat, error) {
	data, stat, _, err := c.get(path, false)
	return data, stat, err
}

// GetW implements coord.Store.
func (c *session) GetW(path string) ([]byte, coord.Stat, <-chan coord.Event, error) {
	return c.get(path, true)
}

func (c *session) get(path string, watch bool) (data []byte, stat coord.Stat, ch <-chan coord.Event, err error) {
	if err := coord.ValidatePath(path); err != nil {
		return nil, coord.Stat{}, nil, err
	}
	err = c.read(func() error {
		s := c.server
		n, ok := s.tree.nodes[path]
		if !ok {
			return fmt.Errorf("%w: %s", coord.ErrNoNode, path)
		}
		data, stat = clone(n.data), n.stat()
		if watch {
			ch = s.watches.add(s.watches.data, path, c)
		}
		return nil
	})
	return data, stat, ch, err
}

// Exists implements coord.Store.
func (c *session) Exists(path string) (bool, coord.Stat, error) {
	ok, stat, _, err := c.exists(path, false)
	return ok, stat, err
}

// ExistsW implements coord.Store.
func (c *session) ExistsW(path string) (bool, coord.Stat, <-chan coord.Event, error) {
	return c.exists(path, true)
}

func (c *session) exists(path string, watch bool) (found bool, stat coord.Stat, ch <-chan coord.Event, err error) {
	if err := coord.ValidatePath(path); err != nil {
		return false, coord.Stat{}, nil, err
	}
	err = c.read(func() error {
		s := c.server
		n, ok := s.tree.nodes[path]
		found = ok
		registry := s.watches.exist
		if ok {
			stat = n.stat()
			registry = s.watches.data
		}
		if watch {
			ch = s.watches.add(registry, path, c)
		}
		return nil
	})
	return found, stat, ch, err
}

// Set implements coord.Store.
func (c *session) Set(path string, data []byte, version int32) (coord.Stat, error) {
	var stat coord.Stat
	err := c.mutate(func(tx *txn, _, now int64) error {
		var err error
		stat, err = c.server.setLocked(tx, path, clone(data), version, now)
		return err
	})
	return stat, err
}

// Delete implements coord.Store.
func (c *session) Delete(path string, version int32) error {
	return c.mutate(func(tx *txn, _, _ int64) error {
		return c.server.deleteLocked(tx, path, version)
	})
}

// Children implements coord.Store.
func (c *session) Children(path string) ([]string, error) {
	names, _, err := c.children(path, false)
	return names, err
}

// ChildrenW implements coord.Store.
func (c *session) ChildrenW(path string) ([]string, <-chan coord.Event, error) {
	return c.children(path, true)
}

func (c *session) children(path string, watch bool) (names []string, ch <-chan coord.Event, err error) {
	if err := coord.ValidatePath(path); err != nil {
		return nil, nil, err
	}
	err = c.read(func() error {
		s := c.server
		n, ok := s.tree.nodes[path]
		if !ok {
			return fmt.Errorf("%w: %s", coord.ErrNoNode, path)
		}
		names = n.sortedChildren()
		if watch {
			ch = s.watches.add(s.watches.children, path, c)
		}
		return nil
	})
	return names, ch, err
}

// Multi implements coord.Store.
func (c *session) Multi(ops ...coord.Op) error {
	return c.mutate(func(tx *txn, owner, now int64) error {
		for i, op := range ops {
			var err error
			switch op := op.(type) {
			case coord.CreateOp:
				_, err = c.server.createLocked(tx, op.Path, clone(op.Data), op.Mode, owner, now)
			case *coord.CreateOp:
				_, err = c.server.createLocked(tx, op.Path, clone(op.Data), op.Mode, owner, now)
			case coord.SetOp:
				_, err = c.server.setLocked(tx, op.Path, clone(op.Data), op.Version, now)
			case *coord.SetOp:
				_, err = c.server.setLocked(tx, op.Path, clone(op.Data), op.Version, now)
			case coord.DeleteOp:
				err = c.server.deleteLocked(tx, op.Path, op.Version)
			case *coord.DeleteOp:
				err = c.server.deleteLocked(tx, op.Path, op.Version)
			case coord.CheckOp:
				err = c.server.checkVersionLocked(op.Path, op.Version)
			case *coord.CheckOp:
				err = c.server.checkVersionLocked(op.Path, op.Version)
			default:
				err = fmt.Errorf("%w: unknown op %T", coord.ErrBadPath, op)
			}
			if err != nil {
				return &coord.MultiError{Index: i, Err: err}
			}
		}
		return nil
	})
}

// SessionID implements coord.Store.
func (c *session) SessionID() int64 {
	c.server.mu.Lock()
	defer c.server.mu.Unlock()
	return c.id
}

// SessionEvents implements coord.Store.
func (c *session) SessionEvents() <-chan coord.SessionState { return c.events.Out() }

// Close implements coord.Store: the session's ephemerals are deleted (their
// watchers are told), its own watches see EventNotWatching, and its
// SessionEvents channel is closed. Later calls return coord.ErrClosed.
func (c *session) Close() error {
	s := c.server
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return nil
	}
	c.closed = true
	delete(s.sessions, c)
	var b *batch
	var firings []firing
	if s.checkLocked() == nil {
		ops, changes := s.dropEphemeralsLocked(c.id)
		if len(ops) > 0 {
			b, firings = s.commitLocked(ops, changes)
		}
	}
	firings = append(firings, s.watches.dropOwner(c)...)
	s.mu.Unlock()
	var err error
	if b != nil {
		<-b.done
		err = b.err
	}
	deliver(firings)
	c.events.Stop()
	return err
}
