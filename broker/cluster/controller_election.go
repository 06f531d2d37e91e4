package cluster

// Leader election when the set of live brokers changes, and the
// preferred-leader rebalance (auto.leader.rebalance.enable). Both return
// Elections; the caller writes each with compare-and-set and informs the
// brokers (see Election).
//
// Rules:
//   - Only an alive ISR member may lead: it holds every committed record
//     (the leader counted it in the high watermark). The ISR of the new
//     state is the alive part of the old one.
//   - Among eligible replicas, the one leading the fewest partitions wins
//     (ties: the earlier in the assignment), and counts are updated as the
//     elections proceed, so the failed broker's leaderships spread out
//     instead of all landing on the next replica in line.
//   - With no alive ISR member the partition goes offline (leader -1) and
//     keeps its ISR, so the last in-sync replica leads cleanly when it
//     returns; unless the topic sets unclean.leader.election.enable, in
//     which case an alive out-of-sync replica leads and may lose records.

import "slices"

// ElectOnBrokerChange decides the new states after brokers died or
// returned: partitions whose leader is gone get a new leader (or go
// offline), offline partitions with an eligible replica alive again come
// back, and partitions whose leader is alive but whose ISR names dead
// brokers have them removed (so acks=all does not wait
// replica.lag.time.max.ms for a broker known to be dead).
func ElectOnBrokerChange(view ControllerView) []Election {
	counts := LeaderCounts(view.Partitions, view.Alive)
	var out []Election
	for _, p := range sortedPartitions(view.Partitions) {
		if p.Leader >= 0 && view.Alive[p.Leader] {
			isr := aliveOnly(p.ISR, view.Alive)
			if len(isr) == len(p.ISR) {
				continue
			}
			n := p.next(view.ControllerEpoch)
			n.ISR = isr
			out = append(out, Election{Old: p, New: n, Reason: ReasonISRShrink})
			continue
		}
		e, ok := electLeader(p, view, counts)
		if !ok {
			continue
		}
		// The dead leader is not counted (LeaderCounts counts alive
		// brokers only); the new one now leads one more.
		if e.New.Leader >= 0 {
			counts[e.New.Leader]++
		}
		out = append(out, e)
	}
	return out
}

// electLeader picks a leader for a partition whose leader is not alive. ok
// is false when nothing changes (an offline partition stays offline).
func electLeader(p *PartitionState, view ControllerView, counts map[int32]int) (Election, bool) {
	reason := ReasonLeaderDied
	if p.Leader < 0 {
		reason = ReasonOnline
	}
	isr := aliveOnly(p.ISR, view.Alive)
	var candidates []int32
	for _, id := range p.Replicas { // assignment order breaks ties
		if slices.Contains(isr, id) {
			candidates = append(candidates, id)
		}
	}
	if leader, ok := fewestLeaderships(candidates, counts); ok {
		n := p.next(view.ControllerEpoch)
		n.Leader, n.ISR = leader, isr
		return Election{Old: p, New: n, Reason: reason}, true
	}
	if view.UncleanTopics[p.Topic] {
		unclean := aliveOnly(p.Replicas, view.Alive)
		if leader, ok := fewestLeaderships(unclean, counts); ok {
			n := p.next(view.ControllerEpoch)
			n.Leader, n.ISR = leader, []int32{leader}
			return Election{Old: p, New: n, Reason: reason, Unclean: true}, true
		}
	}
	if p.Leader < 0 {
		return Election{}, false // still offline
	}
	// Offline: keep the ISR (its members are all dead) so the last in-sync
	// replica leads when it returns; bump the epoch so the dead leader, if
	// it is merely cut off, is fenced.
	n := p.next(view.ControllerEpoch)
	n.Leader = -1
	return Election{Old: p, New: n, Reason: ReasonOffline}, true
}

// fewestLeaderships returns the candidate leading the fewest partitions, the
// first in candidates on a tie.
func fewestLeaderships(candidates []int32, counts map[int32]int) (int32, bool) {
	if len(candidates) == 0 {
		return -1, false
	}
	best := candidates[0]
	for _, id := range candidates[1:] {
		if counts[id] < counts[best] {
			best = id
		}
	}
	return best, true
}

func aliveOnly(ids []int32, alive map[int32]bool) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if alive[id] {
			out = append(out, id)
		}
	}
	return out
}

// PreferredLeaderElections moves leadership back to each partition's
// preferred replica (the first of its assignment) where that replica is
// alive, in the ISR, and not leading already. The ISR is unchanged: the new
// leader is in sync, so nothing committed is lost. Since AssignReplicas
// spreads preferred leaders evenly, running this after a broker returns
// restores leader counts that differ by at most one. Partitions without a
// leader are left to ElectOnBrokerChange. The caller runs it on the
// leader.imbalance.check.interval (or when a broker registers) when
// auto.leader.rebalance.enable is set. Partitions being reassigned are
// left to their reassignment (ControllerView.Reassigning).
func PreferredLeaderElections(view ControllerView) []Election {
	var out []Election
	for _, p := range sortedPartitions(view.Partitions) {
		if len(p.Replicas) == 0 || p.Leader < 0 || view.Reassigning[p.Topic][p.Partition] {
			continue
		}
		preferred := p.Replicas[0]
		if p.Leader == preferred || !view.Alive[preferred] || !slices.Contains(p.ISR, preferred) {
			continue
		}
		n := p.next(view.ControllerEpoch)
		n.Leader = preferred
		out = append(out, Election{Old: p, New: n, Reason: ReasonPreferred})
	}
	return out
}

// Apply returns partitions with the elections' new states in place of the
// old ones (matched by topic and partition); a helper for callers and tests
// that keep the view in memory.
func Apply(partitions []*PartitionState, elections []Election) []*PartitionState {
	out := slices.Clone(partitions)
	for _, e := range elections {
		for i, p := range out {
			if p.Topic == e.New.Topic && p.Partition == e.New.Partition {
				out[i] = e.New
			}
		}
	}
	return out
}
