package group

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

func TestJoinAssignsMemberID(t *testing.T) {
	for _, version := range []int16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9} {
		e := newEnv(t, testConfig())
		ctx := clientCtx("cli")
		resp := e.c.JoinGroup(ctx, joinReq(version, "g", "", 10*time.Second, "t"))
		if resp.Version != version {
			t.Fatalf("v%d: response version %d", version, resp.Version)
		}
		if version >= 4 {
			// KIP-394: the first join only hands out an ID.
			if resp.ErrorCode != errMemberIDRequired || !strings.HasPrefix(resp.MemberID, "cli-") {
				t.Fatalf("v%d: first join = error %d member %q, want MEMBER_ID_REQUIRED with cli-<uuid>", version, resp.ErrorCode, resp.MemberID)
			}
			resp = e.c.JoinGroup(ctx, joinReq(version, "g", resp.MemberID, 10*time.Second, "t"))
		}
		if resp.ErrorCode != errNone || !strings.HasPrefix(resp.MemberID, "cli-") || len(resp.MemberID) != len("cli-")+36 {
			t.Fatalf("v%d: join = error %d member %q", version, resp.ErrorCode, resp.MemberID)
		}
		if resp.Generation != 1 || resp.LeaderID != resp.MemberID || *resp.Protocol != "range" {
			t.Fatalf("v%d: generation %d leader %q protocol %q", version, resp.Generation, resp.LeaderID, *resp.Protocol)
		}
		if len(resp.Members) != 1 || !bytes.Equal(resp.Members[0].ProtocolMetadata, consumerMeta("t")) {
			t.Fatalf("v%d: leader got members %+v", version, resp.Members)
		}
		e.shutdown()
	}
}

func TestJoinValidation(t *testing.T) {
	e := newEnv(t, Config{MinSessionTimeout: time.Second, MaxSessionTimeout: time.Minute, InitialRebalanceDelay: -1})
	joinMember(t, e.c, "g", "a", 10*time.Second, "t")
	other := joinReq(9, "g", "", 10*time.Second, "t")
	other.Protocols[0].Name = "roundrobin"
	wrongType := joinReq(9, "g", "", 10*time.Second, "t")
	wrongType.ProtocolType = "connect"
	noProtocols := joinReq(9, "fresh", "", 10*time.Second)
	noProtocols.Protocols = nil
	tests := []struct {
		name string
		req  *kmsg.JoinGroupRequest
		want int16
	}{
		{"session too short", joinReq(9, "g", "", 500*time.Millisecond), errInvalidSessionTimeout},
		{"session too long", joinReq(9, "g", "", 2*time.Minute), errInvalidSessionTimeout},
		{"empty group id", joinReq(9, "", "", 10*time.Second), errInvalidGroupID},
		{"no shared protocol", other, errInconsistentGroupProtocol},
		{"other protocol type", wrongType, errInconsistentGroupProtocol},
		{"no protocols", noProtocols, errInconsistentGroupProtocol},
		{"unknown member id", joinReq(9, "g", "nobody", 10*time.Second, "t"), errUnknownMemberID},
		{"unknown member of unknown group", joinReq(9, "nogroup", "nobody", 10*time.Second, "t"), errUnknownMemberID},
		{"unsupported version", func() *kmsg.JoinGroupRequest { r := joinReq(9, "g", "", 10*time.Second); r.Version = 10; return r }(), errUnsupportedVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.c.JoinGroup(clientCtx("b"), tt.req).ErrorCode; got != tt.want {
				t.Fatalf("error %d, want %d", got, tt.want)
			}
		})
	}
}

