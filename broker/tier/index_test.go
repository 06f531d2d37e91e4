package tier

import (
	"context"
	"testing"
)

// TestIndexSegmentFor: the segment a read starts in is the first, by base
// offset, whose last offset is at or above the offset, also where a new
// leader's straddling segment overlaps its predecessor's (state.go); an
// offset below the remote log start, or past the last remote offset, is
// in none.
func TestIndexSegmentFor(t *testing.T) {
	t.Parallel()
	x := NewIndex()
	p := Partition{Topic: "t", TopicID: testTopicID, Leader: true, LeaderEpoch: 2}
	// [0,99], then a new leader's [50,149] (its segment began at 50),
	// then [150,199]; DeleteRecords moved the start to 20.
	x.note(p, State{LogStartOffset: 20, Segments: []Segment{
		{BaseOffset: 0, LastOffset: 99, Key: "a"},
		{BaseOffset: 50, LastOffset: 149, Key: "b"},
		{BaseOffset: 150, LastOffset: 199, Key: "c"},
	}}, true)
	for _, c := range []struct {
		offset int64
		key    string // "" = none
	}{
		{19, ""}, {20, "a"}, {60, "a"}, {99, "a"}, {100, "b"}, {149, "b"}, {150, "c"}, {199, "c"}, {200, ""},
	} {
		s, ok := x.SegmentFor("t", 0, c.offset)
		if got := map[bool]string{true: s.Key}[ok]; got != c.key {
			t.Errorf("SegmentFor(%d) = %q, want %q", c.offset, got, c.key)
		}
	}
	if start, last, ok := x.RemoteBounds("t", 0); !ok || start != 20 || last != 199 {
		t.Fatalf("RemoteBounds = %d, %d, %v; want 20, 199, true", start, last, ok)
	}
	if _, _, ok := x.RemoteBounds("t", 1); ok {
		t.Fatal("RemoteBounds of a partition never noted answered")
	}

	// A state whose segments all lie below its start (every remote
	// segment expired but the state kept its start) has no bounds.
	x.note(p, State{LogStartOffset: 300, Segments: []Segment{{BaseOffset: 0, LastOffset: 99}}}, true)
	if _, _, ok := x.RemoteBounds("t", 0); ok {
		t.Fatal("RemoteBounds answered for segments wholly below the start")
	}
	x.note(p, State{}, false)
	if _, ok := x.SegmentFor("t", 0, 0); ok {
		t.Fatal("SegmentFor answered after the state was forgotten")
	}
}

// TestIndexFollowsTheState: a leader's index answers each segment as soon
// as its upload is recorded and forgets it when total retention expires
// it; a broker that begins to lead reads the state its predecessor left
// at once (refreshLeaders), not at its next round.
func TestIndexFollowsTheState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 3, 1) // [0,1] [2,4] [5] and the active [6]
	m := e.manager(nil, leader(l, 1))
	m.RunOnce(context.Background())
	if start, last, ok := m.Index().RemoteBounds("t", 0); !ok || start != 0 || last != 5 {
		t.Fatalf("leader's RemoteBounds = %d, %d, %v; want 0, 5, true", start, last, ok)
	}
	if s, ok := m.Index().SegmentFor("t", 0, 3); !ok || s.BaseOffset != 2 || s.LastOffset != 4 {
		t.Fatalf("SegmentFor(3) = %+v, %v", s, ok)
	}

	// Another broker follows: its index, from its last round, is the
	// state before the leader's DeleteRecords past [0,1].
	follower := leader(openTieredLog(t, 2, 3, 1), 1)
	follower.Leader = false
	parts := []Partition{follower}
	cfg := DefaultConfig()
	cfg.Enable, cfg.URL = true, "file://"+e.store.Root()
	other, err := New(cfg, e.store, e.coord, Host{Partitions: func() []Partition { return parts }}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	other.RunOnce(context.Background())
	if start, _, ok := other.Index().RemoteBounds("t", 0); !ok || start != 0 {
		t.Fatalf("follower's RemoteBounds start %d, %v; want 0", start, ok)
	}
	if _, err := m.DeleteRecords(context.Background(), leader(l, 1), 2); err != nil {
		t.Fatal(err)
	}
	if start, _, ok := m.Index().RemoteBounds("t", 0); !ok || start != 2 {
		t.Fatalf("leader's RemoteBounds start %d after DeleteRecords, want 2", start)
	}
	other.refreshLeaders(context.Background())
	if start, _, _ := other.Index().RemoteBounds("t", 0); start != 0 {
		t.Fatalf("an unchanged follower re-read the state (start %d)", start)
	}

	// It becomes the leader at epoch 2.
	follower.Leader, follower.LeaderEpoch = true, 2
	parts = []Partition{follower}
	other.refreshLeaders(context.Background())
	if start, last, ok := other.Index().RemoteBounds("t", 0); !ok || start != 2 || last != 5 {
		t.Fatalf("new leader's RemoteBounds = %d, %d, %v; want 2, 5, true", start, last, ok)
	}
	if _, ok := other.Index().SegmentFor("t", 0, 1); ok {
		t.Fatal("the new leader reads a segment below the remote log start")
	}
}
