package replica

import (
	"testing"
)

// A follower that the controller removed from the ISR (its broker died)
// must fetch again before it rejoins: its position from before the death is
// not evidence that the returning replica holds anything.
func TestControllerShrinkForgetsRemovedFollower(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2, 3}, 10)
	h.take(h.l.FollowerFetch(2, 10, 5, at(1)))
	h.take(h.l.FollowerFetch(3, 10, 5, at(1)))
	if hw := h.l.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d, want 10", hw)
	}
	// The controller removes broker 3 (dead) at a new epoch; the leader
	// continues.
	d := h.take(h.l.BecomeLeader(LeaderState{LocalID: 1, LeaderEpoch: 6, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, StateVersion: 8, LogEndOffset: 10, HighWatermark: 10}, at(2)))
	if d.ProposeISR != nil {
		t.Fatalf("proposed %v right after the controller removed broker 3", d.ProposeISR.ISR)
	}
	if got := h.l.FollowerEndOffset(3); got != -1 {
		t.Fatalf("removed follower's end offset %d, want -1 (unknown)", got)
	}
	// Once it fetches at the log end again it rejoins.
	d = h.take(h.l.FollowerFetch(3, 10, 6, at(3)))
	if d.ProposeISR == nil || len(d.ProposeISR.Added) != 1 || d.ProposeISR.Added[0] != 3 {
		t.Fatalf("after fetching, proposal %+v, want broker 3 added", d.ProposeISR)
	}
}
