package cluster

// Topic deletion at run time. With several brokers it is driven by the
// controller, as in Kafka's ZooKeeper mode: DeleteTopic only marks the
// topic,
//
//	/admin/delete_topics/<topic>              the marker (data: the topic ID)
//	/admin/delete_topics/<topic>/<broker id>  a replica's confirmation
//
// and from then on every broker treats the topic as gone: it leaves the
// model (clients get UNKNOWN_TOPIC_OR_PARTITION, and CreateTopics of the
// name TOPIC_ALREADY_EXISTS until the deletion finishes), its partitions are
// no longer led or followed, and each broker deletes its partition logs of
// the topic and then writes its confirmation. The controller drives the
// rest with NextDeletionStep (controller_delete.go): fence the leaders, wait
// until every replica confirmed, then remove the topic's nodes, the
// confirmations and the marker in one Multi. A replica that is down
// confirms when it starts again (Open deletes its logs of pending and
// unknown topics before it serves), so the name stays taken until no broker
// holds data of the old topic, and a topic re-created under the same name
// never meets a stale replica.
//
// With one broker there is nobody to wait for: DeleteTopic removes the nodes
// and the logs at once, and Open removes what a crash in between left.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"millrace/broker/coord"
)

const deleteTopicsPath = adminPath + "/delete_topics"

func deletionPath(topic string) string { return deleteTopicsPath + "/" + topic }
func deletionConfirmPath(topic string, id int32) string {
	return deletionPath(topic) + "/" + strconv.Itoa(int(id))
}

// pendingDeletion is a topic marked for deletion, as this broker knows it.
type pendingDeletion struct {
	// topic is the topic as last read, nil when its nodes are gone.
	topic *Topic
	// confirmed: this broker deleted its logs of the topic and wrote its
	// confirmation (or hosts no replica of it).
	confirmed bool
}

// PendingDeletions lists the topics marked for deletion whose deletion has
// not finished, read from the store.
func PendingDeletions(store coord.Store) ([]string, error) {
	names, err := store.Children(deleteTopicsPath)
	if errors.Is(err, coord.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: listing %s: %w", deleteTopicsPath, err)
	}
	return names, nil
}

// markForDeletionLocked writes the deletion marker of a topic (replicated
// mode) and applies it here at once. Called with adminMu held.
func (c *Cluster) markForDeletionLocked(t *Topic) error {
	// The check makes the marker and the topic's existence one atomic
	// fact, so a model that lags a finished deletion marks nothing.
	err := c.store.Multi(
		coord.CheckOp{Path: topicPath(t.Name), Version: coord.AnyVersion},
		coord.CreateOp{Path: deletionPath(t.Name), Data: []byte(TopicIDString(t.ID)), Mode: coord.Persistent},
	)
	switch {
	case errors.Is(err, coord.ErrNoNode):
		return fmt.Errorf("%w: %q", ErrUnknownTopic, t.Name)
	case errors.Is(err, coord.ErrNodeExists):
		return fmt.Errorf("%w: %q is already being deleted", ErrUnknownTopic, t.Name)
	case err != nil:
		return fmt.Errorf("cluster: marking topic %q for deletion: %w", t.Name, err)
	}
	c.logger.Info("topic marked for deletion", "topic", t.Name, "topic_id", TopicIDString(t.ID))
	c.mu.RLock()
	pending := make(map[string]*Topic, len(c.deleting)+1)
	for name, d := range c.deleting {
		pending[name] = d.topic
	}
	read := make(map[string]*Topic, len(c.topics))
	for name, e := range c.topics {
		if name != t.Name {
			read[name] = e.topic
		}
	}
	c.mu.RUnlock()
	pending[t.Name] = t
	c.applyModelLocked(read)
	c.applyDeletionsLocked(pending)
	c.poke()
	return nil
}

// readPendingDeletions reads the deletion markers, arming watches on the
// list and on each marker's confirmations when bg is set: a new marker
// hides its topic on every broker, a new confirmation brings the
// controller's next deletion step.
func (c *Cluster) readPendingDeletions(bg *background) (map[string]bool, error) {
	names, err := c.children(bg, deleteTopicsPath)
	if err != nil {
		return nil, fmt.Errorf("cluster: listing %s: %w", deleteTopicsPath, err)
	}
	pending := make(map[string]bool, len(names))
	for _, name := range names {
		pending[name] = true
		if bg != nil {
			if _, err := c.children(bg, deletionPath(name)); err != nil && !errors.Is(err, coord.ErrNoNode) {
				return nil, fmt.Errorf("cluster: reading the deletion of %q: %w", name, err)
			}
		}
	}
	return pending, nil
}

// applyDeletionsLocked replaces the set of topics pending deletion and does
// this broker's part for each: delete its logs of the topic, then confirm.
// Called with adminMu held, after applyModelLocked left them out.
func (c *Cluster) applyDeletionsLocked(pending map[string]*Topic) {
	c.mu.RLock()
	old := c.deleting
	c.mu.RUnlock()
	next := make(map[string]*pendingDeletion, len(pending))
	for name, t := range pending {
		d := &pendingDeletion{topic: t}
		if prev, ok := old[name]; ok {
			d.confirmed = prev.confirmed
		}
		if !d.confirmed {
			d.confirmed = c.confirmDeletion(name, t)
		}
		next[name] = d
	}
	c.mu.Lock()
	c.deleting = next
	c.signalModelLocked()
	c.mu.Unlock()
}

