package cluster

// Partition reassignment at run time. A request is the znode
// /admin/reassign_partitions in Kafka's shape,
//
//	{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,4],"original":[1,2,3]}]}
//
// written by `millrace cluster reassign` (RequestReassignment) or by the
// AlterPartitionReassignments API (AlterReassignments), which also adds
// moves to a pending request and cancels them. "original" is millrace's
// own: the replicas before the move (the controller fills it in where
// another tool left it out). The controller, on every pass, asks
// NextReassignmentStep what each listed partition needs now and carries out
// that one step; the writes it makes fire the watches that bring the next
// pass. A finished (or impossible)
// entry is dropped from the request; the znode is deleted when none is left.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"millrace/broker/coord"
)

const (
	adminPath    = "/admin"
	reassignPath = adminPath + "/reassign_partitions"
)

// Reassignment moves one partition onto a target replica list.
type Reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	// Original is the partition's replica list when its move was first
	// requested (the controller records it for requests other tools write
	// without it): cancelling the move goes back to it, and it tells the
	// replicas being added from those being removed.
	Original []int32 `json:"original,omitempty"`
}

// reassignZnode is /admin/reassign_partitions.
type reassignZnode struct {
	Version    int            `json:"version"`
	Partitions []Reassignment `json:"partitions"`
}

// ErrReassignmentInProgress: a reassignment request is already pending.
var ErrReassignmentInProgress = errors.New("a partition reassignment is already in progress")

// ErrNoReassignmentInProgress: a cancelled move was not pending.
var ErrNoReassignmentInProgress = errors.New("no reassignment of the partition is in progress")

// RequestReassignment writes a reassignment request for the controller to
// carry out. It fails with ErrReassignmentInProgress while an earlier one is
// pending, and with ErrUnknownTopic or ErrInvalidReplicaAssignment when a
// partition does not exist or a target list is empty, repeats a broker or
// names one that is not live. It checks against
// the store only, so a tool can call it with any coord.Store.
func RequestReassignment(store coord.Store, moves []Reassignment) error {
	if len(moves) == 0 {
		return fmt.Errorf("%w: nothing to reassign", ErrInvalidReplicaAssignment)
	}
	check, err := newMoveChecker(store)
	if err != nil {
		return err
	}
	moves = slices.Clone(moves)
	for i, m := range moves {
		if moves[i].Original, err = check.move(m); err != nil {
			return err
		}
	}
	if err := ensureNode(store, adminPath); err != nil {
		return err
	}
	_, err = store.Create(reassignPath, mustJSON(reassignZnode{Version: 1, Partitions: moves}), coord.Persistent)
	if errors.Is(err, coord.ErrNodeExists) {
		return ErrReassignmentInProgress
	}
	if err != nil {
		return fmt.Errorf("cluster: writing %s: %w", reassignPath, err)
	}
	return nil
}

// AlterReassignments merges moves into the pending request, as Kafka's
// AlterPartitionReassignments does: a partition that is not moving starts
// moving to its target, one that is gets the new target (and keeps its
// original replicas), and a move whose target is nil is cancelled: the
// partition goes back to the replicas it had before. It returns an error per
// move, nil where the move was accepted (ErrUnknownTopic,
// ErrInvalidReplicaAssignment, ErrNoReassignmentInProgress; the others still
// go ahead), or a store failure for the whole call.
func AlterReassignments(store coord.Store, moves []Reassignment) ([]error, error) {
	if err := ensureNode(store, adminPath); err != nil {
		return nil, err
	}
	// Compare-and-set against the controller, which rewrites the request as
	// moves finish: on a lost race, read it again.
	for {
		data, stat, err := store.Get(reassignPath)
		exists := err == nil
		if err != nil && !errors.Is(err, coord.ErrNoNode) {
			return nil, fmt.Errorf("cluster: reading %s: %w", reassignPath, err)
		}
		var z reassignZnode
		if exists {
			if err := json.Unmarshal(data, &z); err != nil {
				return nil, fmt.Errorf("cluster: decoding %s: %w", reassignPath, err)
			}
		}
		errs, err := mergeMoves(store, &z, moves)
		if err != nil {
			return nil, err
		}
		z.Version = 1
		switch {
		case exists && len(z.Partitions) == 0:
			err = store.Delete(reassignPath, stat.Version)
		case exists:
			_, err = store.Set(reassignPath, mustJSON(z), stat.Version)
		case len(z.Partitions) == 0:
			return errs, nil
		default:
			_, err = store.Create(reassignPath, mustJSON(z), coord.Persistent)
		}
		if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNoNode) || errors.Is(err, coord.ErrNodeExists) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: writing %s: %w", reassignPath, err)
		}
		return errs, nil
	}
}

