package replica

import (
	"slices"
	"testing"
	"time"
)

func TestPreferredReadReplica(t *testing.T) {
	racks := map[int32]string{2: "b", 3: "c", 4: "c"}
	rackOf := func(id int32) (string, bool) { r, ok := racks[id]; return r, ok }
	both := []ReadCandidate{{ID: 2, LogEndOffset: 10}, {ID: 3, LogEndOffset: 10}}
	cases := []struct {
		name       string
		clientRack string
		candidates []ReadCandidate
		want       int32
	}{
		{"no client rack: the leader", "", both, -1},
		{"client in the leader's rack: the leader", "a", both, -1},
		{"follower in the client's rack", "b", both, 2},
		{"other follower in the client's rack", "c", both, 3},
		{"no replica in the client's rack: the leader", "d", both, -1},
		{"the follower in the rack is not a candidate: the leader", "b", []ReadCandidate{{ID: 3, LogEndOffset: 10}}, -1},
		{"an unreachable broker is never offered", "e", []ReadCandidate{{ID: 9, LogEndOffset: 10}}, -1},
		{"most caught-up by log end", "c", []ReadCandidate{{ID: 3, LogEndOffset: 8}, {ID: 4, LogEndOffset: 10}}, 4},
		{"then by the latest catch-up", "c", []ReadCandidate{{ID: 3, LogEndOffset: 10, SinceCaughtUp: time.Second}, {ID: 4, LogEndOffset: 10}}, 4},
		{"then by the smallest ID", "c", []ReadCandidate{{ID: 4, LogEndOffset: 10}, {ID: 3, LogEndOffset: 10}}, 3},
	}
	for _, c := range cases {
		if got := PreferredReadReplica(c.clientRack, "a", c.candidates, rackOf); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

func TestReadCandidates(t *testing.T) {
	// Broker 1 leads replicas 1, 2, 3 with ISR 1, 2, 3 at log end 10.
	h := newHarness(t, 1, []int32{1, 2, 3}, 10)
	if got := h.l.ReadCandidates(10, at(1)); len(got) != 0 {
		t.Fatalf("followers that never fetched are candidates: %v", got)
	}
	h.take(h.l.FollowerFetch(2, 10, 5, at(1)))
	h.l.FollowerLogStart(2, 0)
	h.take(h.l.FollowerFetch(3, 6, 5, at(1)))
	h.l.FollowerLogStart(3, 4)

	ids := func(cs []ReadCandidate) []int32 {
		var out []int32
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	for _, c := range []struct {
		offset int64
		want   []int32
	}{
		{10, []int32{2}},   // 3 lacks offsets 6..9
		{6, []int32{2, 3}}, // both hold it
		{2, []int32{2}},    // 3's retention deleted it
		{11, []int32(nil)}, // beyond every log
	} {
		if got := ids(h.l.ReadCandidates(c.offset, at(2))); !slices.Equal(got, c.want) {
			t.Errorf("offset %d: candidates %v, want %v", c.offset, got, c.want)
		}
	}
	if got := h.l.ReadCandidates(10, at(2)); len(got) != 1 || got[0].LogEndOffset != 10 || got[0].SinceCaughtUp != time.Second {
		t.Errorf("candidate view %+v, want log end 10 caught up 1s ago", got)
	}

	// Follower 3 falls out of the ISR: no longer a candidate, whatever it holds.
	h.record(h.l.Tick(at(20)))
	if h.proposal == nil {
		t.Fatal("no ISR shrink proposed for the lagging follower")
	}
	h.commit()
	h.wantISR(1, 2)
	if got := ids(h.l.ReadCandidates(6, at(20))); !slices.Equal(got, []int32{2}) {
		t.Errorf("after the shrink: candidates %v, want [2]", got)
	}

	h.l.Fence()
	if got := h.l.ReadCandidates(6, at(21)); got != nil {
		t.Errorf("a fenced leader offers candidates: %v", got)
	}
}

func TestValidSelectorClass(t *testing.T) {
	for name, want := range map[string]bool{
		"":                     true,
		RackAwareSelectorClass: true,
		"org.apache.kafka.common.replica.LeaderSelector": false,
		"rack": false,
	} {
		if got := ValidSelectorClass(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}