// Two members joining together form one generation; the leader's SyncGroup
// hands each member its assignment, including a follower already waiting.
func TestLeaderDistributesAssignment(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 100 * time.Millisecond
	e := newEnv(t, cfg)
	ctx := context.Background()
	idA := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
	idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
	chA := asyncJoin(e.c, clientCtx("a"), joinReq(9, "g", idA, 10*time.Second, "t"))
	waitMembers(t, e.c, "g", 1) // a joins first and so leads
	chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, 10*time.Second, "t"))
	ra, rb := recv(t, chA), recv(t, chB)
	if ra.ErrorCode != errNone || rb.ErrorCode != errNone {
		t.Fatalf("joins: %d %d", ra.ErrorCode, rb.ErrorCode)
	}
	if ra.Generation != 1 || rb.Generation != 1 || ra.LeaderID != idA || rb.LeaderID != idA {
		t.Fatalf("generation %d/%d leader %q/%q, want 1 and %q", ra.Generation, rb.Generation, ra.LeaderID, rb.LeaderID, idA)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader got %d members, follower %d; want 2 and 0", len(ra.Members), len(rb.Members))
	}

	// The follower syncs first and waits for the leader.
	follower := asyncSync(e.c, ctx, syncReq("g", idB, 1, nil))
	select {
	case r := <-follower:
		t.Fatalf("follower's SyncGroup returned before the leader's: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	assignA, assignB := consumerAssignment("t", 0), consumerAssignment("t", 1, 2)
	leader := e.c.SyncGroup(ctx, syncReq("g", idA, 1, map[string][]byte{idA: assignA, idB: assignB}))
	if leader.ErrorCode != errNone || !bytes.Equal(leader.MemberAssignment, assignA) {
		t.Fatalf("leader sync: %+v", leader)
	}
	fr := recv(t, follower)
	if fr.ErrorCode != errNone || !bytes.Equal(fr.MemberAssignment, assignB) || *fr.Protocol != "range" {
		t.Fatalf("follower sync: %+v", fr)
	}
	if code := heartbeat(e.c, "g", idB, 1); code != errNone {
		t.Fatalf("heartbeat in Stable: %d", code)
	}
	// A late SyncGroup in Stable gets the settled assignment again.
	if again := e.c.SyncGroup(ctx, syncReq("g", idB, 1, nil)); !bytes.Equal(again.MemberAssignment, assignB) {
		t.Fatalf("repeated sync: %+v", again)
	}

	// Mirrors: members under ids, partition owners under owners.
	waitfor.Until(t, 10*time.Second, "owner mirrors", func() bool {
		return e.nodeData("/consumers/g/owners/t/0") == idA &&
			e.nodeData("/consumers/g/owners/t/1") == idB &&
			e.nodeData("/consumers/g/owners/t/2") == idB
	})
	if data := e.nodeData("/consumers/g/ids/" + idA); !strings.Contains(data, `"client_id":"a"`) || !strings.Contains(data, `"topics":["t"]`) {
		t.Fatalf("ids mirror of %s = %s", idA, data)
	}
	_, stat, err := e.store.Get("/consumers/g/ids/" + idB)
	if err != nil || stat.EphemeralOwner != e.store.SessionID() {
		t.Fatalf("ids mirror of %s: stat %+v err %v, want ephemeral", idB, stat, err)
	}
}

// stableGroup forms a Stable one-member group and returns its member ID.
func stableGroup(t *testing.T, e *env, group string, session time.Duration) string {
	t.Helper()
	r := joinMember(t, e.c, group, "a", session, "t")
	s := e.c.SyncGroup(context.Background(), syncReq(group, r.MemberID, r.Generation, map[string][]byte{r.MemberID: consumerAssignment("t", 0, 1)}))
	if s.ErrorCode != errNone {
		t.Fatalf("sync: %d", s.ErrorCode)
	}
	return r.MemberID
}

func TestRebalanceOnJoin(t *testing.T) {
	e := newEnv(t, testConfig())
	idA := stableGroup(t, e, "g", 10*time.Second)
	waitfor.Until(t, 10*time.Second, "owner mirror", func() bool { return e.nodeData("/consumers/g/owners/t/1") == idA })

	idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
	chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, 10*time.Second, "t"))
	// The existing member learns of the rebalance from its heartbeat.
	waitfor.Until(t, 10*time.Second, "REBALANCE_IN_PROGRESS", func() bool { return heartbeat(e.c, "g", idA, 1) == errRebalanceInProgress })
	// Partitions are released while the group rebalances.
	waitfor.Until(t, 10*time.Second, "owners released", func() bool { return !e.nodeExists("/consumers/g/owners/t/1") })
	// Syncing the old generation during the rebalance is refused too.
	if s := e.c.SyncGroup(context.Background(), syncReq("g", idA, 1, nil)); s.ErrorCode != errRebalanceInProgress {
		t.Fatalf("sync during rebalance: %d", s.ErrorCode)
	}
	ra := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", idA, 10*time.Second, "t"))
	rb := recv(t, chB)
	if ra.ErrorCode != errNone || rb.ErrorCode != errNone || ra.Generation != 2 || rb.Generation != 2 {
		t.Fatalf("rejoin: %+v / %+v", ra, rb)
	}
	if ra.LeaderID != idA || len(ra.Members) != 2 {
		t.Fatalf("leader %q with %d members, want %q with 2", ra.LeaderID, len(ra.Members), idA)
	}
	// The old generation is now illegal.
	if code := heartbeat(e.c, "g", idA, 1); code != errIllegalGeneration {
		t.Fatalf("old-generation heartbeat: %d", code)
	}
}

