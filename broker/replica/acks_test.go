package replica

import (
	"errors"
	"testing"
)

// The 2013 Jepsen failure: both followers are gone. With
// min.insync.replicas=2 the leader alone must never acknowledge an acks=all
// write: the pending one fails once the ISR shrinks, and new ones are refused
// before the append.
func TestJepsenBothFollowersGone(t *testing.T) {
	h := newHarness(t, 2, []int32{1, 2, 3}, 0)
	h.produce(1, 4)
	h.fetch(2, 4, 1)
	h.fetch(3, 4, 1)
	h.wantCompleted(1)

	h.produce(2, 4) // neither follower fetches it
	h.take(h.l.Tick(at(20)), nil)
	h.wantProposal(1)
	h.wantHW(4) // the old ISR still governs while the write is in flight
	h.commit()
	h.wantISR(1)
	h.wantCompleted(1)
	h.wantFailed(2, ErrNotEnoughReplicasAfterAppend)
	if err := h.l.CheckAcksAll(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all accepted with the leader alone: %v", err)
	}

	// A follower returns and catches up; writes succeed again.
	h.fetch(2, h.l.LogEndOffset(), 30)
	h.wantProposal(1, 2)
	h.commit()
	if err := h.l.CheckAcksAll(); err != nil {
		t.Fatalf("acks=all refused with two in sync: %v", err)
	}
	h.produce(3, 1)
	h.wantCompleted(1)
	h.fetch(2, h.l.LogEndOffset(), 31)
	h.wantCompleted(1, 3)
}

// The ISR shrinks below min.insync.replicas between the append and the
// completion: NOT_ENOUGH_REPLICAS_AFTER_APPEND, never success.
func TestAcksAllFailsWhenISRShrinksAfterAppend(t *testing.T) {
	h := newHarness(t, 3, []int32{1, 2, 3}, 0)
	h.fetch(2, 0, 0.5)
	h.fetch(3, 0, 0.5)
	h.produce(1, 10)
	h.fetch(2, 10, 1) // 2 has it, 3 does not
	h.take(h.l.Tick(at(15)), nil)
	h.wantProposal(1, 2)
	if len(h.failed) != 0 || len(h.completed) != 0 {
		t.Fatal("answered before the shrink was written")
	}
	h.commit()
	h.wantFailed(1, ErrNotEnoughReplicasAfterAppend)
	h.wantCompleted()
}

// While an expansion that would restore min.insync.replicas is in flight, a
// request whose records every member already has waits for the outcome
// instead of failing.
func TestAcksAllWaitsForExpansionInFlight(t *testing.T) {
	for _, outcome := range []string{"written", "refused"} {
		t.Run(outcome, func(t *testing.T) {
			h := newHarness(t, 2, []int32{1, 2}, 0)
			h.fetch(2, 0, 0)
			h.produce(1, 5)
			// Shrink to {1} with request 1 pending: it fails.
			h.take(h.l.Tick(at(11)), nil)
			h.commit()
			h.wantFailed(1, ErrNotEnoughReplicasAfterAppend)
			// 2 returns; its expansion is in flight, but min ISR is not met
			// yet, so new writes are refused.
			h.fetch(2, 5, 12)
			h.wantProposal(1, 2)
			if err := h.l.CheckAcksAll(); !errors.Is(err, ErrNotEnoughReplicas) {
				t.Fatalf("accepted before the expansion was written: %v", err)
			}
			// A request appended earlier (under the larger ISR, e.g. with a
			// lower min.insync.replicas) would wait; simulate with min 1.
			if err := h.l.SetConfig(Config{ReplicaLagTimeMax: h.l.cfg.ReplicaLagTimeMax, MinInsyncReplicas: 1}); err != nil {
				t.Fatal(err)
			}
			h.produce(2, 1)
			if err := h.l.SetConfig(Config{ReplicaLagTimeMax: h.l.cfg.ReplicaLagTimeMax, MinInsyncReplicas: 2}); err != nil {
				t.Fatal(err)
			}
			h.fetch(2, 6, 13)
			if len(h.completed) != 0 || h.failed[2] != nil {
				t.Fatalf("answered while the expansion is in flight: %v %v", h.completed, h.failed)
			}
			p := h.proposal
			h.proposal = nil
			if outcome == "written" {
				h.record(h.l.ISRWritten(p.ID, 8))
				h.wantCompleted(2)
			} else {
				h.take(h.l.ISRWriteFailed(p.ID, ObservedState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1}, Version: 9}))
				// Adopting the store's ISR {1} and expanding again at once;
				// the request keeps waiting for that proposal.
				h.wantProposal(1, 2)
				if len(h.completed) != 0 || h.failed[2] != nil {
					t.Fatal("answered without the expansion")
				}
				h.version = 2 // the store's version 9
				h.commit()
				h.wantCompleted(2)
			}
		})
	}
}

