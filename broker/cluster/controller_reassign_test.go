package cluster

import (
	"errors"
	"slices"
	"testing"
)

// Moving [1 2 3] to [2 3 4]: add 4, wait for it, move leadership off 1,
// remove 1. Each step's state is applied as the store would hold it.
func TestReassignmentSequence(t *testing.T) {
	p := &PartitionState{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2, 3}}
	target := []int32{2, 3, 4}
	up := alive(1, 2, 3, 4)
	if err := CheckReassignmentTarget(target, up); err != nil {
		t.Fatal(err)
	}
	var kinds []ReassignmentStepKind
	for range 10 {
		s := NextReassignmentStep(p, target, up, 5)
		kinds = append(kinds, s.Kind)
		if s.Kind == StepDone {
			break
		}
		if s.State != nil {
			checkStateInvariants(t, s.State.Old, s.State.New)
			if s.State.New.ControllerEpoch != 5 {
				t.Fatal("controller epoch not written")
			}
		}
		switch s.Kind {
		case StepAddReplicas:
			if !slices.Equal(s.Assignment, []int32{2, 3, 4, 1}) || !slices.Equal(s.Start, []int32{4}) || s.State.New.Leader != 1 {
				t.Fatalf("add: %+v", s)
			}
			p = s.State.New
		case StepWaitForISR:
			if !slices.Equal(s.Waiting, []int32{4}) {
				t.Fatalf("wait: %+v", s)
			}
			// The leader adds 4 once it has caught up.
			p = p.clone()
			p.ISR = append(p.ISR, 4)
		case StepElectLeader:
			if s.State == nil || s.State.New.Leader != 2 || !slices.Equal(s.State.New.ISR, p.ISR) {
				t.Fatalf("elect: %+v", s)
			}
			p = s.State.New
		case StepRemoveReplicas:
			if !slices.Equal(s.Assignment, target) || !slices.Equal(s.Stop, []int32{1}) ||
				!slices.Equal(s.State.New.ISR, []int32{2, 3, 4}) || s.State.New.Leader != 2 {
				t.Fatalf("remove: %+v", s.State.New)
			}
			p = s.State.New
		}
	}
	want := []ReassignmentStepKind{StepAddReplicas, StepWaitForISR, StepElectLeader, StepRemoveReplicas, StepDone}
	if !slices.Equal(kinds, want) {
		t.Fatalf("steps %v, want %v", kinds, want)
	}
	if p.LeaderEpoch != 6 {
		t.Fatalf("leader epoch %d after three writes from 3", p.LeaderEpoch)
	}
}

func TestReassignmentKeepsLeaderInTarget(t *testing.T) {
	// Mid-way: the assignment is the union, 4 has joined the ISR, and the
	// leader 2 is in the target, so no election is needed.
	p := &PartitionState{Topic: "t", Replicas: []int32{2, 4, 1, 3}, Leader: 2, ISR: []int32{1, 2, 3, 4}}
	s := NextReassignmentStep(p, []int32{2, 4}, alive(1, 2, 3, 4), 1)
	if s.Kind != StepRemoveReplicas || !slices.Equal(s.Stop, []int32{1, 3}) || s.State.New.Leader != 2 {
		t.Fatalf("%v %+v", s.Kind, s)
	}
}

func TestReassignmentWaitsForAliveLeader(t *testing.T) {
	// Every target replica in the ISR is dead: no leader can be elected
	// from the target yet.
	p := &PartitionState{Topic: "t", Replicas: []int32{3, 1}, Leader: 1, ISR: []int32{1, 3}}
	s := NextReassignmentStep(p, []int32{3}, alive(1), 1)
	if s.Kind != StepElectLeader || s.State != nil || !slices.Equal(s.Waiting, []int32{3}) {
		t.Fatalf("%+v", s)
	}
	for _, bad := range [][]int32{nil, {1, 1}, {1, 9}} {
		if err := CheckReassignmentTarget(bad, alive(1, 2)); !errors.Is(err, ErrInvalidReplicaAssignment) {
			t.Errorf("%v accepted: %v", bad, err)
		}
	}
	if StepDone.String() != "done" || ReassignmentStepKind(0).String() != "step(0)" {
		t.Error("step names")
	}
}

func TestTopicDeletionSequence(t *testing.T) {
	topic := &Topic{Name: "t", Partitions: []*PartitionState{
		{Topic: "t", Partition: 0, Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1, 2}},
		{Topic: "t", Partition: 1, Replicas: []int32{2, 3}, Leader: -1, ISR: []int32{2}},
	}}
	up := alive(1, 2) // broker 3 is down
	stopped := map[int32]bool{}

	s := NextDeletionStep(topic, up, stopped, 4)
	if s.Kind != DeletionFenceLeaders || len(s.States) != 1 || s.States[0].New.Leader != -1 || s.States[0].New.LeaderEpoch != 1 {
		t.Fatalf("fence: %+v", s)
	}
	topic.Partitions = Apply(topic.Partitions, s.States)

	s = NextDeletionStep(topic, up, stopped, 4)
	if s.Kind != DeletionStopReplicas || !slices.Equal(s.StopReplicas[1], []int32{0}) ||
		!slices.Equal(s.StopReplicas[2], []int32{0, 1}) || !slices.Equal(s.WaitingFor, []int32{3}) {
		t.Fatalf("stop: %+v", s)
	}
	stopped[1], stopped[2] = true, true
	s = NextDeletionStep(topic, up, stopped, 4)
	if s.Kind != DeletionStopReplicas || len(s.StopReplicas) != 0 || !slices.Equal(s.WaitingFor, []int32{3}) {
		t.Fatalf("waiting for broker 3: %+v", s)
	}
	up[3] = true
	s = NextDeletionStep(topic, up, stopped, 4)
	if s.Kind != DeletionStopReplicas || !slices.Equal(s.StopReplicas[3], []int32{1}) || len(s.WaitingFor) != 0 {
		t.Fatalf("stop on return: %+v", s)
	}
	stopped[3] = true
	s = NextDeletionStep(topic, up, stopped, 4)
	want := []string{
		partitionStatePath("t", 0), partitionPath("t", 0), partitionStatePath("t", 1), partitionPath("t", 1),
		partitionsPath("t"), topicPath("t"), topicConfigPath("t"),
	}
	if s.Kind != DeletionRemoveNodes || !slices.Equal(s.Paths, want) {
		t.Fatalf("remove: %+v", s)
	}
	if NextDeletionStep(nil, up, stopped, 4).Kind != DeletionDone {
		t.Fatal("not done")
	}
}