func TestRebalanceOnLeave(t *testing.T) {
	for _, version := range []int16{0, 2, 3, 5} {
		e := newEnv(t, testConfig())
		idA := stableGroup(t, e, "g", 10*time.Second)
		idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
		chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, 10*time.Second, "t"))
		waitfor.Until(t, 10*time.Second, "rebalance", func() bool { return heartbeat(e.c, "g", idA, 1) == errRebalanceInProgress })
		e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", idA, 10*time.Second, "t"))
		recv(t, chB)
		e.c.SyncGroup(context.Background(), syncReq("g", idA, 2, map[string][]byte{idA: consumerAssignment("t", 0), idB: consumerAssignment("t", 1)}))
		waitfor.Until(t, 10*time.Second, "ids mirror of b", func() bool { return e.nodeExists("/consumers/g/ids/" + idB) })

		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group = version, "g"
		if version < 3 {
			leave.MemberID = idB
		} else {
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = idB
			leave.Members = append(leave.Members, m, kmsg.LeaveGroupRequestMember{MemberID: "nobody"})
		}
		resp := e.c.LeaveGroup(context.Background(), leave)
		if resp.ErrorCode != errNone {
			t.Fatalf("v%d leave: %d", version, resp.ErrorCode)
		}
		if version >= 3 && (len(resp.Members) != 2 || resp.Members[0].ErrorCode != errNone || resp.Members[1].ErrorCode != errUnknownMemberID) {
			t.Fatalf("v%d leave members: %+v", version, resp.Members)
		}
		if code := heartbeat(e.c, "g", idA, 2); code != errRebalanceInProgress {
			t.Fatalf("v%d heartbeat after leave: %d", version, code)
		}
		ra := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", idA, 10*time.Second, "t"))
		if ra.Generation != 3 || len(ra.Members) != 1 {
			t.Fatalf("v%d rejoin after leave: generation %d members %d", version, ra.Generation, len(ra.Members))
		}
		waitfor.Until(t, 10*time.Second, "ids mirror of b removed", func() bool { return !e.nodeExists("/consumers/g/ids/" + idB) })
		if code := heartbeat(e.c, "g", idB, 3); code != errUnknownMemberID {
			t.Fatalf("v%d heartbeat of the departed member: %d", version, code)
		}

		// The last member leaving empties the group.
		leave = kmsg.NewPtrLeaveGroupRequest()
		leave.Group, leave.MemberID = "g", idA
		e.c.LeaveGroup(context.Background(), leave)
		if d := describe(t, e.c, "g"); d.State != "Empty" || len(d.Members) != 0 {
			t.Fatalf("v%d after last leave: %+v", version, d)
		}
		waitfor.Until(t, 10*time.Second, "ids mirror empty", func() bool {
			ids, _ := e.store.Children("/consumers/g/ids")
			return len(ids) == 0
		})
		e.shutdown()
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, testConfig())
	const session = 150 * time.Millisecond
	idA := stableGroup(t, e, "g", session)
	idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", session, "t")).MemberID
	chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, session, "t"))
	waitfor.Until(t, 10*time.Second, "rebalance", func() bool { return heartbeat(e.c, "g", idA, 1) == errRebalanceInProgress })
	e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", idA, session, "t"))
	recv(t, chB)
	e.c.SyncGroup(context.Background(), syncReq("g", idA, 2, map[string][]byte{idA: consumerAssignment("t", 0), idB: consumerAssignment("t", 1)}))
	waitfor.Until(t, 10*time.Second, "ids mirror of b", func() bool { return e.nodeExists("/consumers/g/ids/" + idB) })

	// a keeps heartbeating; b goes silent and must be expired.
	waitfor.Until(t, 10*time.Second, "b expired", func() bool {
		return heartbeat(e.c, "g", idA, 2) == errRebalanceInProgress
	})
	ra := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", idA, session, "t"))
	if ra.ErrorCode != errNone || ra.Generation != 3 || len(ra.Members) != 1 || ra.Members[0].MemberID != idA {
		t.Fatalf("after expiry: %+v", ra)
	}
	waitfor.Until(t, 10*time.Second, "ids mirror of b removed", func() bool { return !e.nodeExists("/consumers/g/ids/" + idB) })
	// Everyone silent: the group ends Empty.
	waitfor.Until(t, 10*time.Second, "group empty", func() bool { return describe(t, e.c, "g").State == "Empty" })
}