// A fenced leader fails everything pending and never completes a request,
// whatever happens afterwards.
func TestFencedLeaderNeverAcknowledges(t *testing.T) {
	h := newHarness(t, 2, []int32{1, 2, 3}, 0)
	h.produce(1, 3)
	h.produce(2, 3)
	h.fetch(2, 3, 1)
	h.fetch(3, 3, 1)
	h.wantCompleted(1)
	d := h.l.Fence()
	h.record(d)
	if !d.Fenced || h.l.IsLeader() {
		t.Fatal("not fenced")
	}
	h.wantFailed(2, ErrNotLeaderOrFollower)

	// Late events from the old term change nothing.
	if _, err := h.l.FollowerFetch(2, 6, 5, at(2)); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("fetch served by a fenced leader: %v", err)
	}
	h.take(h.l.Appended(9))
	h.take(h.l.WaitForAcks(3, 8))
	h.wantFailed(3, ErrNotLeaderOrFollower)
	h.record(h.l.Tick(at(100)))
	h.record(h.l.ISRWritten(1, 10))
	if err := h.l.CheckAcksAll(); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("fenced leader accepts acks=all: %v", err)
	}
	h.wantCompleted(1)
	if h.l.Pending() != 0 {
		t.Fatal("requests still pending")
	}

	// Elected again later, it starts a new term with nothing pending.
	h.take(h.l.BecomeLeader(LeaderState{LocalID: 1, LeaderEpoch: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, StateVersion: 20, LogEndOffset: 6, HighWatermark: 3}, at(200)))
	h.wantHW(3)
	h.produce(4, 1)
	h.fetch(2, 7, 201)
	h.wantCompleted(1, 4)
	if h.failed[2] == nil || h.failed[3] == nil {
		t.Fatal("lost a failure")
	}
}

// The controller bumps the epoch while this broker keeps leading (it shrank
// the ISR after a broker died): pending requests stay valid, positions are
// kept, and the in-flight proposal is dropped.
func TestContinuingLeaderKeepsPending(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2, 3}, 0)
	h.fetch(2, 0, 0)
	h.fetch(3, 0, 0)
	h.produce(1, 5)
	h.fetch(2, 5, 1)
	h.take(h.l.BecomeLeader(LeaderState{LocalID: 1, LeaderEpoch: 6, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, StateVersion: 12, LogEndOffset: 5}, at(2)))
	h.wantISR(1, 2)
	h.wantHW(5)
	h.wantCompleted(1)
	if h.l.FollowerEndOffset(2) != 5 {
		t.Fatal("follower position lost")
	}
	if _, err := h.l.FollowerFetch(2, 5, 5, at(3)); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("fetch with the old epoch: %v", err)
	}
}

func TestAbandon(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2}, 0)
	h.fetch(2, 0, 0)
	h.produce(1, 2)
	h.produce(2, 2)
	h.l.Abandon(1)
	h.fetch(2, 4, 1)
	h.wantCompleted(2)
}

func TestOutOfOrderWaitsCompleteInOffsetOrder(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2}, 0)
	h.fetch(2, 0, 0)
	h.take(h.l.Appended(10))
	h.take(h.l.WaitForAcks(7, 9))
	h.take(h.l.WaitForAcks(3, 2))
	h.take(h.l.WaitForAcks(5, 5))
	h.fetch(2, 6, 1)
	h.wantCompleted(3, 5)
	h.fetch(2, 10, 2)
	h.wantCompleted(3, 5, 7)
}
