package group

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

func TestOffsetsSurviveRestart(t *testing.T) {
	e := newEnv(t, testConfig())
	// A simple consumer (kadm, group reset) commits to a group with no members.
	resp := e.c.OffsetCommit(context.Background(), commitReq("simple", "", -1, "t", map[int32]int64{0: 10, 1: 20}))
	if codes := commitCodes(resp); len(codes) != 2 || codes[0] != errNone || codes[1] != errNone {
		t.Fatalf("simple commit: %v", codes)
	}
	// A member commits with its generation.
	id := stableGroup(t, e, "g", 10*time.Second)
	resp = e.c.OffsetCommit(context.Background(), commitReq("g", id, 1, "t", map[int32]int64{0: 5}))
	if codes := commitCodes(resp); codes[0] != errNone {
		t.Fatalf("member commit: %v", codes)
	}
	resp = e.c.OffsetCommit(context.Background(), commitReq("g", id, 1, "t", map[int32]int64{0: 7}))
	if codes := commitCodes(resp); codes[0] != errNone {
		t.Fatalf("second member commit: %v", codes)
	}

	// The stored layout is the contract with other tools.
	var stored struct {
		Offset          int64  `json:"offset"`
		LeaderEpoch     int32  `json:"leader_epoch"`
		Metadata        string `json:"metadata"`
		CommitTimestamp int64  `json:"commit_timestamp_ms"`
	}
	if err := json.Unmarshal([]byte(e.nodeData("/consumers/g/offsets/t/0")), &stored); err != nil {
		t.Fatalf("stored offset: %v", err)
	}
	if stored.Offset != 7 || stored.LeaderEpoch != 3 || stored.Metadata != "m" || stored.CommitTimestamp < time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("stored offset = %+v", stored)
	}

	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			group     string
			partition int32
			want      int64
		}{{"simple", 0, 10}, {"simple", 1, 20}, {"simple", 2, -1}, {"g", 0, 7}, {"g", 1, -1}, {"nogroup", 0, -1}} {
			if got := fetchOffset(t, e.c, tc.group, "t", tc.partition); got != tc.want {
				t.Fatalf("%s: %s t/%d = %d, want %d", when, tc.group, tc.partition, got, tc.want)
			}
		}
	}
	check("before restart")
	e.restart()
	check("after coordinator restart")
	e.reopen()
	check("after store reopen")

	// Null topics (v2+) return every committed partition.
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group = "simple"
	all := e.c.OffsetFetch(context.Background(), r)
	if len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 2 || all.Topics[0].Partitions[1].Offset != 20 ||
		all.Topics[0].Partitions[1].LeaderEpoch != 3 || *all.Topics[0].Partitions[1].Metadata != "m" {
		t.Fatalf("fetch all: %+v", all.Topics)
	}
	// v8+ fetches several groups at once.
	r = kmsg.NewPtrOffsetFetchRequest()
	r.Version = 9
	for _, g := range []string{"simple", "g"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
		r.Groups = append(r.Groups, rg)
	}
	multi := e.c.OffsetFetch(context.Background(), r)
	if len(multi.Groups) != 2 || multi.Groups[0].Topics[0].Partitions[0].Offset != 10 || multi.Groups[1].Topics[0].Partitions[0].Offset != 7 {
		t.Fatalf("multi-group fetch: %+v", multi.Groups)
	}
}

func TestOffsetCommitRules(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMetadataBytes = 8
	cfg.PartitionExists = func(topic string, partition int32) bool { return topic != "missing" && partition < 10 }
	e := newEnv(t, cfg)
	id := stableGroup(t, e, "g", 10*time.Second)
	longMeta := commitReq("g", id, 1, "t", map[int32]int64{0: 1})
	long := strings.Repeat("x", 9)
	longMeta.Topics[0].Partitions[0].Metadata = &long
	v0 := commitReq("simple0", "", -1, "t", map[int32]int64{0: 1})
	v0.Version = 0
	tests := []struct {
		name string
		req  *kmsg.OffsetCommitRequest
		want int16
	}{
		{"member commit", commitReq("g", id, 1, "t", map[int32]int64{0: 1}), errNone},
		{"wrong generation", commitReq("g", id, 2, "t", map[int32]int64{0: 1}), errIllegalGeneration},
		{"unknown member", commitReq("g", "nobody", 1, "t", map[int32]int64{0: 1}), errUnknownMemberID},
		{"simple commit to a group with members", commitReq("g", "", -1, "t", map[int32]int64{0: 1}), errUnknownMemberID},
		{"member commit to an unknown group", commitReq("nogroup", "x", 3, "t", map[int32]int64{0: 1}), errIllegalGeneration},
		{"unknown topic", commitReq("g", id, 1, "missing", map[int32]int64{0: 1}), errUnknownTopicOrPartition},
		{"unknown partition", commitReq("g", id, 1, "t", map[int32]int64{10: 1}), errUnknownTopicOrPartition},
		{"metadata too large", longMeta, errOffsetMetadataTooLarge},
		{"empty group id", commitReq("", "", -1, "t", map[int32]int64{0: 1}), errInvalidGroupID},
		{"v0 commit", v0, errNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			codes := commitCodes(e.c.OffsetCommit(context.Background(), tt.req))
			if len(codes) != 1 || codes[0] != tt.want {
				t.Fatalf("codes %v, want [%d]", codes, tt.want)
			}
		})
	}
	if e.nodeExists("/consumers/g/offsets/missing") {
		t.Fatal("a refused commit reached the store")
	}
	if got := fetchOffset(t, e.c, "simple0", "t", 0); got != 1 {
		t.Fatalf("v0 commit stored %d", got)
	}

	// During a rebalance a member may still commit with its generation;
	// after the join response but before the assignment it may not.
	idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
	chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, 10*time.Second, "t"))
	waitfor.Until(t, 10*time.Second, "rebalance", func() bool { return heartbeat(e.c, "g", id, 1) == errRebalanceInProgress })
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq("g", id, 1, "t", map[int32]int64{0: 2}))); codes[0] != errNone {
		t.Fatalf("commit while preparing rebalance: %v", codes)
	}
	e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", id, 10*time.Second, "t"))
	recv(t, chB)
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq("g", id, 2, "t", map[int32]int64{0: 3}))); codes[0] != errRebalanceInProgress {
		t.Fatalf("commit while completing rebalance: %v", codes)
	}
}

