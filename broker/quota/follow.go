package quota

import (
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"millrace/broker/coord"
)

// retryDelay is the pause before re-reading after a store failure.
const retryDelay = time.Second

// Follower keeps a Manager's quotas equal to the store's: it loads them
// all, then watches /config/changes and reloads each entity a new
// notification names, so every broker applies a change within a store
// round trip of its write. Notifications it cannot have seen (pruned
// while it was behind, or from before a reconnect) make it reload all.
type Follower struct {
	store   coord.Store
	manager *Manager
	logger  *slog.Logger
	stop    chan struct{}
	done    chan struct{}

	// last is the newest notification applied; only the follow
	// goroutine touches it.
	last string
}

// NewFollower returns a follower applying store's quotas to manager;
// Start starts it.
func NewFollower(store coord.Store, manager *Manager, logger *slog.Logger) *Follower {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Follower{store: store, manager: manager, logger: logger.With("component", "quota"), stop: make(chan struct{}), done: make(chan struct{})}
}

// Manager is the manager the follower keeps current.
func (f *Follower) Manager() *Manager { return f.manager }

// Start loads the quotas and follows changes until Close. A failed first
// load is logged and retried by the follower.
func (f *Follower) Start() {
	if err := f.reloadAll(); err != nil {
		f.logger.Error("loading client quotas", "err", err)
	}
	go f.follow()
}

// Close stops following and waits for the follower.
func (f *Follower) Close() error {
	close(f.stop)
	<-f.done
	return nil
}

// follow applies notifications as they appear. The watch is armed before
// the read, so no change falls between them.
func (f *Follower) follow() {
	defer close(f.done)
	for {
		names, changed, err := f.store.ChildrenW(ChangesPath)
		if errors.Is(err, coord.ErrNoNode) {
			if err = coord.EnsurePath(f.store, ChangesPath); err == nil {
				continue
			}
		}
		if err == nil {
			err = f.apply(names)
		}
		if errors.Is(err, coord.ErrClosed) {
			return
		}
		if err != nil {
			f.logger.Warn("following client quota changes; retrying", "err", err, "retry_in", retryDelay)
			changed = nil
		}
		var retry <-chan time.Time
		if changed == nil {
			retry = time.After(retryDelay)
		}
		select {
		case <-f.stop:
			return
		case <-changed:
		case <-retry:
		}
	}
}

// apply handles the notifications newer than the last applied.
func (f *Follower) apply(children []string) error {
	var names []string
	for _, n := range children {
		if len(n) > len(changePrefix) && n[:len(changePrefix)] == changePrefix {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if f.last == "" || f.last < names[0] {
		// Nothing applied yet, or notifications pruned unseen.
		if err := f.reloadAll(); err != nil {
			return err
		}
		f.last = names[len(names)-1]
		return nil
	}
	for _, n := range names {
		if n <= f.last {
			continue
		}
		if err := f.applyOne(n); err != nil {
			return err
		}
		f.last = n
	}
	return nil
}

// applyOne reloads the entity one notification names.
func (f *Follower) applyOne(name string) error {
	data, _, err := f.store.Get(ChangesPath + "/" + name)
	if errors.Is(err, coord.ErrNoNode) {
		return f.reloadAll() // pruned between the list and the read
	}
	if err != nil {
		return err
	}
	var change changeNode
	if json.Unmarshal(data, &change) != nil {
		return nil // not a notification this version reads
	}
	entity, ok := ParseEntityPath(change.EntityPath)
	if !ok {
		return nil // a topic's or a broker's config
	}
	values, err := Read(f.store, entity)
	if errors.Is(err, errUndecodable) {
		f.logger.Warn("ignoring a damaged quota node", "entity", entity.String(), "err", err)
		values = nil
	} else if err != nil {
		return err
	}
	f.manager.Set(entity, values)
	f.logger.Debug("client quotas changed", "entity", entity.String(), "quotas", len(values))
	return nil
}

// reloadAll replaces the manager's quotas with the store's, and marks
// every notification present as applied.
func (f *Follower) reloadAll() error {
	names, err := notifications(f.store)
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		return err
	}
	all, err := List(f.store)
	if err != nil {
		return err
	}
	f.manager.Replace(all)
	if len(names) > 0 {
		f.last = names[len(names)-1]
	}
	return nil
}
