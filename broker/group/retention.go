package group

import (
	"errors"
	"time"

	"millrace/broker/coord"
)

// validGroupID reports whether id may name a group: not empty (as Kafka)
// and at most Config.MaxGroupIDBytes long.
func (c *Coordinator) validGroupID(id string) bool {
	return id != "" && len(id) <= c.cfg.MaxGroupIDBytes
}

// ValidGroupID reports whether id is a group ID the coordinator accepts, so
// that FindCoordinator can refuse the others with INVALID_GROUP_ID too.
func (c *Coordinator) ValidGroupID(id string) bool { return c.validGroupID(id) }

// admitGroup makes sure group id is held in memory, creating it unless the
// coordinator already holds Config.MaxGroups groups: then it returns
// GROUP_MAX_SIZE_REACHED. The check and the creation are one step, so
// concurrent requests for new groups cannot pass the limit together.
func (c *Coordinator) admitGroup(id string) int16 {
	if !c.coordinates(id) {
		return errNotCoordinator
	}
	c.mu.Lock()
	_, known := c.groups[id]
	full := !known && len(c.groups) >= c.cfg.MaxGroups
	if !known && !full {
		c.groups[id] = newGroup(id)
	}
	c.mu.Unlock()
	if !full {
		return errNone
	}
	if c.groupsFullLogged.CompareAndSwap(false, true) {
		c.log.Warn("refusing new groups: the coordinator holds millrace.max.groups groups", "max_groups", c.cfg.MaxGroups, "group", id)
	}
	return errGroupMaxSizeReached
}

// expireLoop deletes expired offsets every OffsetsRetentionCheckInterval
// until Close.
func (c *Coordinator) expireLoop() {
	defer c.watcher.Done()
	tick := time.NewTicker(c.cfg.OffsetsRetentionCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		c.expireOffsets()
	}
}

// expireOffsets deletes the committed offsets that outlived
// Config.OffsetsRetention in every group without members this broker
// coordinates, in memory or only in the store (committed before a restart),
// and deletes the groups left without offsets (pending transactional ones
// count, and never expire: their transaction's marker completes them).
// Idle producers leave the transactional offsets index. Offsets of groups with
// members never expire here; Kafka's expiry of offsets of topics a Stable
// group no longer consumes is not done.
func (c *Coordinator) expireOffsets() {
	ids := make(map[string]bool)
	stored, err := c.store.Children(consumersRoot)
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		c.log.Warn("listing stored groups for offset expiry", "err", err)
	}
	for _, escaped := range stored {
		if id, ok := coord.UnescapeName(escaped); ok {
			ids[id] = false
		}
	}
	c.mu.Lock()
	for id := range c.groups {
		ids[id] = true
	}
	c.mu.Unlock()
	cutoff := c.cfg.Now().Add(-c.cfg.OffsetsRetention).UnixMilli()
	expired, deleted := 0, 0
	for id, inMemory := range ids {
		if c.closed.Load() {
			return
		}
		if !c.coordinates(id) {
			continue
		}
		n, gone := c.expireGroup(id, inMemory, cutoff)
		expired += n
		if gone {
			deleted++
		}
	}
	c.expireTxnIndex()
	if expired > 0 || deleted > 0 {
		c.log.Info("expired committed offsets", "offsets", expired, "groups_deleted", deleted)
	}
}

// expireGroup deletes group id's offsets committed (or, for a consumer
// group, left by its last member) at or before cutoff (ms), when the group
// has no members. It returns how many it deleted and whether the group was
// deleted with them. A group read from the store only for this is dropped
// from memory again, so a pass does not load every stored group.
func (c *Coordinator) expireGroup(id string, inMemory bool, cutoff int64) (expired int, deleted bool) {
	g, code := c.lockGroupOffsets(id, false)
	if code != errNone {
		return 0, false
	}
	defer g.offsetMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != stateEmpty || len(g.members) > 0 || len(g.pending) > 0 {
		return 0, false
	}
	var ops []coord.Op
	var gone []topicPartition
	for tp, e := range g.offsets {
		if e.CommitTimestamp <= 0 {
			// Written without a commit time (not by millrace, which has
			// always stored one): its age is unknown, so it is kept.
			continue
		}
		base := e.CommitTimestamp
		if !g.emptySince.IsZero() {
			base = max(base, g.emptySince.UnixMilli())
		}
		if base <= cutoff {
			ops = append(ops, coord.DeleteOp{Path: offsetPath(g.id, tp.topic, tp.partition), Version: coord.AnyVersion})
			gone = append(gone, tp)
		}
	}
	if len(ops) > 0 {
		if err := c.fencedMultiLocked(g, ops); err != nil {
			if !errors.Is(err, errClaimedElsewhere) {
				c.log.Warn("deleting expired offsets", "group", g.id, "err", err)
			}
			g.offsetsLoaded = false
			return 0, false
		}
		for _, tp := range gone {
			delete(g.offsets, tp)
		}
	}
	switch {
	case len(g.offsets) == 0 && len(g.txnOffsets) == 0:
		// Pending transactional offsets keep the group (Kafka's
		// hasOffsets): their marker will complete them.
		// Nothing left but an Empty group: delete it, as Kafka turns such a
		// group Dead. Dead first, so that nobody uses this object while
		// the subtree goes (they find a fresh group instead).
		g.state = stateDead
		c.stopTimersLocked(g)
		c.forgetGroup(g)
		if err := deleteRecursive(c.store, groupPath(g.id)); err != nil {
			c.log.Warn("deleting an expired group from the store", "group", g.id, "err", err)
			return len(gone), false
		}
		return len(gone), true
	case !inMemory && g.generation == 0:
		// Loaded only for this pass: leave it to the store.
		g.state = stateDead
		c.forgetGroup(g)
	}
	return len(gone), false
}