// One request's partitions are written together.
func TestOffsetCommitBatch(t *testing.T) {
	e := newEnv(t, testConfig())
	offsets := make(map[int32]int64)
	for p := int32(0); p < 20; p++ {
		offsets[p] = int64(p) * 100
	}
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq("g", "", -1, "t", offsets))); len(codes) != 20 {
		t.Fatalf("codes %v", codes)
	}
	children, err := e.store.Children("/consumers/g/offsets/t")
	if err != nil || len(children) != 20 {
		t.Fatalf("stored partitions %v (%v)", children, err)
	}
	for p := int32(0); p < 20; p++ {
		if got := fetchOffset(t, e.c, "g", "t", p); got != int64(p)*100 {
			t.Fatalf("t/%d = %d", p, got)
		}
	}
}

func TestOffsetDelete(t *testing.T) {
	e := newEnv(t, testConfig())
	id := stableGroup(t, e, "g", 10*time.Second) // subscribed to "t"
	e.c.OffsetCommit(context.Background(), commitReq("g", id, 1, "t", map[int32]int64{0: 1}))
	e.c.OffsetCommit(context.Background(), commitReq("g", id, 1, "old", map[int32]int64{0: 1, 1: 2}))

	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 1}}},
	}
	resp := e.c.OffsetDelete(context.Background(), req)
	if resp.ErrorCode != errNone || resp.Topics[0].Partitions[0].ErrorCode != errGroupSubscribedToTopic ||
		resp.Topics[1].Partitions[0].ErrorCode != errNone || resp.Topics[1].Partitions[1].ErrorCode != errNone {
		t.Fatalf("OffsetDelete: %+v", resp)
	}
	if fetchOffset(t, e.c, "g", "old", 1) != -1 || fetchOffset(t, e.c, "g", "t", 0) != 1 {
		t.Fatal("wrong offsets deleted")
	}
	if e.nodeExists("/consumers/g/offsets/old/0") {
		t.Fatal("deleted offset still in the store")
	}
	req.Group = "nogroup"
	if code := e.c.OffsetDelete(context.Background(), req).ErrorCode; code != errGroupIDNotFound {
		t.Fatalf("unknown group: %d", code)
	}
}

// TestOddGroupIDRoundTrips: a group ID that needs escaping commits and
// fetches its offsets.
func TestOddGroupIDRoundTrips(t *testing.T) {
	e := newEnv(t, testConfig())
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq("../evil/..", "", -1, "t", map[int32]int64{0: 4}))); codes[0] != errNone {
		t.Fatalf("commit with an odd group id: %v", codes)
	}
	if fetchOffset(t, e.c, "../evil/..", "t", 0) != 4 {
		t.Fatal("odd group id did not round-trip")
	}
}

// In a cluster each group has one coordinating broker (Config.Owner): the
// others answer NOT_COORDINATOR, and a broker that coordinates the group
// again after another did reads the offsets committed meanwhile from the
// store, not from its cache.
func TestOwnerMovesTheGroup(t *testing.T) {
	var own ownership
	own.moveTo("a")
	e := newEnv(t, own.configFor("a"))
	b := New(e.store, own.configFor("b"), testLogger())
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()

	if codes := commitCodes(e.c.OffsetCommit(ctx, commitReq("g", "", -1, "t", map[int32]int64{0: 5}))); codes[0] != errNone {
		t.Fatalf("commit at the coordinator: %v", codes)
	}
	if codes := commitCodes(b.OffsetCommit(ctx, commitReq("g", "", -1, "t", map[int32]int64{0: 6}))); codes[0] != errNotCoordinator {
		t.Errorf("commit at another broker: %v, want NOT_COORDINATOR", codes)
	}
	if code := b.JoinGroup(clientCtx("c"), joinReq(5, "g", "", 10*time.Second, "t")).ErrorCode; code != errNotCoordinator {
		t.Errorf("join at another broker: %d, want NOT_COORDINATOR", code)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group = 5, "g"
	if code := b.OffsetFetch(ctx, fetch).ErrorCode; code != errNotCoordinator {
		t.Errorf("fetch at another broker: %d, want NOT_COORDINATOR", code)
	}
	if got := fetchOffset(t, e.c, "g", "t", 0); got != 5 {
		t.Fatalf("fetch at the coordinator: %d, want 5", got)
	}

	own.moveTo("b") // broker a's view changed: the group moved to b
	if codes := commitCodes(b.OffsetCommit(ctx, commitReq("g", "", -1, "t", map[int32]int64{0: 9}))); codes[0] != errNone {
		t.Fatalf("commit at the new coordinator: %v", codes)
	}
	if code := e.c.OffsetFetch(ctx, fetch).ErrorCode; code != errNotCoordinator {
		t.Errorf("fetch at the old coordinator: %d, want NOT_COORDINATOR", code)
	}

	own.moveTo("a") // and back
	if got := fetchOffset(t, e.c, "g", "t", 0); got != 9 {
		t.Errorf("fetch after the group came back: %d, want 9 (committed at b meanwhile)", got)
	}
}