// AlterReassignments records moves for the controller (the package
// function). A single broker has no controller and nothing to move: a valid
// target can only be the list a partition already has, so the moves are
// checked and nothing is written.
func (c *Cluster) AlterReassignments(moves []Reassignment) ([]error, error) {
	if !c.cfg.Replicated {
		return mergeMoves(c.store, &reassignZnode{}, moves)
	}
	return AlterReassignments(c.store, moves)
}

// mergeMoves applies moves to the request z; see AlterReassignments.
func mergeMoves(store coord.Store, z *reassignZnode, moves []Reassignment) ([]error, error) {
	check, err := newMoveChecker(store)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(moves))
	for i, m := range moves {
		at := slices.IndexFunc(z.Partitions, func(p Reassignment) bool { return p.Topic == m.Topic && p.Partition == m.Partition })
		if m.Replicas == nil {
			switch {
			case at < 0:
				errs[i] = fmt.Errorf("%w: %s/%d", ErrNoReassignmentInProgress, m.Topic, m.Partition)
			case z.Partitions[at].Original == nil:
				errs[i] = fmt.Errorf("%w: %s/%d: the move was requested without its original replicas, and the controller has not recorded them yet; "+
					"try again, or reassign it explicitly", ErrInvalidReplicaAssignment, m.Topic, m.Partition)
			default:
				z.Partitions[at].Replicas = z.Partitions[at].Original
			}
			continue
		}
		original, err := check.move(m)
		if err != nil {
			errs[i] = err
			continue
		}
		if at >= 0 {
			z.Partitions[at].Replicas = m.Replicas
			continue
		}
		m.Original = original
		z.Partitions = append(z.Partitions, m)
	}
	return errs, nil
}

// moveChecker validates moves against the store: live brokers and topic
// assignments, each read once.
type moveChecker struct {
	store       coord.Store
	live        []string
	assignments map[string]map[string][]int32 // topic -> partition -> replicas
}

func newMoveChecker(store coord.Store) (*moveChecker, error) {
	ids, err := store.Children(brokerIDsPath)
	if err != nil {
		return nil, fmt.Errorf("cluster: listing live brokers: %w", err)
	}
	return &moveChecker{store: store, live: ids, assignments: map[string]map[string][]int32{}}, nil
}

// move checks that m's partition exists and its target is a list of distinct
// live brokers, and returns the partition's replicas now.
func (c *moveChecker) move(m Reassignment) ([]int32, error) {
	parts, ok := c.assignments[m.Topic]
	if !ok {
		data, _, err := c.store.Get(topicPath(m.Topic))
		if errors.Is(err, coord.ErrNoNode) {
			return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, m.Topic)
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: reading topic %q: %w", m.Topic, err)
		}
		var z topicZnode
		if err := json.Unmarshal(data, &z); err != nil {
			return nil, fmt.Errorf("cluster: topic %q: decoding the assignment: %w", m.Topic, err)
		}
		parts = z.Partitions
		c.assignments[m.Topic] = parts
	}
	current, ok := parts[strconv.Itoa(int(m.Partition))]
	if !ok {
		return nil, fmt.Errorf("%w: topic %q has no partition %d", ErrUnknownTopic, m.Topic, m.Partition)
	}
	if len(m.Replicas) == 0 {
		return nil, fmt.Errorf("%w: %s/%d: the target replica list is empty", ErrInvalidReplicaAssignment, m.Topic, m.Partition)
	}
	for i, id := range m.Replicas {
		if slices.Contains(m.Replicas[:i], id) {
			return nil, fmt.Errorf("%w: %s/%d: broker %d is listed twice", ErrInvalidReplicaAssignment, m.Topic, m.Partition, id)
		}
		if !slices.Contains(c.live, strconv.Itoa(int(id))) {
			return nil, fmt.Errorf("%w: %s/%d: broker %d is not a live broker", ErrInvalidReplicaAssignment, m.Topic, m.Partition, id)
		}
	}
	return current, nil
}

