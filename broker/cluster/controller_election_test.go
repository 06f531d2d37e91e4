package cluster

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// balancedTopic is topic "t" with the assignment AssignReplicas makes, every
// replica in sync and every preferred replica leading.
func balancedTopic(t *testing.T, brokers, partitions, rf int) []*PartitionState {
	t.Helper()
	a, err := AssignReplicas(brokersWithRacks(make([]string, brokers)...), int32(partitions), int16(rf), AssignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return newPartitionStates("t", 0, a)
}

func alive(ids ...int32) map[int32]bool {
	m := map[int32]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func spread(counts map[int32]int) int {
	lo, hi := 1<<30, -1
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	return hi - lo
}

func checkStateInvariants(t *testing.T, old, new *PartitionState) {
	t.Helper()
	if new.Leader >= 0 && !slices.Contains(new.ISR, new.Leader) {
		t.Fatalf("%s-%d: leader %d not in ISR %v", new.Topic, new.Partition, new.Leader, new.ISR)
	}
	for _, id := range new.ISR {
		if !slices.Contains(new.Replicas, id) {
			t.Fatalf("%s-%d: ISR %v not within replicas %v", new.Topic, new.Partition, new.ISR, new.Replicas)
		}
	}
	if new.LeaderEpoch != old.LeaderEpoch+1 {
		t.Fatalf("%s-%d: leader epoch %d after %d", new.Topic, new.Partition, new.LeaderEpoch, old.LeaderEpoch)
	}
}

func TestElectionPrefersFewestLeaderships(t *testing.T) {
	// 3 brokers, 6 partitions, rf 3: each broker leads 2. When broker 1
	// dies, its two partitions go one each to 2 and 3, not both to the
	// next replica in line.
	parts := balancedTopic(t, 3, 6, 3)
	view := ControllerView{Alive: alive(2, 3), Partitions: parts, ControllerEpoch: 2}
	elections := ElectOnBrokerChange(view)
	moved := 0
	for _, e := range elections {
		checkStateInvariants(t, e.Old, e.New)
		if e.New.ControllerEpoch != 2 || e.Unclean {
			t.Fatalf("bad election %+v", e.New)
		}
		if slices.Contains(e.New.ISR, 1) {
			t.Fatalf("dead broker kept in ISR: %+v", e.New)
		}
		if e.Old.Leader == 1 {
			moved++
			if e.Reason != ReasonLeaderDied {
				t.Fatalf("reason %q", e.Reason)
			}
		} else if e.Reason != ReasonISRShrink || e.New.Leader != e.Old.Leader {
			t.Fatalf("partition led by a live broker changed leader: %+v", e)
		}
	}
	if moved != 2 || len(elections) != 6 {
		t.Fatalf("%d leaderships moved, %d elections", moved, len(elections))
	}
	counts := LeaderCounts(Apply(parts, elections), view.Alive)
	if counts[2] != 3 || counts[3] != 3 {
		t.Fatalf("leader counts %v, want 3 and 3", counts)
	}
}

func TestElectionTiesByReplicaOrder(t *testing.T) {
	p := &PartitionState{Topic: "t", Partition: 0, Replicas: []int32{1, 3, 2}, Leader: 1, ISR: []int32{1, 2, 3}}
	e := ElectOnBrokerChange(ControllerView{Alive: alive(2, 3), Partitions: []*PartitionState{p}})
	if len(e) != 1 || e[0].New.Leader != 3 || !slices.Equal(e[0].New.ISR, []int32{2, 3}) {
		t.Fatalf("%+v", e[0].New)
	}
}

func TestUncleanElection(t *testing.T) {
	// Broker 1 led alone in the ISR and died; 2 and 3 are alive but out of
	// sync.
	p := &PartitionState{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1}}
	view := ControllerView{Alive: alive(2, 3), Partitions: []*PartitionState{p}, ControllerEpoch: 1}

	e := ElectOnBrokerChange(view)
	if len(e) != 1 || e[0].New.Leader != -1 || e[0].Reason != ReasonOffline || e[0].Unclean {
		t.Fatalf("clean: %+v", e)
	}
	if !slices.Equal(e[0].New.ISR, []int32{1}) || e[0].New.LeaderEpoch != 5 {
		t.Fatalf("offline state should keep the ISR and fence the epoch: %+v", e[0].New)
	}
	// Still offline while 1 stays dead: nothing more to write.
	offline := Apply(view.Partitions, e)
	if again := ElectOnBrokerChange(ControllerView{Alive: view.Alive, Partitions: offline}); len(again) != 0 {
		t.Fatalf("rewrote an offline partition: %+v", again)
	}
	// Broker 1 returns: it leads again, cleanly.
	back := ElectOnBrokerChange(ControllerView{Alive: alive(1, 2, 3), Partitions: offline, ControllerEpoch: 1})
	if len(back) != 1 || back[0].New.Leader != 1 || back[0].Reason != ReasonOnline || back[0].Unclean {
		t.Fatalf("return: %+v", back)
	}

	view.UncleanTopics = map[string]bool{"t": true}
	e = ElectOnBrokerChange(view)
	if len(e) != 1 || !e[0].Unclean || e[0].New.Leader != 2 || !slices.Equal(e[0].New.ISR, []int32{2}) {
		t.Fatalf("unclean: %+v", e[0].New)
	}
	// Nothing alive at all: offline even with unclean election.
	view.Alive = alive()
	e = ElectOnBrokerChange(view)
	if len(e) != 1 || e[0].New.Leader != -1 {
		t.Fatalf("no broker alive: %+v", e)
	}
}

func TestPreferredLeaderRebalance(t *testing.T) {
	parts := balancedTopic(t, 3, 6, 3)
	all := alive(1, 2, 3)
	// Broker 1 dies: its leaderships move.
	parts = Apply(parts, ElectOnBrokerChange(ControllerView{Alive: alive(2, 3), Partitions: parts}))
	// It returns: nothing moves until it is back in the ISR.
	if e := ElectOnBrokerChange(ControllerView{Alive: all, Partitions: parts}); len(e) != 0 {
		t.Fatalf("return of a follower changed states: %+v", e)
	}
	if e := PreferredLeaderElections(ControllerView{Alive: all, Partitions: parts}); len(e) != 0 {
		t.Fatalf("moved leadership to a replica out of the ISR: %+v", e)
	}
	if c := LeaderCounts(parts, all); c[1] != 0 || spread(c) != 3 {
		t.Fatalf("counts before the rebalance: %v", c)
	}
	// The leaders add it back to the ISR (ISR writes by the leaders).
	for _, p := range parts {
		p.ISR = append(p.ISR, 1)
	}
	e := PreferredLeaderElections(ControllerView{Alive: all, Partitions: parts, ControllerEpoch: 3})
	if len(e) != 2 {
		t.Fatalf("%d preferred elections, want 2", len(e))
	}
	for _, x := range e {
		checkStateInvariants(t, x.Old, x.New)
		if x.New.Leader != 1 || !slices.Equal(x.New.ISR, x.Old.ISR) || x.Reason != ReasonPreferred {
			t.Fatalf("%+v", x.New)
		}
	}
	if c := LeaderCounts(Apply(parts, e), all); spread(c) > 1 {
		t.Fatalf("counts after the rebalance: %v", c)
	}
}

// A partition with a move in progress keeps the leader its reassignment
// chose: a cancel back from [2 1 3] to [1 3] elects 1, and a preferred-leader
// election of 2 (first in the assignment until the move ends) would undo it
// on every pass.
func TestPreferredLeaderLeavesMovesAlone(t *testing.T) {
	p := &PartitionState{Topic: "moving", Partition: 0, Replicas: []int32{2, 1, 3}, Leader: 1, LeaderEpoch: 7, ISR: []int32{1, 3, 2}}
	view := ControllerView{Alive: alive(1, 2, 3), Partitions: []*PartitionState{p}}
	if e := PreferredLeaderElections(view); len(e) != 1 || e[0].New.Leader != 2 {
		t.Fatalf("without a move: %+v, want broker 2 elected", e)
	}
	view.Reassigning = map[string]map[int32]bool{"moving": {0: true}}
	if e := PreferredLeaderElections(view); len(e) != 0 {
		t.Fatalf("a preferred election during a move: %+v", e)
	}
}

// Random failures and returns over many partitions: every state keeps the
// leader in the ISR and the ISR within the replicas, clean elections never
// pick a replica out of the ISR, and after everything returns and rejoins
// the ISR a preferred-leader rebalance leaves counts within one.
func TestElectionRandomSequences(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		n := 3 + rng.IntN(4)
		parts := balancedTopic(t, n, 2*n+rng.IntN(3*n), min(3, n))
		up := map[int32]bool{}
		for i := 1; i <= n; i++ {
			up[int32(i)] = true
		}
		for step := 0; step < 40; step++ {
			id := int32(1 + rng.IntN(n))
			up[id] = !up[id]
			view := ControllerView{Alive: up, Partitions: parts}
			elections := ElectOnBrokerChange(view)
			for _, e := range elections {
				checkStateInvariants(t, e.Old, e.New)
				if e.New.Leader >= 0 && (!up[e.New.Leader] || !slices.Contains(e.Old.ISR, e.New.Leader)) {
					t.Fatalf("seed %d: elected %d out of %v alive %v", seed, e.New.Leader, e.Old.ISR, up)
				}
			}
			parts = Apply(parts, elections)
			// Live followers that lead nowhere rejoin the ISR sometimes (the
			// leader's expansion).
			for i, p := range parts {
				if p.Leader < 0 || rng.IntN(2) == 0 {
					continue
				}
				c := p.clone()
				for _, r := range p.Replicas {
					if up[r] && !slices.Contains(c.ISR, r) {
						c.ISR = append(c.ISR, r)
					}
				}
				parts[i] = c
			}
		}
		for i := 1; i <= n; i++ {
			up[int32(i)] = true
		}
		parts = Apply(parts, ElectOnBrokerChange(ControllerView{Alive: up, Partitions: parts}))
		for i, p := range parts {
			c := p.clone()
			if c.Leader < 0 {
				t.Fatalf("seed %d: partition %d offline with every broker alive: %+v", seed, p.Partition, p)
			}
			c.ISR = slices.Clone(c.Replicas)
			parts[i] = c
		}
		parts = Apply(parts, PreferredLeaderElections(ControllerView{Alive: up, Partitions: parts}))
		if c := LeaderCounts(parts, up); spread(c) > 1 {
			t.Fatalf("seed %d: counts %v after rebalance", seed, c)
		}
	}
}