func TestHeartbeatAndSyncErrors(t *testing.T) {
	e := newEnv(t, testConfig())
	id := stableGroup(t, e, "g", 10*time.Second)
	hb := []struct {
		name       string
		group, id  string
		generation int32
		want       int16
	}{
		{"ok", "g", id, 1, errNone},
		{"wrong generation", "g", id, 7, errIllegalGeneration},
		{"unknown member", "g", "nobody", 1, errUnknownMemberID},
		{"unknown group", "nogroup", id, 1, errUnknownMemberID},
		{"empty group id", "", id, 1, errInvalidGroupID},
	}
	for _, tt := range hb {
		t.Run("heartbeat "+tt.name, func(t *testing.T) {
			if got := heartbeat(e.c, tt.group, tt.id, tt.generation); got != tt.want {
				t.Fatalf("error %d, want %d", got, tt.want)
			}
		})
	}
	sync := []struct {
		name string
		req  *kmsg.SyncGroupRequest
		want int16
	}{
		{"wrong generation", syncReq("g", id, 2, nil), errIllegalGeneration},
		{"unknown member", syncReq("g", "nobody", 1, nil), errUnknownMemberID},
		{"unknown group", syncReq("nogroup", id, 1, nil), errUnknownMemberID},
		{"wrong protocol", func() *kmsg.SyncGroupRequest {
			r := syncReq("g", id, 1, nil)
			p := "sticky"
			r.Protocol = &p
			return r
		}(), errInconsistentGroupProtocol},
	}
	for _, tt := range sync {
		t.Run("sync "+tt.name, func(t *testing.T) {
			if got := e.c.SyncGroup(context.Background(), tt.req).ErrorCode; got != tt.want {
				t.Fatalf("error %d, want %d", got, tt.want)
			}
		})
	}
}