// TopicPartitionCount reads a topic's partition count from the store;
// ErrUnknownTopic when it does not exist.
func TopicPartitionCount(store coord.Store, topic string) (int32, error) {
	data, _, err := store.Get(topicPath(topic))
	if errors.Is(err, coord.ErrNoNode) {
		return 0, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: reading topic %q: %w", topic, err)
	}
	t, err := decodeTopic(topic, data)
	if err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	return int32(len(t.Partitions)), nil
}

// PendingReassignments returns the request in the store (nil when none).
func PendingReassignments(store coord.Store) ([]Reassignment, error) {
	data, _, err := store.Get(reassignPath)
	if errors.Is(err, coord.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: reading %s: %w", reassignPath, err)
	}
	var z reassignZnode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("cluster: decoding %s: %w", reassignPath, err)
	}
	return z.Partitions, nil
}

// reassignPass carries out one step of every pending reassignment.
func (c *Cluster) reassignPass(epoch int32) {
	data, stat, err := c.store.Get(reassignPath)
	if errors.Is(err, coord.ErrNoNode) {
		return
	}
	if err != nil {
		c.logger.Warn("reading the reassignment request", "err", err)
		return
	}
	var z reassignZnode
	if err := json.Unmarshal(data, &z); err != nil {
		c.logger.Error("the reassignment request is unreadable; dropping it", "data", string(data), "err", err)
		c.finishReassignments(nil, stat.Version)
		return
	}
	if c.recordOriginals(&z, stat.Version) {
		return
	}
	alive := AliveSet(c.Brokers())
	var pending []Reassignment
	for _, m := range z.Partitions {
		if c.reassignStep(m, alive, epoch) {
			pending = append(pending, m)
		}
	}
	if len(pending) < len(z.Partitions) {
		c.finishReassignments(pending, stat.Version)
	}
}

// reassigning returns, per topic, the partitions named by the reassignment
// request (ControllerView.Reassigning); none when there is no readable one
// (reassignPass drops an unreadable request).
func (c *Cluster) reassigning() map[string]map[int32]bool {
	data, _, err := c.store.Get(reassignPath)
	if err != nil {
		if !errors.Is(err, coord.ErrNoNode) {
			c.logger.Warn("reading the reassignment request", "err", err)
		}
		return nil
	}
	var z reassignZnode
	if json.Unmarshal(data, &z) != nil {
		return nil
	}
	out := map[string]map[int32]bool{}
	for _, m := range z.Partitions {
		if out[m.Topic] == nil {
			out[m.Topic] = map[int32]bool{}
		}
		out[m.Topic][m.Partition] = true
	}
	return out
}

// recordOriginals fills in the replicas before the move for entries that
// lack them (requests other tools write to the znode), from the
// partitions' assignments, and writes the request back. The controller
// takes no step of a move before its original is recorded, so the
// assignment is still the one before the move, and a cancel can go back to
// it. It reports whether it wrote (or lost the compare-and-set): the write
// brings the next pass, which steps the moves.
func (c *Cluster) recordOriginals(z *reassignZnode, version int32) bool {
	recorded := false
	for i, m := range z.Partitions {
		if m.Original != nil {
			continue
		}
		t, ok := c.Topic(m.Topic)
		if !ok || m.Partition < 0 || int(m.Partition) >= len(t.Partitions) || len(t.Partitions[m.Partition].Replicas) == 0 {
			continue // reassignStep drops or waits for it
		}
		z.Partitions[i].Original = slices.Clone(t.Partitions[m.Partition].Replicas)
		recorded = true
	}
	if !recorded {
		return false
	}
	_, err := c.store.Set(reassignPath, mustJSON(z), version)
	switch {
	case err == nil:
		c.logger.Info("recorded the replicas before the moves of a reassignment request")
	case !errors.Is(err, coord.ErrBadVersion) && !errors.Is(err, coord.ErrNoNode):
		c.logger.Warn("recording the replicas before the moves", "err", err)
	}
	return true
}

