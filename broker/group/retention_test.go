package group

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
	"millrace/internal/waitfor"
)

// fakeClock is a settable Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

// leaveAll makes member leave group (LeaveGroup v0).
func leaveAll(t *testing.T, c *Coordinator, group, member string) {
	t.Helper()
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Group, r.MemberID = group, member
	if code := c.LeaveGroup(context.Background(), r).ErrorCode; code != errNone {
		t.Fatalf("leave %s: %d", group, code)
	}
}

func TestOffsetExpiry(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := testConfig()
	cfg.Now, cfg.OffsetsRetention = clock.Now, time.Hour
	e := newEnv(t, cfg)
	ctx := context.Background()
	commit := func(group, member string, generation int32, offsets map[int32]int64) {
		t.Helper()
		for _, code := range commitCodes(e.c.OffsetCommit(ctx, commitReq(group, member, generation, "t", offsets))) {
			if code != errNone {
				t.Fatalf("commit to %s: %d", group, code)
			}
		}
	}

	// A simple group: each offset expires an hour after its own commit.
	commit("simple", "", -1, map[int32]int64{0: 1, 1: 1})
	// A v1 commit time in the future does not hold expiry off.
	v1 := commitReq("future", "", -1, "t", map[int32]int64{0: 1})
	v1.Version = 1
	v1.Topics[0].Partitions[0].Timestamp = clock.Now().Add(1000 * time.Hour).UnixMilli()
	if codes := commitCodes(e.c.OffsetCommit(ctx, v1)); codes[0] != errNone {
		t.Fatalf("v1 commit: %v", codes)
	}
	// A consumer group with a member: its offsets never expire.
	active := stableGroup(t, e, "active", time.Minute)
	commit("active", active, 1, map[int32]int64{0: 5})
	// A consumer group whose member committed, then left 40 minutes later:
	// expiry counts from then.
	left := stableGroup(t, e, "left", time.Minute)
	commit("left", left, 1, map[int32]int64{0: 7})

	clock.advance(30 * time.Minute)
	commit("simple", "", -1, map[int32]int64{1: 2})
	clock.advance(10 * time.Minute)
	leaveAll(t, e.c, "left", left)
	waitfor.Until(t, 10*time.Second, "left to be empty", func() bool {
		g := e.c.lockGroup("left", false)
		defer g.mu.Unlock()
		return g.state == stateEmpty
	})

	clock.advance(20 * time.Minute) // 60 minutes after the first commits
	e.c.expireOffsets()
	if e.nodeExists("/consumers/simple/offsets/t/0") || !e.nodeExists("/consumers/simple/offsets/t/1") {
		t.Fatal("after an hour: simple t/0 should be gone and t/1 (committed 30 minutes later) kept")
	}
	if got := fetchOffset(t, e.c, "simple", "t", 0); got != -1 {
		t.Fatalf("expired offset still served: %d", got)
	}
	if e.nodeExists("/consumers/future") {
		t.Fatal("the group with a future v1 commit time was not expired")
	}
	if !e.nodeExists("/consumers/left/offsets/t/0") || !e.nodeExists("/consumers/active/offsets/t/0") {
		t.Fatal("consumer group offsets expired too early")
	}

	clock.advance(40 * time.Minute) // the left group has been empty for 60 minutes
	if code := heartbeat(e.c, "active", active, 1); code != errNone {
		t.Fatalf("heartbeat: %d", code)
	}
	e.c.expireOffsets()
	for _, gone := range []string{"/consumers/simple", "/consumers/left"} {
		if e.nodeExists(gone) {
			t.Errorf("%s should be deleted with its last offset", gone)
		}
	}
	if got := fetchOffset(t, e.c, "active", "t", 0); got != 5 {
		t.Fatalf("the active group's offset = %d, want 5", got)
	}
}