// A stable member's unchanged rejoin returns the current generation without a
// rebalance; a follower's does not disturb the group.
func TestFollowerRejoinWithoutChange(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 50 * time.Millisecond
	e := newEnv(t, cfg)
	idA := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
	idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID
	chA := asyncJoin(e.c, clientCtx("a"), joinReq(9, "g", idA, 10*time.Second, "t"))
	waitMembers(t, e.c, "g", 1) // a joins first and so leads
	chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, 10*time.Second, "t"))
	recv(t, chA)
	recv(t, chB)
	if s := e.c.SyncGroup(context.Background(), syncReq("g", idA, 1, map[string][]byte{idA: consumerAssignment("t", 0)})); s.ErrorCode != errNone {
		t.Fatalf("leader sync: %d", s.ErrorCode)
	}
	r := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", idB, 10*time.Second, "t"))
	if r.ErrorCode != errNone || r.Generation != 1 {
		t.Fatalf("follower rejoin: %+v", r)
	}
	if d := describe(t, e.c, "g"); d.State != "Stable" {
		t.Fatalf("state after follower rejoin: %s", d.State)
	}
}

func TestStaticMembership(t *testing.T) {
	e := newEnv(t, testConfig())
	instance := "host-1"
	req := joinReq(9, "g", "", 10*time.Second, "t")
	req.InstanceID = &instance
	// Static members skip MEMBER_ID_REQUIRED.
	r := e.c.JoinGroup(clientCtx("a"), req)
	if r.ErrorCode != errNone || !strings.HasPrefix(r.MemberID, "host-1-") {
		t.Fatalf("static join: %+v", r)
	}
	oldID := r.MemberID
	assign := consumerAssignment("t", 0, 1)
	e.c.SyncGroup(context.Background(), syncReq("g", oldID, 1, map[string][]byte{oldID: assign}))

	// The instance restarts: same instance ID, no member ID.
	r2 := e.c.JoinGroup(clientCtx("a"), req)
	if r2.ErrorCode != errNone || r2.MemberID == oldID || r2.Generation != 1 || r2.LeaderID != r2.MemberID || !r2.SkipAssignment {
		t.Fatalf("static rejoin: %+v", r2)
	}
	if d := describe(t, e.c, "g"); d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != r2.MemberID {
		t.Fatalf("after static rejoin: %+v", d)
	}
	s := e.c.SyncGroup(context.Background(), syncReq("g", r2.MemberID, 1, nil))
	if s.ErrorCode != errNone || !bytes.Equal(s.MemberAssignment, assign) {
		t.Fatalf("sync of the replacing member: %+v", s)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = 4, "g", oldID, 1, &instance
	if code := e.c.Heartbeat(context.Background(), hb).ErrorCode; code != errFencedInstanceID {
		t.Fatalf("old member heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	// Leaving by instance ID alone.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: &instance}}
	if lr := e.c.LeaveGroup(context.Background(), leave); lr.Members[0].ErrorCode != errNone {
		t.Fatalf("leave by instance: %+v", lr)
	}
	if d := describe(t, e.c, "g"); d.State != "Empty" {
		t.Fatalf("after static leave: %s", d.State)
	}
}

func TestPendingCallsEnd(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = time.Minute // the join would wait a long time
	e := newEnv(t, cfg)
	id := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", "", 10*time.Second, "t")).MemberID

	ctx, cancel := context.WithCancel(clientCtx("a"))
	ch := asyncJoin(e.c, ctx, joinReq(9, "g", id, 10*time.Second, "t"))
	cancel()
	if r := recv(t, ch); r.ErrorCode != errRebalanceInProgress {
		t.Fatalf("join after cancel: %d", r.ErrorCode)
	}

	ch = asyncJoin(e.c, clientCtx("a"), joinReq(9, "g", id, 10*time.Second, "t"))
	time.Sleep(20 * time.Millisecond) // the join is very likely waiting by now; Close must answer it either way
	e.c.Close()
	if r := recv(t, ch); r.ErrorCode != errNotCoordinator {
		t.Fatalf("join after Close: %d", r.ErrorCode)
	}
	if code := heartbeat(e.c, "g", id, 0); code != errNotCoordinator {
		t.Fatalf("heartbeat after Close: %d", code)
	}
}

func TestSyncTimeoutRemovesSilentLeader(t *testing.T) {
	cfg := testConfig()
	cfg.InitialRebalanceDelay = 50 * time.Millisecond
	e := newEnv(t, cfg)
	const timeout = 300 * time.Millisecond
	idA := e.c.JoinGroup(clientCtx("a"), joinReq(9, "g", "", timeout, "t")).MemberID
	idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", timeout, "t")).MemberID
	chA := asyncJoin(e.c, clientCtx("a"), joinReq(9, "g", idA, timeout, "t"))
	waitMembers(t, e.c, "g", 1) // a joins first and so leads
	chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, timeout, "t"))
	recv(t, chA)
	recv(t, chB)
	// The leader (a) never syncs, yet keeps its session alive.
	follower := asyncSync(e.c, context.Background(), syncReq("g", idB, 1, nil))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				heartbeat(e.c, "g", idA, 1)
			}
		}
	}()
	fr := recv(t, follower)
	close(stop)
	<-done
	if fr.ErrorCode != errRebalanceInProgress {
		t.Fatalf("follower sync: %d, want REBALANCE_IN_PROGRESS", fr.ErrorCode)
	}
	rb := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", idB, timeout, "t"))
	if rb.ErrorCode != errNone || rb.LeaderID != idB || len(rb.Members) != 1 {
		t.Fatalf("rejoin after the silent leader was removed: %+v", rb)
	}
}