// finishReassignments rewrites the request with what is still pending, or
// deletes it. A lost compare-and-set means someone changed it: the next pass
// reads it again.
func (c *Cluster) finishReassignments(pending []Reassignment, version int32) {
	var err error
	if len(pending) == 0 {
		err = c.store.Delete(reassignPath, version)
		if err == nil {
			c.logger.Info("partition reassignment complete")
		}
	} else {
		_, err = c.store.Set(reassignPath, mustJSON(reassignZnode{Version: 1, Partitions: pending}), version)
	}
	if err != nil && !errors.Is(err, coord.ErrBadVersion) && !errors.Is(err, coord.ErrNoNode) {
		c.logger.Warn("updating the reassignment request", "err", err)
	}
}

// reassignStep takes the next step of one move and reports whether it is
// still pending.
func (c *Cluster) reassignStep(m Reassignment, alive map[int32]bool, epoch int32) bool {
	t, ok := c.Topic(m.Topic)
	if !ok || m.Partition < 0 || int(m.Partition) >= len(t.Partitions) {
		c.logger.Warn("reassignment of a partition that does not exist; dropped", "topic", m.Topic, "partition", m.Partition)
		return false
	}
	p := t.Partitions[m.Partition]
	if p.StateVersion < 0 {
		return true // no state yet; the controller elects first
	}
	step := NextReassignmentStep(p, m.Replicas, alive, epoch)
	if step.Kind == StepAddReplicas {
		if err := CheckReassignmentTarget(m.Replicas, alive); err != nil {
			c.logger.Error("reassignment target rejected; dropped", "topic", m.Topic, "partition", m.Partition, "err", err)
			return false
		}
	}
	switch {
	case step.Kind == StepDone:
		c.logger.Info("partition reassigned", "topic", m.Topic, "partition", m.Partition, "replicas", m.Replicas)
		return false
	case step.State == nil:
		c.logger.Debug("reassignment waiting", "topic", m.Topic, "partition", m.Partition, "step", step.Kind.String(), "waiting", step.Waiting)
		return true
	}
	ops := []coord.Op{coord.SetOp{Path: partitionStatePath(m.Topic, m.Partition), Data: encodePartitionState(step.State.New), Version: p.StateVersion}}
	if step.Assignment != nil {
		// The assignment and the state change together, so no broker sees
		// a new replica list with the old ISR or the other way round.
		data, stat, err := c.store.Get(topicPath(m.Topic))
		if err != nil {
			c.logger.Warn("reading a topic for reassignment", "topic", m.Topic, "err", err)
			return true
		}
		var z topicZnode
		if err := json.Unmarshal(data, &z); err != nil {
			c.logger.Error("topic assignment unreadable", "topic", m.Topic, "err", err)
			return true
		}
		z.Partitions[strconv.Itoa(int(m.Partition))] = step.Assignment
		ops = append(ops, coord.SetOp{Path: topicPath(m.Topic), Data: mustJSON(z), Version: stat.Version})
	}
	if err := c.store.Multi(ops...); err != nil {
		if !errors.Is(err, coord.ErrBadVersion) {
			c.logger.Warn("writing a reassignment step", "topic", m.Topic, "partition", m.Partition, "step", step.Kind.String(), "err", err)
		}
		return true
	}
	c.logger.Info("reassignment step written", "topic", m.Topic, "partition", m.Partition, "step", step.Kind.String(),
		"replicas", step.State.New.Replicas, "leader", step.State.New.Leader, "isr", step.State.New.ISR, "leader_epoch", step.State.New.LeaderEpoch)
	return true
}
