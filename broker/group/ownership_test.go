package group

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"millrace/broker/coord"
	"millrace/internal/waitfor"
)

// ownership stands in for the cluster's choice of coordinator: which broker
// coordinates every group, and the generation of that view.
type ownership struct {
	mu    sync.Mutex
	owner string
	gen   uint64
}

// moveTo makes broker the coordinator of every group, in a new generation.
func (o *ownership) moveTo(broker string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owner = broker
	o.gen++
}

// configFor returns a test Config for the named broker.
func (o *ownership) configFor(broker string) Config {
	cfg := testConfig()
	cfg.Owner = func(string) (bool, uint64) {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.owner == broker, o.gen
	}
	return cfg
}

// TestMovedGroupIsAbandoned: a group that moves to another broker is dropped
// by its old coordinator (waiting joins answered NOT_COORDINATOR, its
// members' mirror nodes removed, the rest left to the new coordinator), so when it comes back it starts afresh
// instead of waiting for members that left with it.
func TestMovedGroupIsAbandoned(t *testing.T) {
	var own ownership
	own.moveTo("a")
	cfgA, cfgB := own.configFor("a"), own.configFor("b")
	// A fast resync: a forgotten group's old state would be rewritten at once.
	cfgA.MirrorResync, cfgB.MirrorResync = 20*time.Millisecond, 20*time.Millisecond
	e := newEnv(t, cfgA)
	b := New(e.store, cfgB, testLogger())
	t.Cleanup(func() { b.Close() })
	ids := func() []string {
		names, _ := e.store.Children(idsPath("g"))
		slices.Sort(names)
		return names
	}

	first := joinMember(t, e.c, "g", "first", time.Minute, "t")
	if code := e.c.SyncGroup(clientCtx("first"), syncReq("g", first.MemberID, first.Generation,
		map[string][]byte{first.MemberID: consumerAssignment("t", 0)})).ErrorCode; code != errNone {
		t.Fatalf("sync: %d", code)
	}
	waitfor.Until(t, 10*time.Second, "the first member's mirror node", func() bool { return slices.Equal(ids(), []string{coord.EscapeName(first.MemberID)}) })
	// A second member's join waits for the first to rejoin.
	ctx := clientCtx("second")
	resp := e.c.JoinGroup(ctx, joinReq(9, "g", "", time.Minute, "t"))
	waiting := asyncJoin(e.c, ctx, joinReq(9, "g", resp.MemberID, time.Minute, "t"))
	waitfor.Until(t, 10*time.Second, "the second member to wait in JoinGroup", func() bool {
		g := e.c.lockGroup("g", false)
		defer g.mu.Unlock()
		return len(g.members) == 2
	})

	own.moveTo("b")
	if code := recv(t, waiting).ErrorCode; code != errNotCoordinator {
		t.Fatalf("join waiting when the group moved: %d, want NOT_COORDINATOR", code)
	}
	if code := heartbeat(e.c, "g", first.MemberID, first.Generation); code != errNotCoordinator {
		t.Errorf("heartbeat at the old coordinator: %d, want NOT_COORDINATOR", code)
	}
	owner := ownersPath("g") + "/" + coord.EscapeName("t") + "/0"
	waitfor.Until(t, 10*time.Second, "the old coordinator to remove its members' mirror nodes", func() bool {
		return len(ids()) == 0 && !e.nodeExists(owner)
	})
	third := joinMember(t, b, "g", "third", time.Minute, "t")
	if third.Generation != 1 {
		t.Errorf("generation at the new coordinator: %d, want 1", third.Generation)
	}
	if code := b.SyncGroup(clientCtx("third"), syncReq("g", third.MemberID, third.Generation,
		map[string][]byte{third.MemberID: consumerAssignment("t", 0)})).ErrorCode; code != errNone {
		t.Fatalf("sync at the new coordinator: %d", code)
	}
	waitfor.Until(t, 10*time.Second, "the new coordinator's mirror", func() bool {
		return slices.Equal(ids(), []string{coord.EscapeName(third.MemberID)}) && e.nodeData(owner) == third.MemberID
	})
	// Ten of the old coordinator's resync periods pass: what is checked
	// is that none of them brought its stale view back.
	time.Sleep(10 * cfgA.MirrorResync)
	if got := ids(); !slices.Equal(got, []string{coord.EscapeName(third.MemberID)}) || e.nodeData(owner) != third.MemberID {
		t.Errorf("mirror after the old coordinator's resyncs: ids %v, owner of t/0 %q; want only %s", got, e.nodeData(owner), third.MemberID)
	}

	// Back to a, with the first member's session still running there before
	// the move: a lone new member joins at once, in a fresh group.
	own.moveTo("a")
	ctx = clientCtx("fourth")
	resp = e.c.JoinGroup(ctx, joinReq(9, "g", "", time.Minute, "t"))
	fourth := recv(t, asyncJoin(e.c, ctx, joinReq(9, "g", resp.MemberID, time.Minute, "t")))
	if fourth.ErrorCode != errNone || fourth.Generation != 1 || len(fourth.Members) != 1 {
		t.Fatalf("join after the group came back: error %d, generation %d, %d members; want a fresh group of one",
			fourth.ErrorCode, fourth.Generation, len(fourth.Members))
	}
	waitfor.Until(t, 10*time.Second, "the mirror of the group back at a", func() bool { return slices.Equal(ids(), []string{coord.EscapeName(fourth.MemberID)}) })
}

// TestFormerCoordinatorsLateCommitIsFenced: while brokers' views differ, the
// former coordinator's commit fails once the new one has taken the group up,
// so the offsets the new one read stay the committed ones; and a broker that
// still believes it coordinates reads the offsets again when it sees the
// group taken up elsewhere.
func TestFormerCoordinatorsLateCommitIsFenced(t *testing.T) {
	var viewA, viewB ownership // each broker's own view of who coordinates
	viewA.moveTo("a")
	viewB.moveTo("a")
	e := newEnv(t, viewA.configFor("a"))
	b := New(e.store, viewB.configFor("b"), testLogger())
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	commit := func(c *Coordinator, offset int64) int16 {
		return commitCodes(c.OffsetCommit(ctx, commitReq("g", "", -1, "t", map[int32]int64{0: offset})))[0]
	}

	if code := commit(e.c, 5); code != errNone {
		t.Fatalf("commit at a: %d", code)
	}
	viewB.moveTo("b") // b's view changed; a's has not yet
	if got := fetchOffset(t, b, "g", "t", 0); got != 5 {
		t.Fatalf("fetch at b: %d, want 5", got)
	}
	if code := commit(e.c, 9); code != errNotCoordinator {
		t.Errorf("late commit at a: %d, want NOT_COORDINATOR", code)
	}
	if got := fetchOffset(t, b, "g", "t", 0); got != 5 {
		t.Errorf("fetch at b after a's late commit: %d, want 5", got)
	}
	if code := commit(b, 7); code != errNone {
		t.Fatalf("commit at b: %d", code)
	}
	if got := fetchOffset(t, e.c, "g", "t", 0); got != 7 {
		t.Errorf("fetch at a, which still believes it coordinates: %d, want 7", got)
	}
}
