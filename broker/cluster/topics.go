package cluster

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// TopicSpec describes a topic to create.
type TopicSpec struct {
	Name string
	// Partitions is the partition count; -1 asks for the default.
	Partitions int32
	// ReplicationFactor is the number of replicas per partition; -1 asks for
	// the default.
	ReplicationFactor int16
	// Assignment, when not empty, is an explicit replica list per partition
	// (keys 0..n-1); Partitions and ReplicationFactor must then be -1.
	Assignment map[int32][]int32
	// Config holds per-topic config overrides, validated by broker/log.
	Config map[string]string
}

// CreateTopic creates a topic: it validates the spec, writes the assignment,
// the partition states and the config overrides in one atomic store
// operation, then opens the logs of the partitions this broker hosts. With
// validateOnly it stops after validation and returns the topic it would have
// made. Errors wrap ErrInvalidTopic, ErrTopicExists, ErrInvalidPartitions,
// ErrInvalidReplicationFactor, ErrInvalidReplicaAssignment or ErrInvalidConfig
// for bad requests; anything else is a store or disk failure.
func (c *Cluster) CreateTopic(spec TopicSpec, validateOnly bool) (*Topic, error) {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	t, cfg, err := c.planTopicLocked(spec)
	if err != nil || validateOnly {
		return t, err
	}

	ops := []coord.Op{
		coord.CreateOp{Path: topicConfigPath(t.Name), Data: encodeConfig(t.Config), Mode: coord.Persistent},
		coord.CreateOp{Path: topicPath(t.Name), Data: encodeTopic(t), Mode: coord.Persistent},
		coord.CreateOp{Path: partitionsPath(t.Name), Mode: coord.Persistent},
	}
	ops = append(ops, partitionCreateOps(t.Partitions)...)
	if err := c.store.Multi(ops...); err != nil {
		if errors.Is(err, coord.ErrNodeExists) {
			return nil, fmt.Errorf("%w: %q (created concurrently)", ErrTopicExists, t.Name)
		}
		return nil, fmt.Errorf("cluster: writing topic %q: %w", t.Name, err)
	}

	entry := &topicEntry{topic: t, logs: make([]*log.Log, len(t.Partitions))}
	for _, p := range t.Partitions {
		if !containsBroker(p.Replicas, c.cfg.BrokerID) {
			continue
		}
		l, err := c.openLog(t.Name, p.Partition, cfg)
		if err != nil {
			// Undo, so a retry starts clean rather than finding a topic
			// without its logs.
			c.removeLogs(entry)
			if derr := c.deleteTopicNodes(t.Name); derr != nil {
				c.logger.Error("rolling back a failed topic creation", "topic", t.Name, "err", derr)
			}
			return nil, err
		}
		entry.logs[p.Partition] = l
	}
	c.mu.Lock()
	c.topics[t.Name] = entry
	c.byID[t.ID] = entry
	c.signalModelLocked()
	c.mu.Unlock()
	c.logger.Info("topic created", "topic", t.Name, "topic_id", TopicIDString(t.ID), "partitions", len(t.Partitions))
	return t, nil
}

