package users

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"millrace/broker/coord"
)

// retryDelay is the pause before re-reading after a store failure.
const retryDelay = time.Second

// Cache holds every user's credentials in memory, reloaded whenever a
// change notification appears under ChangesPath, so authentication never
// waits on the store and every broker sees a change within a round trip.
type Cache struct {
	store  coord.Store
	logger *slog.Logger
	stop   chan struct{}
	done   chan struct{}

	mu    sync.RWMutex // guards the following
	users map[string]map[string]Credential
}

// NewCache returns a cache over store; Start loads it and follows changes.
func NewCache(store coord.Store, logger *slog.Logger) *Cache {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Cache{store: store, logger: logger, stop: make(chan struct{}), done: make(chan struct{}), users: map[string]map[string]Credential{}}
}

// Start loads the credentials and starts following changes until Close.
// A failed first load is logged and retried by the follower.
func (c *Cache) Start() {
	if err := c.reload(); err != nil {
		c.logger.Error("loading SCRAM credentials", "err", err)
	}
	go c.follow()
}

// Close stops following changes and waits for the follower.
func (c *Cache) Close() error {
	close(c.stop)
	<-c.done
	return nil
}

// Lookup returns user's credential for a SCRAM mechanism.
func (c *Cache) Lookup(user, mechanism string) (Credential, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cred, ok := c.users[user][mechanism]
	return cred, ok
}

// LookupAny returns one of user's credentials, the strongest, for checking
// a password (PLAIN): any of them proves the password the same way.
func (c *Cache) LookupAny(user string) (Credential, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	creds := c.users[user]
	for _, m := range []string{SCRAMSHA512, SCRAMSHA256} {
		if cred, ok := creds[m]; ok {
			return cred, true
		}
	}
	return Credential{}, false
}

// follow re-reads every credential each time the notifications change.
// The watch is armed before the read, so no change falls between them.
func (c *Cache) follow() {
	defer close(c.done)
	for {
		_, changed, err := c.store.ChildrenW(ChangesPath)
		if errors.Is(err, coord.ErrNoNode) {
			err = coord.EnsurePath(c.store, ChangesPath)
			if err == nil {
				continue
			}
		}
		if err == nil {
			err = c.reload()
		}
		if errors.Is(err, coord.ErrClosed) {
			return
		}
		if err != nil {
			c.logger.Warn("following SCRAM credential changes; retrying", "err", err, "retry_in", retryDelay)
			changed = nil
		}
		var retry <-chan time.Time
		if changed == nil {
			retry = time.After(retryDelay)
		}
		select {
		case <-c.stop:
			return
		case <-changed:
		case <-retry:
		}
	}
}

// reload replaces the cache with the store's current credentials.
func (c *Cache) reload() error {
	all, err := List(c.store)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.users = all
	c.mu.Unlock()
	c.logger.Debug("SCRAM credentials loaded", "users", len(all))
	return nil
}
