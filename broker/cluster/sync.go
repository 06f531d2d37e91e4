package cluster

// Keeping the model in step with the store (replicated mode). Every broker
// reads topics, partition states and config overrides written by others (the
// controller, the partitions' leaders, admin requests served elsewhere), so
// a sync goroutine re-reads the topic tree whenever a watch on it fires, and
// every few seconds as a safety net. It is level-triggered: each refresh
// reads everything, builds a new model, opens the logs of partitions this
// broker now hosts, removes those it no longer hosts, and signals Changes.
//
// Watches are one-shot, so a path's watch is re-armed only after it fired:
// the background keeps the set of armed paths and one small goroutine per
// armed watch, which ends when the watch fires or the cluster closes.

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// resyncInterval is how often the model is re-read without a watch firing.
const resyncInterval = 5 * time.Second

// background owns the goroutines of replicated mode: sync, session and
// controller, plus one goroutine per armed watch.
type background struct {
	stopping chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	// syncKick and controllerKick have room for one signal each.
	syncKick       chan struct{}
	controllerKick chan struct{}

	// refreshed is set by the first refresh; only runSync touches it.
	refreshed bool

	mu    sync.Mutex // guards the following
	armed map[string]bool
	// resumeAfterRefresh: the session came back after being lost; the
	// session counts as usable again only once a refresh has re-read the
	// model under the new session.
	resumeAfterRefresh bool
}

func (bg *background) stop() {
	bg.once.Do(func() { close(bg.stopping) })
	bg.wg.Wait()
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Start begins replicated mode's background work (a no-op otherwise): model
// sync, session tracking and controller candidacy. Call it after Register;
// Close stops it.
func (c *Cluster) Start() error {
	if !c.cfg.Replicated {
		return nil
	}
	bg := &background{
		stopping:       make(chan struct{}),
		syncKick:       make(chan struct{}, 1),
		controllerKick: make(chan struct{}, 1),
		armed:          map[string]bool{},
		// After a wait in Register the session counts as usable only once
		// the first refresh has read the model (see claimBrokerID).
		resumeAfterRefresh: !c.sessionOK.Load(),
	}
	c.mu.Lock()
	if c.closed || c.background != nil {
		c.mu.Unlock()
		return fmt.Errorf("cluster: Start after Close or twice: %w", ErrClosed)
	}
	c.background = bg
	c.mu.Unlock()
	bg.wg.Add(3)
	go c.runSync(bg)
	go c.runSession(bg)
	go c.runController(bg)
	return nil
}

// Changes is signalled (one pending signal at most) after every model
// refresh, broker list change and session change. Without replicated mode it
// is never signalled.
func (c *Cluster) Changes() <-chan struct{} { return c.changes }

// SessionOK reports whether the coordination session is usable: false while
// it is expired, or disconnected for longer than the session timeout, and
// until the model was re-read after it came back. A broker must not lead
// while it is false.
func (c *Cluster) SessionOK() bool { return c.sessionOK.Load() }

// poke tells the replication manager and the controller to look again.
func (c *Cluster) poke() {
	kick(c.changes)
	c.mu.RLock()
	bg := c.background
	c.mu.RUnlock()
	if bg != nil {
		kick(bg.controllerKick)
	}
}

func (c *Cluster) runSync(bg *background) {
	defer bg.wg.Done()
	ticker := time.NewTicker(resyncInterval)
	defer ticker.Stop()
	for {
		wait := ticker.C
		if err := c.refresh(bg); err != nil {
			c.logger.Warn("model refresh failed; retrying", "err", err)
			wait = time.After(retryInterval)
		}
		select {
		case <-bg.stopping:
			return
		case <-bg.syncKick:
		case <-wait:
		}
	}
}

// arm starts the goroutine that waits for a watch on key and then asks for
// a refresh.
func (bg *background) arm(key string, ch <-chan coord.Event) {
	bg.mu.Lock()
	bg.armed[key] = true
	bg.mu.Unlock()
	bg.wg.Add(1)
	go func() {
		defer bg.wg.Done()
		select {
		case <-bg.stopping:
			return
		case <-ch:
		}
		bg.mu.Lock()
		delete(bg.armed, key)
		bg.mu.Unlock()
		kick(bg.syncKick)
	}()
}

func (bg *background) isArmed(key string) bool {
	bg.mu.Lock()
	defer bg.mu.Unlock()
	return bg.armed[key]
}

// get reads a node, arming a watch on it when bg is set and none is armed
// (an exists-watch when the node is missing, so its creation is seen).
func (c *Cluster) get(bg *background, path string) ([]byte, coord.Stat, error) {
	if bg == nil || bg.isArmed("data:"+path) {
		return c.store.Get(path)
	}
	data, stat, ch, err := c.store.GetW(path)
	if errors.Is(err, coord.ErrNoNode) {
		ok, _, ech, eerr := c.store.ExistsW(path)
		switch {
		case eerr != nil:
			return nil, coord.Stat{}, eerr
		case ok:
			// Created in between: read again, watching the data.
			data, stat, ch, err = c.store.GetW(path)
		default:
			bg.arm("data:"+path, ech)
			return nil, coord.Stat{}, err
		}
	}
	if err != nil {
		return nil, coord.Stat{}, err
	}
	bg.arm("data:"+path, ch)
	return data, stat, nil
}

// children lists a node's children, arming a watch like get.
func (c *Cluster) children(bg *background, path string) ([]string, error) {
	if bg == nil || bg.isArmed("children:"+path) {
		return c.store.Children(path)
	}
	names, ch, err := c.store.ChildrenW(path)
	if err != nil {
		return nil, err
	}
	bg.arm("children:"+path, ch)
	return names, nil
}

// readModel reads every topic from the store, arming watches when bg is
// set. Topics marked for deletion are returned apart, in pending (nil for
// a marked topic whose nodes are gone).
func (c *Cluster) readModel(bg *background) (read, pending map[string]*Topic, err error) {
	names, err := c.children(bg, topicsPath)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: listing topics: %w", err)
	}
	marked, err := c.readPendingDeletions(bg)
	if err != nil {
		return nil, nil, err
	}
	read = make(map[string]*Topic, len(names))
	pending = make(map[string]*Topic, len(marked))
	for name := range marked {
		pending[name] = nil
	}
	for _, name := range names {
		t, err := c.readTopicFrom(bg, name)
		if errors.Is(err, coord.ErrNoNode) {
			continue // deleted while we read; the children watch fires
		}
		if err != nil {
			return nil, nil, err
		}
		if marked[name] {
			pending[name] = t
			continue
		}
		read[name] = t
	}
	return read, pending, nil
}