// planTopicLocked validates a spec and builds the topic and its effective
// log config.
func (c *Cluster) planTopicLocked(spec TopicSpec) (*Topic, log.Config, error) {
	if err := ValidateTopicName(spec.Name); err != nil {
		return nil, log.Config{}, err
	}
	c.mu.RLock()
	_, exists := c.topics[spec.Name]
	_, deleting := c.deleting[spec.Name]
	var collides string
	if !exists {
		// Kafka rejects names that differ only in '.' versus '_', because
		// both map to the same metric name.
		folded := strings.ReplaceAll(spec.Name, ".", "_")
		for name := range c.topics {
			if strings.ReplaceAll(name, ".", "_") == folded {
				collides = name
				break
			}
		}
	}
	brokers := c.brokers
	c.mu.RUnlock()
	if exists {
		return nil, log.Config{}, fmt.Errorf("%w: %q", ErrTopicExists, spec.Name)
	}
	if deleting {
		// As Kafka: the name is taken until every replica deleted its data.
		return nil, log.Config{}, fmt.Errorf("%w: %q is marked for deletion", ErrTopicExists, spec.Name)
	}
	if collides != "" {
		return nil, log.Config{}, fmt.Errorf("%w: %q collides with the existing topic %q ('.' and '_' are the same in metric names)", ErrInvalidTopic, spec.Name, collides)
	}

	// The limits come before the assignment, which is sized by the count.
	count := int64(spec.Partitions)
	switch {
	case len(spec.Assignment) > 0:
		count = int64(len(spec.Assignment))
	case count == -1:
		count = int64(c.cfg.DefaultPartitions)
	}
	if err := c.checkPartitionLimitsLocked(spec.Name, count, count); err != nil {
		return nil, log.Config{}, err
	}

	var assignment [][]int32
	var err error
	if len(spec.Assignment) > 0 {
		if spec.Partitions != -1 || spec.ReplicationFactor != -1 {
			return nil, log.Config{}, fmt.Errorf("%w: give either a replica assignment or a partition count and replication factor, not both", ErrInvalidReplicaAssignment)
		}
		assignment, err = checkAssignment(spec.Assignment, 0, brokers)
	} else {
		assignment, err = c.assign(spec.Partitions, spec.ReplicationFactor, 0, brokers)
	}
	if err != nil {
		return nil, log.Config{}, err
	}

	overrides := maps.Clone(spec.Config)
	if overrides == nil {
		overrides = map[string]string{}
	}
	cfg, err := c.effectiveConfig(overrides)
	if err == nil {
		err = c.checkRemoteStorage(cfg)
	}
	if err != nil {
		return nil, log.Config{}, err
	}
	id, err := newTopicID()
	if err != nil {
		return nil, log.Config{}, err
	}
	t := &Topic{Name: spec.Name, ID: id, Config: overrides}
	t.Partitions = newPartitionStates(spec.Name, 0, assignment)
	return t, cfg, nil
}

// assign spreads count partitions of rf replicas over the live brokers:
// partition p's replicas start at broker (p mod n) and continue round-robin,
// so preferred leaders are spread evenly. first is the number of the first
// partition (CreatePartitions continues an existing topic).
func (c *Cluster) assign(count int32, rf int16, first int32, brokers []BrokerInfo) ([][]int32, error) {
	if count == -1 {
		count = c.cfg.DefaultPartitions
	}
	if rf == -1 {
		rf = c.cfg.DefaultReplicationFactor
	}
	if count < 1 {
		return nil, fmt.Errorf("%w: %d; a topic needs at least one partition", ErrInvalidPartitions, count)
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: %d; a partition needs at least one replica", ErrInvalidReplicationFactor, rf)
	}
	if int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available broker(s)", ErrInvalidReplicationFactor, rf, len(brokers))
	}
	if c.cfg.Replicated {
		// Several brokers: Kafka's assignment (assign_replicas.go), starting
		// at a random broker so that small topics do not all pile their
		// preferred leaders onto the first one.
		n := len(brokers)
		return AssignReplicas(brokers, count, rf, AssignOptions{StartIndex: rand.IntN(n), ReplicaShift: rand.IntN(n), FirstPartition: first})
	}
	out := make([][]int32, count)
	for i := range out {
		p := int(first) + i
		replicas := make([]int32, rf)
		for r := range replicas {
			replicas[r] = brokers[(p+r)%len(brokers)].ID
		}
		out[i] = replicas
	}
	return out, nil
}

// checkAssignment validates an explicit assignment of the partitions
// first..first+len-1: no gaps, equal and non-zero replica counts, no
// duplicates, only live brokers.
func checkAssignment(assignment map[int32][]int32, first int32, brokers []BrokerInfo) ([][]int32, error) {
	out := make([][]int32, len(assignment))
	for p, replicas := range assignment {
		i := int64(p) - int64(first)
		if i < 0 || i >= int64(len(assignment)) {
			return nil, fmt.Errorf("%w: partitions must be numbered %d to %d without gaps, got %d", ErrInvalidReplicaAssignment, first, int(first)+len(assignment)-1, p)
		}
		out[i] = replicas
	}
	return out, checkReplicaLists(out, first, brokers)
}

