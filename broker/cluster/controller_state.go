package cluster

// Inputs and outputs shared by the controller's decisions
// (controller_election.go, controller_reassign.go, controller_delete.go).
// Everything here is pure: the controller reads the live brokers and the
// partition states from the coordination store, asks these functions what to
// do, and carries the answer out (writes states with compare-and-set, tells
// brokers to lead, follow or stop). Nothing is decided twice: the functions
// are level-triggered, so after a failed or lost write the caller re-reads
// the store and asks again.

import (
	"cmp"
	"slices"
)

// ControllerView is what the controller knows when it decides.
type ControllerView struct {
	// Alive is the set of live brokers (/brokers/ids).
	Alive map[int32]bool
	// Partitions are the current states of every partition of every topic.
	Partitions []*PartitionState
	// UncleanTopics lists the topics with unclean.leader.election.enable.
	UncleanTopics map[string]bool
	// ControllerEpoch is the epoch of this controller, written into every
	// state it produces so a state from a deposed controller is recognised.
	ControllerEpoch int32
	// Reassigning holds, per topic, the partitions with a move in progress
	// (/admin/reassign_partitions). Their reassignment steps choose their
	// leader, so preferred-leader elections leave them alone, as Kafka's
	// do: the first replica of an assignment in the middle of a move (or of
	// a cancel) need not be in the target, and electing it would undo the
	// step that moved the leader into the target, pass after pass.
	Reassigning map[string]map[int32]bool
}

// AliveSet builds ControllerView.Alive from broker registrations.
func AliveSet(brokers []BrokerInfo) map[int32]bool {
	alive := make(map[int32]bool, len(brokers))
	for _, b := range brokers {
		alive[b.ID] = true
	}
	return alive
}

// ElectionReason says why a partition state changed.
type ElectionReason string

// Reasons for a new partition state.
const (
	// ReasonLeaderDied: the leader is not alive; a new one was elected.
	ReasonLeaderDied ElectionReason = "leader not alive"
	// ReasonOnline: the partition had no leader and an eligible replica is
	// alive again.
	ReasonOnline ElectionReason = "offline partition back online"
	// ReasonOffline: the leader died and no replica may lead.
	ReasonOffline ElectionReason = "no eligible replica alive"
	// ReasonISRShrink: the leader is alive but ISR members died.
	ReasonISRShrink ElectionReason = "in-sync replicas not alive"
	// ReasonPreferred: a preferred-leader election moved leadership back.
	ReasonPreferred ElectionReason = "preferred leader"
	// ReasonReassignment: a step of a partition reassignment.
	ReasonReassignment ElectionReason = "reassignment"
	// ReasonDeletion: the topic is being deleted.
	ReasonDeletion ElectionReason = "topic deletion"
)

// Election is one partition state to write: compare-and-set New over Old at
// /brokers/topics/<topic>/partitions/<p>/state, then send the leader and the
// followers the new state (leader: BecomeLeader; others: follow New.Leader at
// New.LeaderEpoch, truncating by epoch first).
type Election struct {
	Old    *PartitionState
	New    *PartitionState
	Reason ElectionReason
	// Unclean: the new leader was not in the ISR; records committed under
	// the old leader may be lost (the topic allowed it).
	Unclean bool
}

// LeaderCounts counts, per alive broker, the partitions it leads. Every
// alive broker has an entry, so one leading nothing counts as zero.
func LeaderCounts(partitions []*PartitionState, alive map[int32]bool) map[int32]int {
	counts := make(map[int32]int, len(alive))
	for id := range alive {
		counts[id] = 0
	}
	for _, p := range partitions {
		if p.Leader >= 0 && alive[p.Leader] {
			counts[p.Leader]++
		}
	}
	return counts
}

// sortedPartitions returns the partitions ordered by topic and number, so
// decisions do not depend on the order the caller read them in.
func sortedPartitions(partitions []*PartitionState) []*PartitionState {
	out := slices.Clone(partitions)
	slices.SortFunc(out, func(a, b *PartitionState) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// next returns a copy of p for the given controller epoch with the leader
// epoch bumped: every state the controller writes is a new leader epoch, so
// replicas can tell it from the one before (and a leader holding the old
// one fails its next ISR compare-and-set).
func (p *PartitionState) next(controllerEpoch int32) *PartitionState {
	n := p.clone()
	n.LeaderEpoch++
	n.ControllerEpoch = controllerEpoch
	return n
}