// refresh re-reads every topic and applies the result to the model.
func (c *Cluster) refresh(bg *background) error {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if err := c.checkOpen(); err != nil {
		return nil
	}
	clusterWide, own, err := c.readBrokerConfigs(bg)
	if err != nil {
		return err
	}
	defaultsChanged := c.setBrokerConfigsLocked(clusterWide, own)
	read, pending, err := c.readModel(bg)
	if err != nil {
		return err
	}
	// Only for its watch: a new reassignment request brings a refresh and
	// so a controller pass.
	if _, _, err := c.get(bg, reassignPath); err != nil && !errors.Is(err, coord.ErrNoNode) {
		return fmt.Errorf("cluster: reading %s: %w", reassignPath, err)
	}
	c.applyModelLocked(read)
	if defaultsChanged {
		c.applyConfigsLocked()
	}
	c.applyDeletionsLocked(pending)
	bg.mu.Lock()
	resume := bg.resumeAfterRefresh
	bg.resumeAfterRefresh = false
	bg.mu.Unlock()
	if resume && !c.sessionOK.Swap(true) && bg.refreshed {
		c.logger.Info("coordination session re-established and model re-read; resuming")
	}
	bg.refreshed = true
	c.poke()
	return nil
}

// applyModelLocked replaces the model with the topics read, opening and
// removing partition logs to match. Called with adminMu held.
func (c *Cluster) applyModelLocked(read map[string]*Topic) {
	c.mu.RLock()
	old := maps.Clone(c.topics)
	c.mu.RUnlock()
	me := c.cfg.BrokerID

	// Removals first: a topic re-created under the same name reuses the
	// partition directories.
	for name, prev := range old {
		if t, ok := read[name]; !ok || t.ID != prev.topic.ID {
			c.removeLogs(prev)
			delete(old, name)
			c.logger.Info("topic deleted or re-created; its logs are removed", "topic", name)
		}
	}
	topics := make(map[string]*topicEntry, len(read))
	byID := make(map[[16]byte]*topicEntry, len(read))
	for name, t := range read {
		cfg, err := c.effectiveConfig(t.Config)
		if err != nil {
			c.logger.Error("topic config in the store is invalid; using the broker defaults", "topic", name, "err", err)
			cfg = c.defaults
		}
		prev := old[name]
		configChanged := prev == nil || !maps.Equal(prev.topic.Config, t.Config)
		entry := &topicEntry{topic: t, logs: make([]*log.Log, len(t.Partitions))}
		for _, p := range t.Partitions {
			var existing *log.Log
			if prev != nil && int(p.Partition) < len(prev.logs) {
				existing = prev.logs[p.Partition]
			}
			switch {
			case containsBroker(p.Replicas, me) && existing != nil:
				entry.logs[p.Partition] = existing
				if configChanged {
					if err := existing.SetConfig(cfg); err != nil {
						c.logger.Error("applying a topic config to a partition log", "topic", name, "partition", p.Partition, "err", err)
					}
				}
			case containsBroker(p.Replicas, me):
				l, err := c.openLog(name, p.Partition, cfg)
				if err != nil {
					c.logger.Error("opening a partition log", "topic", name, "partition", p.Partition, "err", err)
					continue
				}
				entry.logs[p.Partition] = l
			case existing != nil:
				// Reassigned away from this broker.
				if err := c.logs.Remove(name, p.Partition); err != nil {
					c.logger.Error("removing a partition log", "topic", name, "partition", p.Partition, "err", err)
				}
			}
		}
		topics[name] = entry
		byID[t.ID] = entry
	}
	c.mu.Lock()
	c.topics, c.byID = topics, byID
	c.signalModelLocked()
	c.mu.Unlock()
}