func checkReplicaLists(lists [][]int32, first int32, brokers []BrokerInfo) error {
	for i, replicas := range lists {
		p := int(first) + i
		if len(replicas) == 0 {
			return fmt.Errorf("%w: partition %d has no replicas", ErrInvalidReplicaAssignment, p)
		}
		if len(replicas) != len(lists[0]) {
			return fmt.Errorf("%w: partition %d has %d replicas, partition %d has %d; all partitions need the same number", ErrInvalidReplicaAssignment, p, len(replicas), first, len(lists[0]))
		}
		for j, id := range replicas {
			if containsBroker(replicas[:j], id) {
				return fmt.Errorf("%w: partition %d lists broker %d twice", ErrInvalidReplicaAssignment, p, id)
			}
			if !brokerLive(brokers, id) {
				return fmt.Errorf("%w: partition %d names broker %d, which is not a live broker", ErrInvalidReplicaAssignment, p, id)
			}
		}
	}
	return nil
}

func brokerLive(brokers []BrokerInfo, id int32) bool {
	for _, b := range brokers {
		if b.ID == id {
			return true
		}
	}
	return false
}

// newPartitionStates builds the initial states: the preferred (first)
// replica leads, every replica is in sync, epochs start at 0.
func newPartitionStates(topic string, first int32, assignment [][]int32) []*PartitionState {
	out := make([]*PartitionState, len(assignment))
	for i, replicas := range assignment {
		out[i] = &PartitionState{
			Topic:           topic,
			Partition:       first + int32(i),
			Replicas:        replicas,
			Leader:          replicas[0],
			LeaderEpoch:     0,
			ISR:             append([]int32(nil), replicas...),
			ControllerEpoch: 1,
		}
	}
	return out
}

func partitionCreateOps(states []*PartitionState) []coord.Op {
	ops := make([]coord.Op, 0, 2*len(states))
	for _, p := range states {
		ops = append(ops,
			coord.CreateOp{Path: partitionPath(p.Topic, p.Partition), Mode: coord.Persistent},
			coord.CreateOp{Path: partitionStatePath(p.Topic, p.Partition), Data: encodePartitionState(p), Mode: coord.Persistent},
		)
	}
	return ops
}

// DeleteTopic deletes a topic. With one broker it deletes the store nodes in
// one atomic operation, then the partition logs and their data. With
// several it marks the topic for deletion and returns; the topic is gone
// for clients at once and the controller finishes the deletion once every
// replica has deleted its data (delete.go). Errors wrap ErrUnknownTopic
// when there is no such topic.
func (c *Cluster) DeleteTopic(name string) error {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if err := c.checkOpen(); err != nil {
		return err
	}
	c.mu.RLock()
	entry, ok := c.topics[name]
	c.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	if c.cfg.Replicated {
		return c.markForDeletionLocked(entry.topic)
	}
	if err := c.deleteTopicNodes(name); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.topics, name)
	delete(c.byID, entry.topic.ID)
	c.signalModelLocked()
	c.mu.Unlock()
	c.removeLogs(entry)
	c.logger.Info("topic deleted", "topic", name)
	return nil
}

// removeLogs deletes the partition logs of a topic. A failure leaves a
// directory behind but the topic is gone either way; it is logged.
func (c *Cluster) removeLogs(entry *topicEntry) {
	for p, l := range entry.logs {
		if l == nil {
			continue
		}
		if err := c.logs.Remove(entry.topic.Name, int32(p)); err != nil {
			c.logger.Error("removing a partition log", "topic", entry.topic.Name, "partition", p, "err", err)
		}
	}
}

