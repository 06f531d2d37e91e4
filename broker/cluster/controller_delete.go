package cluster

// Topic deletion as the controller runs it. Level-triggered like
// reassignment: NextDeletionStep looks at the topic's partition states and at
// which replica brokers have confirmed deleting their data, and names the
// step to take now:
//
//  1. DeletionFenceLeaders: write every partition state with no leader and
//     a new epoch, so the old leaders stop accepting writes (their next ISR
//     compare-and-set fails) and clients see the topic go away.
//  2. DeletionStopReplicas: wait for each alive broker in StopReplicas to
//     stop and delete its replicas of the topic (each does so when it sees
//     the deletion marker, and confirms in the store; delete.go); report
//     confirmations back in the stopped set. Brokers that are dead are
//     listed in WaitingFor: the deletion stays pending until they return,
//     so no broker comes back holding a topic that the store has forgotten.
//  3. DeletionRemoveNodes: delete Paths in order (children before parents),
//     with the deletion marker.
//  4. DeletionDone.

import "slices"

// DeletionStepKind names a topic deletion step.
type DeletionStepKind int

// The deletion steps, in the order they happen.
const (
	DeletionFenceLeaders DeletionStepKind = iota + 1
	DeletionStopReplicas
	DeletionRemoveNodes
	DeletionDone
)

// DeletionStep is the one thing to do now.
type DeletionStep struct {
	Kind DeletionStepKind
	// States are the partition states to write (DeletionFenceLeaders).
	States []Election
	// StopReplicas maps an alive broker to the partitions it must delete.
	StopReplicas map[int32][]int32
	// WaitingFor lists dead brokers that still hold replicas.
	WaitingFor []int32
	// Paths are the znodes to delete, children first.
	Paths []string
}

// NextDeletionStep decides the next step of deleting topic t. stopped holds
// the brokers that confirmed deleting all their replicas of it. A nil t (the
// topic's nodes are gone) is done.
func NextDeletionStep(t *Topic, alive, stopped map[int32]bool, controllerEpoch int32) DeletionStep {
	if t == nil {
		return DeletionStep{Kind: DeletionDone}
	}
	var fence []Election
	for _, p := range t.Partitions {
		if p.Leader >= 0 {
			n := p.next(controllerEpoch)
			n.Leader = -1
			fence = append(fence, Election{Old: p, New: n, Reason: ReasonDeletion})
		}
	}
	if len(fence) > 0 {
		return DeletionStep{Kind: DeletionFenceLeaders, States: fence}
	}

	stop := map[int32][]int32{}
	var waiting []int32
	for _, p := range t.Partitions {
		for _, id := range p.Replicas {
			switch {
			case stopped[id]:
			case alive[id]:
				stop[id] = append(stop[id], p.Partition)
			case !slices.Contains(waiting, id):
				waiting = append(waiting, id)
			}
		}
	}
	if len(stop) > 0 || len(waiting) > 0 {
		slices.Sort(waiting)
		return DeletionStep{Kind: DeletionStopReplicas, StopReplicas: stop, WaitingFor: waiting}
	}

	var paths []string
	for _, p := range t.Partitions {
		paths = append(paths, partitionStatePath(t.Name, p.Partition), partitionPath(t.Name, p.Partition))
	}
	paths = append(paths, partitionsPath(t.Name), topicPath(t.Name), topicConfigPath(t.Name))
	return DeletionStep{Kind: DeletionRemoveNodes, Paths: paths}
}
