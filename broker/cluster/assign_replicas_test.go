package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func brokersWithRacks(racks ...string) []BrokerInfo {
	out := make([]BrokerInfo, len(racks))
	for i, r := range racks {
		out[i] = BrokerInfo{ID: int32(i + 1), Rack: r}
	}
	return out
}

func TestAssignReplicasSpreadsEvenly(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 6} {
		for rf := 1; rf <= min(n, 3); rf++ {
			for _, parts := range []int{1, n, 2 * n, 3*n + 1} {
				for start := 0; start < n; start++ {
					name := fmt.Sprintf("brokers=%d rf=%d partitions=%d start=%d", n, rf, parts, start)
					brokers := brokersWithRacks(make([]string, n)...)
					got, err := AssignReplicas(brokers, int32(parts), int16(rf), AssignOptions{StartIndex: start, ReplicaShift: start + 1})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					checkAssignmentProperties(t, name, brokers, got, rf)
					if parts%n == 0 {
						// Every broker holds exactly the same number of replicas.
						counts := replicaCounts(got)
						for id, c := range counts {
							if c != rf*parts/n {
								t.Fatalf("%s: broker %d holds %d replicas, want %d (%v)", name, id, c, rf*parts/n, got)
							}
						}
					}
				}
			}
		}
	}
}

// checkAssignmentProperties: the right replica count, no broker twice, only
// known brokers, preferred leaders differing by at most one.
func checkAssignmentProperties(t *testing.T, name string, brokers []BrokerInfo, got [][]int32, rf int) {
	t.Helper()
	leaders := map[int32]int{}
	for _, b := range brokers {
		leaders[b.ID] = 0
	}
	for p, replicas := range got {
		if len(replicas) != rf {
			t.Fatalf("%s: partition %d has %v", name, p, replicas)
		}
		for i, id := range replicas {
			if slices.Contains(replicas[:i], id) || !brokerLive(brokers, id) {
				t.Fatalf("%s: partition %d has %v", name, p, replicas)
			}
		}
		leaders[replicas[0]]++
	}
	lo, hi := len(got), 0
	for _, c := range leaders {
		lo, hi = min(lo, c), max(hi, c)
	}
	if len(got) >= len(brokers) && hi-lo > 1 || hi > (len(got)+len(brokers)-1)/len(brokers) {
		t.Fatalf("%s: preferred leaders %v are not spread evenly", name, leaders)
	}
}

func replicaCounts(a [][]int32) map[int32]int {
	c := map[int32]int{}
	for _, replicas := range a {
		for _, id := range replicas {
			c[id]++
		}
	}
	return c
}

func TestAssignReplicasFollowersShift(t *testing.T) {
	// Without the shift, broker 1's partitions would always have broker 2
	// as their second replica; with it, the followers of a broker's
	// partitions spread over the others.
	brokers := brokersWithRacks("", "", "", "")
	got, err := AssignReplicas(brokers, 16, 2, AssignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	followersOf1 := map[int32]bool{}
	for _, r := range got {
		if r[0] == 1 {
			followersOf1[r[1]] = true
		}
	}
	if len(followersOf1) != 3 {
		t.Fatalf("broker 1's followers %v, want all three others: %v", followersOf1, got)
	}
}

func TestAssignReplicasRackAware(t *testing.T) {
	layouts := [][]string{
		{"a", "a", "b", "b", "c", "c"},
		{"a", "b", "c"},
		{"a", "a", "a", "b", "b", "c"}, // uneven racks
		{"r1", "r2", "r1", "r2", "r3", "r4", "r3"},
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, racks := range layouts {
		brokers := brokersWithRacks(racks...)
		rackOf := map[int32]string{}
		for _, b := range brokers {
			rackOf[b.ID] = b.Rack
		}
		distinct := 0
		seen := map[string]bool{}
		for _, r := range racks {
			if !seen[r] {
				seen[r] = true
				distinct++
			}
		}
		for rf := 1; rf <= min(len(brokers), 3); rf++ {
			for range 20 {
				parts := 1 + rng.IntN(30)
				opts := AssignOptions{StartIndex: rng.IntN(100), ReplicaShift: rng.IntN(100)}
				name := fmt.Sprintf("racks=%v rf=%d partitions=%d %+v", racks, rf, parts, opts)
				got, err := AssignReplicas(brokers, int32(parts), int16(rf), opts)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkAssignmentProperties(t, name, brokers, got, rf)
				if distinct < rf {
					continue
				}
				for p, replicas := range got {
					used := map[string]bool{}
					for _, id := range replicas {
						if used[rackOf[id]] {
							t.Fatalf("%s: partition %d has two replicas on rack %s: %v", name, p, rackOf[id], replicas)
						}
						used[rackOf[id]] = true
					}
				}
			}
		}
	}
}

func TestAssignReplicasErrors(t *testing.T) {
	cases := []struct {
		brokers []BrokerInfo
		count   int32
		rf      int16
		opts    AssignOptions
		want    error
	}{
		{brokersWithRacks("", ""), 0, 1, AssignOptions{}, ErrInvalidPartitions},
		{brokersWithRacks("", ""), 1, 0, AssignOptions{}, ErrInvalidReplicationFactor},
		{brokersWithRacks("", ""), 1, 3, AssignOptions{}, ErrInvalidReplicationFactor},
		{brokersWithRacks("a", ""), 1, 1, AssignOptions{}, ErrMixedRacks},
		{brokersWithRacks("", ""), 1, 1, AssignOptions{FirstPartition: -1}, ErrInvalidPartitions},
		{[]BrokerInfo{{ID: 1}, {ID: 1}}, 1, 1, AssignOptions{}, ErrInvalidReplicaAssignment},
	}
	for i, c := range cases {
		if _, err := AssignReplicas(c.brokers, c.count, c.rf, c.opts); !errors.Is(err, c.want) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
}

// Extending a topic continues the rotation where it stopped.
func TestAssignReplicasContinuesPartitions(t *testing.T) {
	brokers := brokersWithRacks("", "", "")
	all, err := AssignReplicas(brokers, 9, 2, AssignOptions{StartIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	tail, err := AssignReplicas(brokers, 4, 2, AssignOptions{StartIndex: 1, FirstPartition: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range tail {
		if !slices.Equal(r, all[5+i]) {
			t.Fatalf("partition %d: %v, want %v", 5+i, r, all[5+i])
		}
	}
}