// deleteTopicNodes deletes /brokers/topics/<topic> with everything under it
// and /config/topics/<topic>, children first, in one Multi.
func (c *Cluster) deleteTopicNodes(name string) error {
	var ops []coord.Op
	var walk func(path string) error
	walk = func(path string) error {
		children, err := c.store.Children(path)
		if err != nil {
			return err
		}
		for _, child := range children {
			if err := walk(path + "/" + child); err != nil {
				return err
			}
		}
		ops = append(ops, coord.DeleteOp{Path: path, Version: coord.AnyVersion})
		return nil
	}
	if err := walk(topicPath(name)); err != nil {
		return fmt.Errorf("cluster: reading topic %q for deletion: %w", name, err)
	}
	if ok, _, err := c.store.Exists(topicConfigPath(name)); err != nil {
		return fmt.Errorf("cluster: reading topic %q config for deletion: %w", name, err)
	} else if ok {
		ops = append(ops, coord.DeleteOp{Path: topicConfigPath(name), Version: coord.AnyVersion})
	}
	if err := c.store.Multi(ops...); err != nil {
		return fmt.Errorf("cluster: deleting topic %q: %w", name, err)
	}
	return nil
}

// CreatePartitions grows a topic to count partitions. assignment, when not
// nil, gives the replicas of each new partition (count minus the current
// count lists); otherwise they are spread like CreateTopic's. Errors wrap
// ErrUnknownTopic, ErrInvalidPartitions or ErrInvalidReplicaAssignment for
// bad requests.
func (c *Cluster) CreatePartitions(name string, count int32, assignment [][]int32, validateOnly bool) (*Topic, error) {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	c.mu.RLock()
	entry, ok := c.topics[name]
	brokers := c.brokers
	c.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	old := entry.topic
	current := int32(len(old.Partitions))
	if count <= current {
		return nil, fmt.Errorf("%w: topic %q has %d partitions, which is not fewer than the requested %d; partitions can only be added", ErrInvalidPartitions, name, current, count)
	}
	if err := c.checkPartitionLimitsLocked(name, int64(count), int64(count)-int64(current)); err != nil {
		return nil, err
	}
	var lists [][]int32
	if assignment != nil {
		if len(assignment) != int(count-current) {
			return nil, fmt.Errorf("%w: %d replica lists for %d new partitions", ErrInvalidReplicaAssignment, len(assignment), count-current)
		}
		if err := checkReplicaLists(assignment, current, brokers); err != nil {
			return nil, err
		}
		if len(assignment[0]) != len(old.Partitions[0].Replicas) {
			return nil, fmt.Errorf("%w: the new partitions have %d replicas, the topic's have %d", ErrInvalidReplicaAssignment, len(assignment[0]), len(old.Partitions[0].Replicas))
		}
		lists = assignment
	} else {
		var err error
		if lists, err = c.assign(count-current, int16(len(old.Partitions[0].Replicas)), current, brokers); err != nil {
			return nil, err
		}
	}
	t := &Topic{Name: old.Name, ID: old.ID, Config: old.Config}
	added := newPartitionStates(name, current, lists)
	t.Partitions = append(append([]*PartitionState(nil), old.Partitions...), added...)
	if validateOnly {
		return t, nil
	}

	cfg, err := c.effectiveConfig(old.Config)
	if err != nil {
		return nil, err
	}
	_, stat, err := c.store.Get(topicPath(name))
	if err != nil {
		return nil, fmt.Errorf("cluster: reading topic %q: %w", name, err)
	}
	ops := append([]coord.Op{coord.SetOp{Path: topicPath(name), Data: encodeTopic(t), Version: stat.Version}}, partitionCreateOps(added)...)
	if err := c.store.Multi(ops...); err != nil {
		return nil, fmt.Errorf("cluster: writing the new partitions of topic %q: %w", name, err)
	}
	next := &topicEntry{topic: t, logs: append(append([]*log.Log(nil), entry.logs...), make([]*log.Log, len(added))...)}
	for _, p := range added {
		if !containsBroker(p.Replicas, c.cfg.BrokerID) {
			continue
		}
		// The store already lists the partition; on a disk failure it stays
		// without a log here and is reported, and a restart retries it.
		l, err := c.openLog(name, p.Partition, cfg)
		if err != nil {
			c.logger.Error("opening a new partition's log", "topic", name, "partition", p.Partition, "err", err)
			continue
		}
		next.logs[p.Partition] = l
	}
	c.mu.Lock()
	c.topics[name] = next
	c.byID[t.ID] = next
	c.signalModelLocked()
	c.mu.Unlock()
	c.logger.Info("partitions added", "topic", name, "partitions", count)
	return t, nil
}

func (c *Cluster) checkOpen() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}
