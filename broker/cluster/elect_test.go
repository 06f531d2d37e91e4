package cluster

import (
	"errors"
	"slices"
	"testing"
)

func TestDecideElection(t *testing.T) {
	state := func(leader int32, isr ...int32) *PartitionState {
		return &PartitionState{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}, Leader: leader, LeaderEpoch: 4, ISR: isr}
	}
	counts := map[int32]int{1: 0, 2: 5, 3: 1}
	for _, tc := range []struct {
		name   string
		kind   ElectionType
		p      *PartitionState
		alive  map[int32]bool
		err    error
		leader int32
		isr    []int32
	}{
		{"preferred leads already", ElectPreferred, state(1, 1, 2, 3), alive(1, 2, 3), ErrElectionNotNeeded, 0, nil},
		{"preferred back", ElectPreferred, state(2, 1, 2, 3), alive(1, 2, 3), nil, 1, []int32{1, 2, 3}},
		{"preferred out of sync", ElectPreferred, state(2, 2, 3), alive(1, 2, 3), ErrPreferredLeaderNotAvailable, 0, nil},
		{"preferred dead", ElectPreferred, state(2, 1, 2, 3), alive(2, 3), ErrPreferredLeaderNotAvailable, 0, nil},
		{"unclean with a live leader", ElectUnclean, state(2, 2), alive(1, 2, 3), ErrElectionNotNeeded, 0, nil},
		{"unclean prefers the in-sync", ElectUnclean, state(-1, 1, 3), alive(3), nil, 3, []int32{3}},
		{"unclean out of sync", ElectUnclean, state(-1, 1), alive(2, 3), nil, 3, []int32{3}},
		{"unclean nobody alive", ElectUnclean, state(-1, 1), alive(4), ErrEligibleLeadersNotAvailable, 0, nil},
	} {
		n, err := decideElection(tc.kind, tc.p, tc.alive, counts, 9)
		if tc.err != nil {
			if !errors.Is(err, tc.err) || n != nil {
				t.Errorf("%s: %+v, %v; want %v", tc.name, n, err, tc.err)
			}
			continue
		}
		if err != nil || n.Leader != tc.leader || !slices.Equal(n.ISR, tc.isr) || n.LeaderEpoch != 5 || n.ControllerEpoch != 9 {
			t.Errorf("%s: %+v, %v; want leader %d, ISR %v, leader epoch 5, controller epoch 9", tc.name, n, err, tc.leader, tc.isr)
		}
	}
	if _, err := decideElection(7, state(1, 1), alive(1), counts, 9); err == nil {
		t.Error("election type 7 accepted")
	}
}
