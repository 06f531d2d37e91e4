package cluster

// Leader elections an administrator asks for (Kafka's ElectLeaders): move
// leadership to the preferred replica now rather than at the next
// preferred-leader pass, or bring a partition with no eligible leader back
// with an out-of-sync replica. The controller decides them by the rules of
// its own elections (controller_election.go) and writes them the same way,
// with compare-and-set.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// ElectionType is the kind of election asked for; the values are Kafka's.
type ElectionType int8

// Election types.
const (
	// ElectPreferred makes the first replica of the assignment the leader,
	// if it is alive and in sync.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects a leader for a partition whose leader is gone:
	// an in-sync replica if one is alive, else any alive replica, which
	// may lose committed records.
	ElectUnclean ElectionType = 1
)

func (k ElectionType) String() string {
	switch k {
	case ElectPreferred:
		return "preferred"
	case ElectUnclean:
		return "unclean"
	}
	return fmt.Sprintf("type %d", int8(k))
}

// Errors of an asked-for election.
var (
	ErrNotController               = errors.New("this broker is not the controller")
	ErrElectionNotNeeded           = errors.New("election not needed")
	ErrPreferredLeaderNotAvailable = errors.New("the preferred leader is not alive and in sync")
	ErrEligibleLeadersNotAvailable = errors.New("no replica that may lead is alive")
)

// decideElection returns the new state an asked-for election gives p, or
// why there is none.
func decideElection(kind ElectionType, p *PartitionState, alive map[int32]bool, counts map[int32]int, epoch int32) (*PartitionState, error) {
	switch kind {
	case ElectPreferred:
		if len(p.Replicas) == 0 {
			return nil, ErrPreferredLeaderNotAvailable
		}
		preferred := p.Replicas[0]
		if p.Leader == preferred {
			return nil, ErrElectionNotNeeded
		}
		if !alive[preferred] || !slices.Contains(p.ISR, preferred) {
			return nil, ErrPreferredLeaderNotAvailable
		}
		n := p.next(epoch)
		n.Leader = preferred
		return n, nil
	case ElectUnclean:
		if p.Leader >= 0 && alive[p.Leader] {
			return nil, ErrElectionNotNeeded
		}
		view := ControllerView{Alive: alive, UncleanTopics: map[string]bool{p.Topic: true}, ControllerEpoch: epoch}
		if e, ok := electLeader(p, view, counts); ok && e.New.Leader >= 0 {
			return e.New, nil
		}
		return nil, ErrEligibleLeadersNotAvailable
	}
	return nil, fmt.Errorf("election %s is neither preferred (0) nor unclean (1)", kind)
}

// Elect runs an election of kind for each partition and returns an error
// per partition (nil when a new leader was written; ErrElectionNotNeeded,
// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable,
// ErrUnknownTopic), or ErrNotController when this broker is not acting as
// the controller. A single broker leads every partition already.
func (c *Cluster) Elect(kind ElectionType, partitions []log.TopicPartition) ([]error, error) {
	errs := make([]error, len(partitions))
	if !c.cfg.Replicated {
		for i, tp := range partitions {
			errs[i] = ErrElectionNotNeeded
			if _, _, ok := c.Partition(tp.Topic, tp.Partition); !ok {
				errs[i] = fmt.Errorf("%w: %s/%d", ErrUnknownTopic, tp.Topic, tp.Partition)
			}
		}
		return errs, nil
	}
	epoch := c.controllerEpoch.Load()
	if epoch == 0 || !c.sessionOK.Load() {
		return nil, ErrNotController
	}
	alive := AliveSet(c.Brokers())
	var all []*PartitionState
	for _, t := range c.Topics() {
		all = append(all, t.Partitions...)
	}
	counts := LeaderCounts(all, alive) // kept up to date as leaders change
	for i, tp := range partitions {
		errs[i] = c.electOne(kind, tp, alive, counts, epoch)
	}
	return errs, nil
}

// electOne decides and writes one asked-for election. A lost
// compare-and-set means the state changed under it (the controller's own
// pass, a leader's ISR update): it decides again once the model has the
// new state.
func (c *Cluster) electOne(kind ElectionType, tp log.TopicPartition, alive map[int32]bool, counts map[int32]int, epoch int32) error {
	for attempt := 0; ; attempt++ {
		p, _, ok := c.Partition(tp.Topic, tp.Partition)
		if !ok {
			return fmt.Errorf("%w: %s/%d", ErrUnknownTopic, tp.Topic, tp.Partition)
		}
		n, err := decideElection(kind, p, alive, counts, epoch)
		if err != nil {
			return err
		}
		_, err = c.store.Set(partitionStatePath(tp.Topic, tp.Partition), encodePartitionState(n), p.StateVersion)
		if err == nil {
			if alive[p.Leader] {
				counts[p.Leader]--
			}
			counts[n.Leader]++
			c.logger.Info("partition state written", "topic", tp.Topic, "partition", tp.Partition, "reason", "asked for",
				"election", kind.String(), "leader", n.Leader, "leader_epoch", n.LeaderEpoch, "isr", n.ISR)
			return nil
		}
		if !errors.Is(err, coord.ErrBadVersion) || attempt == 20 {
			return fmt.Errorf("cluster: writing the state of %s/%d: %w", tp.Topic, tp.Partition, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
