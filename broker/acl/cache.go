package acl

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"millrace/broker/coord"
)

// NotificationTTL is how long a change notification stays in the store
// before a broker deletes it, Kafka's 15 minutes: far longer than any
// broker takes to process it, and a broker that was away for longer reloads
// everything when it comes back.
const NotificationTTL = 15 * time.Minute

// reloadInterval is how often the cache re-reads every ACL without a
// notification (a safety net for a watch lost with a session) and prunes
// old notifications.
const reloadInterval = time.Minute

// retryInterval paces attempts to re-arm a watch after a store error.
const retryInterval = time.Second

// Cache is one broker's copy of the stored ACLs, kept in step with the
// store by watching the change notifications. Decisions read its snapshot
// without locking.
type Cache struct {
	store  coord.Store
	logger *slog.Logger
	snap   atomic.Pointer[Snapshot]

	stopping chan struct{}
	done     chan struct{}

	mu sync.Mutex // guards the following
	// acls is what the current snapshot was built from.
	acls map[Pattern][]Entry
	// lastSeq is, per notification parent, the highest sequence processed.
	lastSeq map[string]int64
}

// OpenCache creates the ACL paths when missing, reads every ACL and starts
// watching for changes. Close stops it.
func OpenCache(store coord.Store, logger *slog.Logger) (*Cache, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := ensurePaths(store); err != nil {
		return nil, err
	}
	c := &Cache{
		store:    store,
		logger:   logger.With("component", "acl"),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		// Sequences start at 0.
		lastSeq: map[string]int64{literalChangesPath: -1, extendedChangesPath: -1},
	}
	// Notifications first, then the ACLs: a change made in between is both
	// in what is read and notified again, never missed.
	lit, err := c.skipNotifications(literalChangesPath)
	if err != nil {
		return nil, err
	}
	ext, err := c.skipNotifications(extendedChangesPath)
	if err != nil {
		return nil, err
	}
	if err := c.reloadAll(); err != nil {
		return nil, err
	}
	go c.run(lit, ext)
	return c, nil
}

// Snapshot returns the current ACLs.
func (c *Cache) Snapshot() *Snapshot { return c.snap.Load() }

// Close stops watching.
func (c *Cache) Close() error {
	select {
	case <-c.stopping:
	default:
		close(c.stopping)
	}
	<-c.done
	return nil
}

// Refresh re-reads the given patterns now, so that a broker that changed
// them decides by the change at once rather than when its own notification
// arrives.
func (c *Cache) Refresh(patterns []Pattern) error {
	var errs []error
	for _, p := range patterns {
		errs = append(errs, c.reload(p))
	}
	return errors.Join(errs...)
}

func (c *Cache) run(lit, ext <-chan coord.Event) {
	defer close(c.done)
	ticker := time.NewTicker(reloadInterval)
	defer ticker.Stop()
	for {
		var retry <-chan time.Time
		if lit == nil {
			lit = c.process(literalChangesPath)
		}
		if ext == nil {
			ext = c.process(extendedChangesPath)
		}
		if lit == nil || ext == nil {
			retry = time.After(retryInterval)
		}
		select {
		case <-c.stopping:
			return
		case <-lit:
			lit = nil
		case <-ext:
			ext = nil
		case <-retry:
		case <-ticker.C:
			if err := c.reloadAll(); err != nil {
				c.logger.Warn("reloading ACLs failed; keeping the last ones read", "err", err)
			}
			c.prune(literalChangesPath, time.Now())
			c.prune(extendedChangesPath, time.Now())
		}
	}
}

// skipNotifications arms the watch on parent and marks every notification
// already there as processed.
func (c *Cache) skipNotifications(parent string) (<-chan coord.Event, error) {
	names, ch, err := c.store.ChildrenW(parent)
	if err != nil {
		return nil, fmt.Errorf("acl: watching %s: %w", parent, err)
	}
	c.mu.Lock()
	for _, name := range names {
		if seq, ok := sequence(name); ok && seq > c.lastSeq[parent] {
			c.lastSeq[parent] = seq
		}
	}
	c.mu.Unlock()
	return ch, nil
}

// process re-arms the watch on parent and reloads the resource of every
// notification not processed yet. It returns nil on a store error, to be
// retried.
func (c *Cache) process(parent string) <-chan coord.Event {
	names, ch, err := c.store.ChildrenW(parent)
	if err != nil {
		c.logger.Warn("watching ACL changes failed; retrying", "path", parent, "err", err)
		return nil
	}
	c.mu.Lock()
	last := c.lastSeq[parent]
	c.mu.Unlock()
	for _, name := range names {
		seq, ok := sequence(name)
		if !ok || seq <= last {
			continue
		}
		data, _, err := c.store.Get(parent + "/" + name)
		if errors.Is(err, coord.ErrNoNode) {
			last = seq // pruned already: the periodic reload covers it
			continue
		}
		if err == nil {
			var p Pattern
			if p, err = parseNotification(parent, data); err != nil {
				c.logger.Warn("skipping an unreadable ACL change notification", "path", parent+"/"+name, "err", err)
				last = seq
				continue
			}
			err = c.reload(p)
		}
		if err != nil {
			c.logger.Warn("reading an ACL change failed; retrying", "path", parent+"/"+name, "err", err)
			break
		}
		last = seq
	}
	c.mu.Lock()
	c.lastSeq[parent] = last
	c.mu.Unlock()
	return ch
}

// prune deletes notifications older than NotificationTTL at now. Every
// broker prunes; a node another broker deleted first is no error.
func (c *Cache) prune(parent string, now time.Time) {
	names, err := c.store.Children(parent)
	if err != nil {
		return
	}
	for _, name := range names {
		ok, stat, err := c.store.Exists(parent + "/" + name)
		if err != nil || !ok || now.Sub(stat.Created) < NotificationTTL {
			continue
		}
		if err := c.store.Delete(parent+"/"+name, coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) {
			c.logger.Warn("deleting an old ACL change notification failed", "path", parent+"/"+name, "err", err)
		}
	}
}

// reload re-reads one pattern and publishes a new snapshot.
func (c *Cache) reload(p Pattern) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries, _, err := readPattern(c.store, p)
	if err != nil {
		return err
	}
	acls := maps.Clone(c.acls)
	if acls == nil {
		acls = map[Pattern][]Entry{}
	}
	if len(entries) == 0 {
		delete(acls, p)
	} else {
		acls[p] = entries
	}
	c.publishLocked(acls)
	return nil
}

// reloadAll re-reads every ACL and publishes a new snapshot.
func (c *Cache) reloadAll() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	acls, err := readAll(c.store)
	if err != nil {
		return fmt.Errorf("acl: reading ACLs: %w", err)
	}
	c.publishLocked(acls)
	return nil
}

func (c *Cache) publishLocked(acls map[Pattern][]Entry) {
	c.acls = acls
	c.snap.Store(NewSnapshot(maps.Clone(acls)))
}

// sequence reads the sequence number of a notification node's name.
func sequence(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, changePrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}
