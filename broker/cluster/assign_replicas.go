package cluster

// Replica assignment for new topics and new partitions: which brokers hold
// each partition's replicas and which of them is the preferred leader (the
// first). A pure function; the caller validates the topic, writes the result
// to /brokers/topics/<topic> and the initial partition states.
//
// The algorithm is Kafka's. Brokers are walked round-robin: partition p's
// preferred leader is broker (p + start) mod n, so preferred leaders are
// spread evenly. The other replicas follow the leader at a distance
// 1 + (shift + j) mod (n-1), where shift grows by one after every n
// partitions: without it, partition p's followers would always be the next
// brokers in line, and when a broker died all its followers' load would fall
// on the same neighbours. With racks, the broker list is first rearranged to
// alternate between racks (a1, b1, c1, a2, b2, ...), and a follower is only
// placed on a rack that has no replica of the partition yet, until every rack
// has one; so with at least as many racks as replicas no rack holds two.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// ErrMixedRacks: some brokers have a rack and others do not, so a rack-aware
// assignment is impossible and a rack-unaware one would silently ignore the
// racks that were configured.
var ErrMixedRacks = errors.New("some brokers have a rack and others do not")

// AssignOptions fixes the two free parameters of the assignment. Kafka picks
// both at random so that many small topics do not all start on broker 0; the
// caller does that (math/rand is fine) and tests pass fixed values.
type AssignOptions struct {
	// StartIndex is the position (in the broker list, rack-alternated when
	// rack-aware) of partition 0's preferred leader. Taken modulo the broker
	// count.
	StartIndex int
	// ReplicaShift is the initial distance offset of the followers. Taken
	// modulo the broker count.
	ReplicaShift int
	// FirstPartition is the number of the first partition to assign (non-zero
	// when CreatePartitions extends a topic).
	FirstPartition int32
}

// AssignReplicas assigns count partitions of rf replicas each over brokers.
// It is rack-aware when every broker has a rack, and fails with ErrMixedRacks
// when only some do. Errors wrap ErrInvalidPartitions,
// ErrInvalidReplicationFactor or ErrMixedRacks.
func AssignReplicas(brokers []BrokerInfo, count int32, rf int16, opts AssignOptions) ([][]int32, error) {
	if count < 1 {
		return nil, fmt.Errorf("%w: %d; a topic needs at least one partition", ErrInvalidPartitions, count)
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: %d; a partition needs at least one replica", ErrInvalidReplicationFactor, rf)
	}
	if int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available broker(s)", ErrInvalidReplicationFactor, rf, len(brokers))
	}
	if opts.FirstPartition < 0 {
		return nil, fmt.Errorf("%w: first partition %d is negative", ErrInvalidPartitions, opts.FirstPartition)
	}
	withRack := 0
	for _, b := range brokers {
		if b.Rack != "" {
			withRack++
		}
	}
	if withRack != 0 && withRack != len(brokers) {
		return nil, fmt.Errorf("%w: %d of %d brokers have a rack; give every broker a rack or none", ErrMixedRacks, withRack, len(brokers))
	}
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b BrokerInfo) int { return cmp.Compare(a.ID, b.ID) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].ID == sorted[i-1].ID {
			return nil, fmt.Errorf("%w: broker %d is listed twice", ErrInvalidReplicaAssignment, sorted[i].ID)
		}
	}
	if withRack > 0 {
		sorted = alternateRacks(sorted)
	}
	n := len(sorted)
	racks := map[string]bool{}
	for _, b := range sorted {
		racks[b.Rack] = true
	}
	start := mod(opts.StartIndex, n)
	baseShift := mod(opts.ReplicaShift, n)
	out := make([][]int32, count)
	for i := range out {
		p := int(opts.FirstPartition) + i
		// The shift grows by one every n partitions, counted from partition
		// 0, so extending a topic continues the pattern where it stopped.
		shift := baseShift + p/n
		first := (p + start) % n
		leader := sorted[first]
		replicas := []int32{leader.ID}
		usedRacks := map[string]bool{leader.Rack: true}
		usedBrokers := map[int32]bool{leader.ID: true}
		// Without racks every broker has the rack "", which is then always
		// "used", so only the broker rule below applies.
		rackShift := shift
		if withRack > 0 {
			rackShift = shift * len(racks)
		}
		for j := 0; len(replicas) < int(rf); j++ {
			b := sorted[followerIndex(first, rackShift, j, n)]
			rackFree := !usedRacks[b.Rack] || len(usedRacks) == len(racks)
			brokerFree := !usedBrokers[b.ID]
			if withRack == 0 {
				rackFree = true
			}
			if rackFree && brokerFree {
				replicas = append(replicas, b.ID)
				usedRacks[b.Rack] = true
				usedBrokers[b.ID] = true
			}
		}
		out[i] = replicas
	}
	return out, nil
}

// followerIndex is the position of the j-th follower candidate of a partition
// led from position first: never first itself, since the distance is between
// 1 and n-1.
func followerIndex(first, shift, j, n int) int {
	if n == 1 {
		return first
	}
	return (first + 1 + (shift+j)%(n-1)) % n
}

// alternateRacks orders brokers so that consecutive ones are on different
// racks where possible: the first broker of each rack (racks by name), then
// the second of each, and so on. Input is sorted by ID.
func alternateRacks(brokers []BrokerInfo) []BrokerInfo {
	byRack := map[string][]BrokerInfo{}
	var names []string
	for _, b := range brokers {
		if _, ok := byRack[b.Rack]; !ok {
			names = append(names, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	slices.Sort(names)
	out := make([]BrokerInfo, 0, len(brokers))
	for round := 0; len(out) < len(brokers); round++ {
		for _, name := range names {
			if round < len(byRack[name]) {
				out = append(out, byRack[name][round])
			}
		}
	}
	return out
}

func mod(a, n int) int {
	return ((a % n) + n) % n
}