func TestOffsetExpiryAfterRestart(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := testConfig()
	cfg.Now, cfg.OffsetsRetention = clock.Now, time.Hour
	e := newEnv(t, cfg)
	ctx := context.Background()
	if codes := commitCodes(e.c.OffsetCommit(ctx, commitReq("old", "", -1, "t", map[int32]int64{0: 1}))); codes[0] != errNone {
		t.Fatal(codes)
	}
	clock.advance(50 * time.Minute)
	if codes := commitCodes(e.c.OffsetCommit(ctx, commitReq("newer", "", -1, "t", map[int32]int64{0: 1}))); codes[0] != errNone {
		t.Fatal(codes)
	}
	// The commit times are in the store, so a restarted coordinator expires
	// groups it never held in memory.
	e.reopen()
	clock.advance(20 * time.Minute)
	e.c.expireOffsets()
	if e.nodeExists("/consumers/old") || !e.nodeExists("/consumers/newer/offsets/t/0") {
		t.Fatal("after restart: old should be expired, newer kept")
	}
	// The pass did not keep the stored groups in memory.
	e.c.mu.Lock()
	held := len(e.c.groups)
	e.c.mu.Unlock()
	if held != 0 {
		t.Fatalf("the expiry pass left %d groups in memory", held)
	}

	// An offset written without a commit time (by another tool) has an
	// unknown age: it is kept.
	for _, p := range []string{"/consumers/legacy", "/consumers/legacy/offsets", "/consumers/legacy/offsets/t"} {
		if _, err := e.store.Create(p, nil, coord.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Create("/consumers/legacy/offsets/t/0", []byte(`{"offset":3,"leader_epoch":-1,"metadata":""}`), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	clock.advance(1000 * time.Hour)
	e.c.expireOffsets()
	if got := fetchOffset(t, e.c, "legacy", "t", 0); got != 3 {
		t.Fatalf("offset without a commit time: %d after an expiry pass, want 3 (kept)", got)
	}
	if e.nodeExists("/consumers/newer") {
		t.Fatal("newer was not expired 1000 hours later")
	}
}

func TestGroupLimits(t *testing.T) {
	cfg := testConfig()
	cfg.MaxGroupIDBytes, cfg.MaxGroups = 8, 3
	e := newEnv(t, cfg)
	ctx := context.Background()
	commit := func(group string) int16 {
		return commitCodes(e.c.OffsetCommit(ctx, commitReq(group, "", -1, "t", map[int32]int64{0: 1})))[0]
	}

	long := strings.Repeat("g", 9)
	if code := commit(long); code != errInvalidGroupID {
		t.Fatalf("commit with a 9-byte group ID: %d, want INVALID_GROUP_ID", code)
	}
	if code := e.c.JoinGroup(clientCtx("a"), joinReq(9, long, "", time.Minute, "t")).ErrorCode; code != errInvalidGroupID {
		t.Fatalf("join with a 9-byte group ID: %d, want INVALID_GROUP_ID", code)
	}
	if e.c.ValidGroupID(long) || !e.c.ValidGroupID(long[:8]) || e.c.ValidGroupID("") {
		t.Fatal("ValidGroupID disagrees with the limit")
	}

	for _, g := range []string{"g1", "g2", "g3"} {
		if code := commit(g); code != errNone {
			t.Fatalf("commit to %s: %d", g, code)
		}
	}
	// Lookups of other groups do not take room.
	for _, g := range []string{"x1", "x2", "x3", "x4"} {
		fetchOffset(t, e.c, g, "t", 0)
	}
	if code := commit("g4"); code != errGroupMaxSizeReached {
		t.Fatalf("a fourth group: %d, want GROUP_MAX_SIZE_REACHED", code)
	}
	if code := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g5", "", time.Minute, "t")).ErrorCode; code != errGroupMaxSizeReached {
		t.Fatalf("join of a fourth group: %d, want GROUP_MAX_SIZE_REACHED", code)
	}
	if e.nodeExists("/consumers/g4") {
		t.Fatal("the refused group was written")
	}
	// Known groups keep working, and deleting one makes room.
	if code := commit("g1"); code != errNone {
		t.Fatalf("commit to a known group at the limit: %d", code)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g1"}
	if code := e.c.DeleteGroups(ctx, del).Groups[0].ErrorCode; code != errNone {
		t.Fatalf("delete: %d", code)
	}
	if code := commit("g4"); code != errNone {
		t.Fatalf("commit after a deletion made room: %d", code)
	}
}

func TestLimitConfigValidate(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative group ID bytes":  {MaxGroupIDBytes: -1},
		"negative max groups":      {MaxGroups: -1},
		"retention under a minute": {OffsetsRetention: time.Second},
		"negative check interval":  {OffsetsRetentionCheckInterval: -time.Second},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupLimitUnderConcurrency commits to fresh groups from many
// goroutines at once: exactly Config.MaxGroups are accepted. Refused
// commits and joins leave nothing behind that takes room.
func TestGroupLimitUnderConcurrency(t *testing.T) {
	cfg := testConfig()
	cfg.MaxGroups = 20
	cfg.PartitionExists = func(topic string, _ int32) bool { return topic == "t" }
	e := newEnv(t, cfg)
	ctx := context.Background()

	// Refused for other reasons first: an unknown partition, a join
	// without protocols. Neither may hold a group afterwards.
	for i := range 5 {
		resp := e.c.OffsetCommit(ctx, commitReq(fmt.Sprintf("nowhere-%d", i), "", -1, "missing", map[int32]int64{0: 1}))
		if codes := commitCodes(resp); codes[0] != errUnknownTopicOrPartition {
			t.Fatalf("commit to a missing topic: %v", codes)
		}
		bad := joinReq(9, fmt.Sprintf("badjoin-%d", i), "", time.Minute, "t")
		bad.ProtocolType = ""
		if code := e.c.JoinGroup(clientCtx("a"), bad).ErrorCode; code != errInconsistentGroupProtocol {
			t.Fatalf("join without a protocol type: %d", code)
		}
	}
	e.c.mu.Lock()
	held := len(e.c.groups)
	e.c.mu.Unlock()
	if held != 0 {
		t.Fatalf("refused requests left %d groups in memory", held)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int16]int{}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				resp := e.c.OffsetCommit(ctx, commitReq(fmt.Sprintf("g-%d-%d", w, i), "", -1, "t", map[int32]int64{0: 1}))
				mu.Lock()
				codes[commitCodes(resp)[0]]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if codes[errNone] != 20 || codes[errGroupMaxSizeReached] != 60 {
		t.Fatalf("80 concurrent commits to fresh groups with room for 20: %v", codes)
	}
}