// confirmDeletion deletes this broker's logs of a topic marked for deletion
// and, when it hosts a replica of it, writes its confirmation. It reports
// whether this broker's part is done; false means try again at the next
// refresh.
func (c *Cluster) confirmDeletion(name string, t *Topic) bool {
	failed := false
	for tp := range c.logs.All() {
		if tp.Topic != name {
			continue
		}
		if err := c.logs.Remove(tp.Topic, tp.Partition); err != nil {
			c.logger.Error("deleting a partition log of a deleted topic", "topic", name, "partition", tp.Partition, "err", err)
			failed = true
		}
	}
	if failed {
		return false
	}
	if t == nil || !hostsReplica(t, c.cfg.BrokerID) {
		return true
	}
	_, err := c.store.Create(deletionConfirmPath(name, c.cfg.BrokerID), nil, coord.Persistent)
	if err != nil && !errors.Is(err, coord.ErrNodeExists) && !errors.Is(err, coord.ErrNoNode) {
		c.logger.Warn("confirming the deletion of a topic", "topic", name, "err", err)
		return false
	}
	c.logger.Info("deleted the replicas of a topic being deleted", "topic", name)
	return true
}

func hostsReplica(t *Topic, id int32) bool {
	for _, p := range t.Partitions {
		if containsBroker(p.Replicas, id) {
			return true
		}
	}
	return false
}

// removeStrayLogs deletes the partition logs found on disk that the model
// does not give this broker: of topics that no longer exist (deleted while
// this broker was down, or by a crash between the store and the disk), are
// pending deletion, or whose partition was moved away. Serving them would
// show old data under a name that may have been reused. Called by Open,
// before the model is shared.
func (c *Cluster) removeStrayLogs() {
	for tp := range c.logs.All() {
		e, ok := c.topics[tp.Topic]
		if ok && int(tp.Partition) < len(e.logs) && e.logs[tp.Partition] != nil {
			continue
		}
		if err := c.logs.Remove(tp.Topic, tp.Partition); err != nil {
			c.logger.Error("deleting a stray partition log", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			continue
		}
		c.logger.Warn("deleted a partition log the metadata does not give this broker", "topic", tp.Topic, "partition", tp.Partition)
	}
}

// deletionPass takes the next step of every pending topic deletion.
func (c *Cluster) deletionPass(epoch int32) {
	c.mu.RLock()
	pending := make(map[string]*Topic, len(c.deleting))
	for name, d := range c.deleting {
		pending[name] = d.topic
	}
	c.mu.RUnlock()
	if len(pending) == 0 {
		return
	}
	alive := AliveSet(c.Brokers())
	for _, name := range sortedNames(pending) {
		if !c.sessionOK.Load() {
			return
		}
		c.deletionStep(name, pending[name], alive, epoch)
	}
}

// deletionStep carries out NextDeletionStep for one topic. The topic comes
// from the model (refreshed by the writes each step causes); the
// confirmations are read from the store.
func (c *Cluster) deletionStep(name string, t *Topic, alive map[int32]bool, epoch int32) {
	confirmations, err := c.store.Children(deletionPath(name))
	if errors.Is(err, coord.ErrNoNode) {
		return // finished meanwhile
	}
	if err != nil {
		c.logger.Warn("reading the confirmations of a topic deletion", "topic", name, "err", err)
		return
	}
	stopped := map[int32]bool{}
	for _, s := range confirmations {
		if id, err := strconv.ParseInt(s, 10, 32); err == nil {
			stopped[int32(id)] = true
		}
	}
	step := NextDeletionStep(t, alive, stopped, epoch)
	switch step.Kind {
	case DeletionFenceLeaders:
		for _, e := range step.States {
			if e.Old.StateVersion < 0 {
				continue
			}
			_, err := c.store.Set(partitionStatePath(name, e.New.Partition), encodePartitionState(e.New), e.Old.StateVersion)
			if err != nil && !errors.Is(err, coord.ErrBadVersion) && !errors.Is(err, coord.ErrNoNode) {
				c.logger.Warn("fencing a partition of a topic being deleted", "topic", name, "partition", e.New.Partition, "err", err)
			}
		}
	case DeletionStopReplicas:
		c.logger.Debug("topic deletion waiting for replicas", "topic", name, "alive", slices.Sorted(maps.Keys(step.StopReplicas)), "down", step.WaitingFor)
	case DeletionRemoveNodes, DeletionDone:
		var ops []coord.Op
		for _, path := range step.Paths {
			// A state or config node may be missing (a crash during
			// creation); deleting it would fail the whole Multi.
			if ok, _, err := c.store.Exists(path); err != nil {
				c.logger.Warn("reading a node of a topic being deleted", "path", path, "err", err)
				return
			} else if ok {
				ops = append(ops, coord.DeleteOp{Path: path, Version: coord.AnyVersion})
			}
		}
		for _, s := range confirmations {
			ops = append(ops, coord.DeleteOp{Path: deletionPath(name) + "/" + s, Version: coord.AnyVersion})
		}
		ops = append(ops, coord.DeleteOp{Path: deletionPath(name), Version: coord.AnyVersion})
		if err := c.store.Multi(ops...); err != nil {
			// A confirmation added meanwhile fails the marker's delete;
			// the watch it fired brings the next pass.
			c.logger.Warn("removing a deleted topic's nodes", "topic", name, "err", err)
			return
		}
		c.logger.Info("topic deleted", "topic", name)
	}
}
