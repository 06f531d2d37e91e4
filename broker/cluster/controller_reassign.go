package cluster

// Partition reassignment (`millrace cluster reassign`): moving a partition
// from its current replicas to a target list without ever having fewer
// in-sync copies than before. Level-triggered: NextReassignmentStep looks at
// the partition's current state and the target and names the one step to
// take now; the caller carries it out, waits for the store (a watch on the
// state, which changes when the new replicas join the ISR) and asks again,
// until StepDone. The steps, as in Kafka (KIP-455):
//
//  1. StepAddReplicas: the assignment becomes target ∪ current (target
//     first, so the target's first replica becomes the preferred leader);
//     write Assignment to /brokers/topics/<topic> and State to the
//     partition state; the brokers in Start create the replica and follow.
//  2. StepWaitForISR: the new replicas copy the data; the leader adds them
//     to the ISR as they catch up. Nothing to write.
//  3. StepElectLeader: if the leader is not in the target (or not alive),
//     elect the first alive target replica in the ISR; write State.
//  4. StepRemoveReplicas: the assignment becomes the target, the ISR drops
//     the removed replicas; write Assignment and State, then the brokers in
//     Stop stop and delete their replica.
//  5. StepDone: remove the reassignment request.

import (
	"fmt"
	"slices"
)

// ReassignmentStepKind names a reassignment step.
type ReassignmentStepKind int

// The reassignment steps, in the order they happen.
const (
	StepAddReplicas ReassignmentStepKind = iota + 1
	StepWaitForISR
	StepElectLeader
	StepRemoveReplicas
	StepDone
)

func (k ReassignmentStepKind) String() string {
	switch k {
	case StepAddReplicas:
		return "add replicas"
	case StepWaitForISR:
		return "wait for new replicas to join the ISR"
	case StepElectLeader:
		return "elect a leader from the target replicas"
	case StepRemoveReplicas:
		return "remove old replicas"
	case StepDone:
		return "done"
	}
	return fmt.Sprintf("step(%d)", int(k))
}

// ReassignmentStep is the one thing to do now.
type ReassignmentStep struct {
	Kind ReassignmentStepKind
	// Assignment, when not nil, is the replica list to write to the topic's
	// assignment znode.
	Assignment []int32
	// State, when not nil, is the partition state to write with
	// compare-and-set (as an Election, so the caller informs the brokers).
	State *Election
	// Start are brokers that must create the replica and follow the leader;
	// Stop are brokers that must stop theirs and delete its data.
	Start []int32
	Stop  []int32
	// Waiting are target replicas not yet in the ISR (StepWaitForISR), or
	// the target replicas of which none is alive and in sync when a leader
	// cannot be elected yet.
	Waiting []int32
}

// CheckReassignmentTarget validates a target replica list: not empty, no
// duplicates, only live brokers. Errors wrap ErrInvalidReplicaAssignment.
func CheckReassignmentTarget(target []int32, alive map[int32]bool) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: the target replica list is empty", ErrInvalidReplicaAssignment)
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return fmt.Errorf("%w: broker %d is listed twice", ErrInvalidReplicaAssignment, id)
		}
		if !alive[id] {
			return fmt.Errorf("%w: broker %d is not a live broker", ErrInvalidReplicaAssignment, id)
		}
	}
	return nil
}

// NextReassignmentStep decides the next step of moving p to target.
func NextReassignmentStep(p *PartitionState, target []int32, alive map[int32]bool, controllerEpoch int32) ReassignmentStep {
	if slices.Equal(p.Replicas, target) {
		return ReassignmentStep{Kind: StepDone}
	}
	var adding []int32
	for _, id := range target {
		if !slices.Contains(p.Replicas, id) {
			adding = append(adding, id)
		}
	}
	if len(adding) > 0 {
		union := slices.Clone(target)
		for _, id := range p.Replicas {
			if !slices.Contains(union, id) {
				union = append(union, id)
			}
		}
		n := p.next(controllerEpoch)
		n.Replicas = union
		return ReassignmentStep{Kind: StepAddReplicas, Assignment: union, State: &Election{Old: p, New: n, Reason: ReasonReassignment}, Start: adding}
	}

	var waiting []int32
	for _, id := range target {
		if !slices.Contains(p.ISR, id) {
			waiting = append(waiting, id)
		}
	}
	if len(waiting) > 0 {
		return ReassignmentStep{Kind: StepWaitForISR, Waiting: waiting}
	}

	if p.Leader < 0 || !slices.Contains(target, p.Leader) || !alive[p.Leader] {
		for _, id := range target {
			if alive[id] && slices.Contains(p.ISR, id) {
				n := p.next(controllerEpoch)
				n.Leader = id
				return ReassignmentStep{Kind: StepElectLeader, State: &Election{Old: p, New: n, Reason: ReasonReassignment}}
			}
		}
		return ReassignmentStep{Kind: StepElectLeader, Waiting: slices.Clone(target)}
	}

	var removing []int32
	for _, id := range p.Replicas {
		if !slices.Contains(target, id) {
			removing = append(removing, id)
		}
	}
	n := p.next(controllerEpoch)
	n.Replicas = slices.Clone(target)
	n.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !slices.Contains(target, id) })
	return ReassignmentStep{Kind: StepRemoveReplicas, Assignment: slices.Clone(target), State: &Election{Old: p, New: n, Reason: ReasonReassignment}, Stop: removing}
}
