package kafka

import (
	"testing"

	"millrace/broker/cluster"
)

// TestCountPartitions checks the partition gauges' arithmetic; only the
// controller passes the live brokers, so only it counts offline partitions.
func TestCountPartitions(t *testing.T) {
	state := func(leader int32, replicas, isr []int32) *cluster.PartitionState {
		return &cluster.PartitionState{Leader: leader, Replicas: replicas, ISR: isr}
	}
	topics := []*cluster.Topic{
		{Name: "a", Partitions: []*cluster.PartitionState{
			state(1, []int32{1, 2, 3}, []int32{1, 2, 3}), // led, fully replicated
			state(1, []int32{1, 2, 3}, []int32{1, 3}),    // led, under-replicated
			state(2, []int32{2, 1}, []int32{2}),          // followed
		}},
		{Name: "b", Partitions: []*cluster.PartitionState{
			state(-1, []int32{3}, []int32{3}),   // no leader
			state(3, []int32{3, 2}, []int32{3}), // leader dead
			state(2, []int32{2, 3}, []int32{2}), // elsewhere
		}},
	}
	for _, tc := range []struct {
		name  string
		me    int32
		alive map[int32]bool
		want  partitionCounts
	}{
		{"broker 1, not the controller", 1, nil, partitionCounts{hosted: 3, leaders: 2, underReplicated: 1}},
		{"broker 2, the controller", 2, map[int32]bool{1: true, 2: true}, partitionCounts{hosted: 5, leaders: 2, underReplicated: 2, offline: 2}},
		{"a broker hosting nothing", 9, nil, partitionCounts{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := countPartitions(topics, tc.me, tc.alive); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
