package group

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

func deleteGroup(c *Coordinator, version int16, group string) kmsg.DeleteGroupsResponseGroup {
	r := kmsg.NewPtrDeleteGroupsRequest()
	r.Version = version
	r.Groups = []string{group}
	return c.DeleteGroups(context.Background(), r).Groups[0]
}

func TestDeleteGroups(t *testing.T) {
	e := newEnv(t, testConfig())
	id := stableGroup(t, e, "busy", 10*time.Second)
	e.c.OffsetCommit(context.Background(), commitReq("busy", id, 1, "t", map[int32]int64{0: 1}))
	e.c.OffsetCommit(context.Background(), commitReq("idle", "", -1, "t", map[int32]int64{0: 9}))

	if g := deleteGroup(e.c, 3, "busy"); g.ErrorCode != errNonEmptyGroup || g.ErrorMessage == nil {
		t.Fatalf("delete busy: %+v", g)
	}
	if g := deleteGroup(e.c, 0, "nogroup"); g.ErrorCode != errGroupIDNotFound {
		t.Fatalf("delete unknown: %+v", g)
	}
	if g := deleteGroup(e.c, 2, ""); g.ErrorCode != errInvalidGroupID {
		t.Fatalf("delete empty id: %+v", g)
	}
	if g := deleteGroup(e.c, 2, "idle"); g.ErrorCode != errNone {
		t.Fatalf("delete idle: %+v", g)
	}
	if e.nodeExists("/consumers/idle") {
		t.Fatal("/consumers/idle survived DeleteGroups")
	}
	if got := fetchOffset(t, e.c, "idle", "t", 0); got != -1 {
		t.Fatalf("offset after delete: %d", got)
	}
	if g := deleteGroup(e.c, 2, "idle"); g.ErrorCode != errGroupIDNotFound {
		t.Fatalf("second delete: %+v", g)
	}

	// Once its member leaves, the busy group can go, mirrors and all.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "busy", id
	e.c.LeaveGroup(context.Background(), leave)
	if g := deleteGroup(e.c, 1, "busy"); g.ErrorCode != errNone {
		t.Fatalf("delete after leave: %+v", g)
	}
	waitfor.Until(t, 10*time.Second, "subtree gone", func() bool { return !e.nodeExists("/consumers/busy") })
	// The group can be used again afterwards.
	joinMember(t, e.c, "busy", "a", 10*time.Second, "t")
	e.restart()
	if g := deleteGroup(e.c, 2, "busy"); g.ErrorCode != errGroupIDNotFound {
		t.Fatalf("deleted offsets came back after restart: %+v", g)
	}
}

func TestListAndDescribeGroups(t *testing.T) {
	e := newEnv(t, testConfig())
	stableGroup(t, e, "stable", 10*time.Second)
	joinMember(t, e.c, "completing", "b", 10*time.Second, "t")
	e.c.OffsetCommit(context.Background(), commitReq("offsets-only", "", -1, "t", map[int32]int64{0: 1}))
	fetchOffset(t, e.c, "looked-up", "t", 0) // a lookup does not create a group

	list := func(version int16, states ...string) map[string]string {
		t.Helper()
		r := kmsg.NewPtrListGroupsRequest()
		r.Version = version
		r.StatesFilter = states
		resp := e.c.ListGroups(context.Background(), r)
		if resp.ErrorCode != errNone {
			t.Fatalf("ListGroups: %d", resp.ErrorCode)
		}
		out := make(map[string]string)
		for _, g := range resp.Groups {
			out[g.Group] = g.GroupState + "/" + g.ProtocolType
		}
		return out
	}
	tests := []struct {
		name    string
		version int16
		states  []string
		want    map[string]string
	}{
		{"all", 4, nil, map[string]string{"stable": "Stable/consumer", "completing": "CompletingRebalance/consumer", "offsets-only": "Empty/"}},
		{"stable only", 4, []string{"Stable"}, map[string]string{"stable": "Stable/consumer"}},
		{"case-insensitive", 5, []string{"empty", "STABLE"}, map[string]string{"stable": "Stable/consumer", "offsets-only": "Empty/"}},
		{"dead", 4, []string{"Dead"}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := list(tt.version, tt.states...)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = 5
	r.TypesFilter = []string{"consumer"}
	if resp := e.c.ListGroups(context.Background(), r); len(resp.Groups) != 0 {
		t.Fatalf("type filter \"consumer\" (KIP-848 groups) matched classic groups: %+v", resp.Groups)
	}

	// Groups known only from the store are listed after a restart.
	e.restart()
	if got := list(4, "Empty"); got["offsets-only"] != "Empty/" || len(got) != 1 {
		t.Fatalf("after restart: %v", got)
	}

	// Membership is not persisted: a group without committed offsets is
	// unknown after a restart until its members rejoin.
	if d := describe(t, e.c, "stable"); d.State != "Dead" {
		t.Fatalf("membership-only group after restart: %s", d.State)
	}
	id := stableGroup(t, e, "stable", 10*time.Second)
	d := describe(t, e.c, "stable")
	if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	m := d.Members[0]
	if m.MemberID != id || m.ClientID != "a" || m.ClientHost != "/127.0.0.1" ||
		!bytes.Equal(m.ProtocolMetadata, consumerMeta("t")) || !bytes.Equal(m.MemberAssignment, consumerAssignment("t", 0, 1)) {
		t.Fatalf("described member: %+v", m)
	}
	if d := describe(t, e.c, "nogroup"); d.State != "Dead" || d.ErrorCode != errNone {
		t.Fatalf("unknown group (v5): %+v", d)
	}
	r6 := kmsg.NewPtrDescribeGroupsRequest()
	r6.Version = 6
	r6.Groups = []string{"nogroup"}
	if g := e.c.DescribeGroups(context.Background(), r6).Groups[0]; g.ErrorCode != errGroupIDNotFound || g.ErrorMessage == nil {
		t.Fatalf("unknown group (v6): %+v", g)
	}
}

// Lookups of unknown groups leave nothing behind, and a group released that
// way can still be joined at once.
func TestLookupsDoNotAccumulateGroups(t *testing.T) {
	e := newEnv(t, testConfig())
	for _, name := range []string{"x1", "x2", "x3"} {
		fetchOffset(t, e.c, name, "t", 0)
		describe(t, e.c, name)
		deleteGroup(e.c, 2, name)
	}
	e.c.mu.Lock()
	n := len(e.c.groups)
	e.c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d group objects left after lookups", n)
	}
	joinMember(t, e.c, "x1", "a", 10*time.Second, "t")
	if d := describe(t, e.c, "x1"); d.State != "CompletingRebalance" {
		t.Fatalf("x1 after join: %s", d.State)
	}
}