func describe(t *testing.T, c *Coordinator, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{group}
	resp := c.DescribeGroups(context.Background(), r)
	if len(resp.Groups) != 1 {
		t.Fatalf("describe: %+v", resp)
	}
	return resp.Groups[0]
}

// waitMembers waits until the group has n members (joined or joining).
func waitMembers(t *testing.T, c *Coordinator, group string, n int) {
	t.Helper()
	waitfor.Until(t, 10*time.Second, "members to join", func() bool { return len(describe(t, c, group).Members) == n })
}

// A member that keeps heartbeating but never rejoins is dropped when the
// rebalance timeout ends.
func TestRebalanceTimeoutDropsStraggler(t *testing.T) {
	e := newEnv(t, testConfig())
	const timeout = 300 * time.Millisecond
	idA := stableGroup(t, e, "g", timeout)
	idB := e.c.JoinGroup(clientCtx("b"), joinReq(9, "g", "", timeout, "t")).MemberID
	chB := asyncJoin(e.c, clientCtx("b"), joinReq(9, "g", idB, timeout, "t"))
	waitfor.Until(t, 10*time.Second, "rebalance", func() bool { return heartbeat(e.c, "g", idA, 1) == errRebalanceInProgress })
	start := time.Now()
	// a stays alive (heartbeats) so only the rebalance timeout can drop it.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				heartbeat(e.c, "g", idA, 1)
			}
		}
	}()
	rb := recv(t, chB)
	close(stop)
	<-done
	if rb.ErrorCode != errNone || rb.Generation != 2 || rb.LeaderID != idB || len(rb.Members) != 1 {
		t.Fatalf("join after the straggler was dropped: %+v", rb)
	}
	if waited := time.Since(start); waited < timeout/2 {
		t.Fatalf("rebalance completed after %v, before the rebalance timeout", waited)
	}
	if code := heartbeat(e.c, "g", idA, 1); code != errUnknownMemberID {
		t.Fatalf("straggler heartbeat: %d", code)
	}
}

// Mirrors are ephemeral: when the store session expires they vanish, and
// the periodic resync puts them back.
func TestMirrorsReturnAfterSessionExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.MirrorResync = 50 * time.Millisecond
	e := newEnv(t, cfg)
	id := stableGroup(t, e, "g", 10*time.Second)
	path := "/consumers/g/owners/t/1"
	waitfor.Until(t, 10*time.Second, "owner mirror", func() bool { return e.nodeData(path) == id })
	e.srv.ExpireSession(e.store.SessionID())
	waitfor.Until(t, 10*time.Second, "owner mirror back", func() bool {
		_, stat, err := e.store.Get(path)
		return err == nil && stat.EphemeralOwner == e.store.SessionID()
	})
	if !e.nodeExists("/consumers/g/ids/" + id) {
		t.Fatal("ids mirror not restored")
	}
}
