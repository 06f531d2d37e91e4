package group

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wire encodes req at its version and decodes it again, as the wire server
// will, so the coordinator sees only what the version carries.
func wire[R kmsg.Request](t *testing.T, req R) R {
	t.Helper()
	fresh := kmsg.RequestForKey(req.Key()).(R)
	fresh.SetVersion(req.GetVersion())
	if err := fresh.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("key %d v%d request: %v", req.Key(), req.GetVersion(), err)
	}
	return fresh
}

// checkResponse asserts the response has the request's version and survives
// an encode/decode/encode round trip byte for byte.
func checkResponse(t *testing.T, req kmsg.Request, resp kmsg.Response) int16 {
	t.Helper()
	if resp.GetVersion() != req.GetVersion() {
		t.Fatalf("key %d: response version %d for request version %d", req.Key(), resp.GetVersion(), req.GetVersion())
	}
	b := resp.AppendTo(nil)
	fresh := kmsg.ResponseForKey(resp.Key())
	fresh.SetVersion(resp.GetVersion())
	if err := fresh.ReadFrom(b); err != nil {
		t.Fatalf("key %d v%d: decoding response: %v", resp.Key(), resp.GetVersion(), err)
	}
	if again := fresh.AppendTo(nil); !bytes.Equal(again, b) {
		t.Fatalf("key %d v%d: response does not round-trip", resp.Key(), resp.GetVersion())
	}
	return topCode(resp)
}

// topCode extracts the first error code of a response (0 when none).
func topCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	case *kmsg.SyncGroupResponse:
		return r.ErrorCode
	case *kmsg.HeartbeatResponse:
		return r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		if r.ErrorCode == errNone && len(r.Members) > 0 {
			return r.Members[0].ErrorCode
		}
		return r.ErrorCode
	case *kmsg.OffsetCommitResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.OffsetFetchResponse:
		if len(r.Groups) > 0 {
			return r.Groups[0].ErrorCode
		}
		return r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.DescribeGroupsResponse:
		return r.Groups[0].ErrorCode
	case *kmsg.ListGroupsResponse:
		return r.ErrorCode
	case *kmsg.DeleteGroupsResponse:
		return r.Groups[0].ErrorCode
	case *kmsg.OffsetDeleteResponse:
		return r.ErrorCode
	case *kmsg.TxnOffsetCommitResponse:
		return r.Topics[0].Partitions[0].ErrorCode
	}
	return errUnknownServerError
}

// TestVersionsServeAndEncode drives every served version of every API
// through the wire codec and checks that the version above the served range
// is refused with UNSUPPORTED_VERSION.
func TestVersionsServeAndEncode(t *testing.T) {
	for _, api := range Versions() {
		for version := api.Min; version <= api.Max+1; version++ {
			if version > kmsg.RequestForKey(api.Key).MaxVersion() {
				continue
			}
			e := newEnv(t, testConfig())
			req, resp := exercise(t, e, api.Key, version)
			code := checkResponse(t, req, resp)
			if version > api.Max {
				if code != errUnsupportedVersion {
					t.Fatalf("key %d v%d beyond the served range answered %d", api.Key, version, code)
				}
			} else if code != errNone {
				t.Fatalf("key %d v%d answered error %d", api.Key, version, code)
			}
			e.shutdown()
		}
	}
}

// exercise sets up a Stable group "g" with committed offsets and sends one
// request of the API at the version, returning request and response.
func exercise(t *testing.T, e *env, key, version int16) (kmsg.Request, kmsg.Response) {
	t.Helper()
	ctx := clientCtx("cli")
	id := stableGroup(t, e, "g", 10*time.Second)
	e.c.OffsetCommit(ctx, commitReq("g", id, 1, "t", map[int32]int64{0: 42}))
	e.c.OffsetCommit(ctx, commitReq("idle", "", -1, "t", map[int32]int64{0: 1}))
	str := func(s string) *string { return &s }
	switch key {
	case keyJoinGroup:
		// A new group, so the leader's full response (with members) is seen.
		req := joinReq(version, "j", "", 10*time.Second, "t")
		req.Reason = str("test")
		resp := e.c.JoinGroup(ctx, wire(t, req))
		if version >= 4 && version <= 9 {
			req.MemberID = resp.MemberID
			resp = e.c.JoinGroup(ctx, wire(t, req))
		}
		if version <= 9 && (len(resp.Members) != 1 || resp.Generation != 1) {
			t.Fatalf("v%d join: %+v", version, resp)
		}
		return req, resp
	case keySyncGroup:
		req := syncReq("g", id, 1, nil)
		req.Version = version
		return req, e.c.SyncGroup(ctx, wire(t, req))
	case keyHeartbeat:
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.Generation = version, "g", id, 1
		return req, e.c.Heartbeat(ctx, wire(t, req))
	case keyLeaveGroup:
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.MemberID = version, "g", id
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: id, Reason: str("bye")}}
		return req, e.c.LeaveGroup(ctx, wire(t, req))
	case keyOffsetCommit:
		req := commitReq("g", id, 1, "t", map[int32]int64{1: 7})
		req.Version = version
		if version == 0 {
			req.Group = "idle" // v0 commits are simple commits
		}
		return req, e.c.OffsetCommit(ctx, wire(t, req))
	case keyOffsetFetch:
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = version, "g"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 5}}}
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 5}}}}}
		resp := e.c.OffsetFetch(ctx, wire(t, req))
		if version <= 9 {
			var ps []int64
			if version >= 8 {
				for _, p := range resp.Groups[0].Topics[0].Partitions {
					ps = append(ps, p.Offset)
				}
			} else {
				for _, p := range resp.Topics[0].Partitions {
					ps = append(ps, p.Offset)
				}
			}
			if len(ps) != 2 || ps[0] != 42 || ps[1] != -1 {
				t.Fatalf("v%d fetch offsets %v, want [42 -1]", version, ps)
			}
		}
		return req, resp
	case keyDescribeGroups:
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = version, []string{"g"}
		resp := e.c.DescribeGroups(ctx, wire(t, req))
		if version <= 6 && (len(resp.Groups) != 1 || resp.Groups[0].State != "Stable" || len(resp.Groups[0].Members) != 1) {
			t.Fatalf("v%d describe: %+v", version, resp)
		}
		return req, resp
	case keyListGroups:
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.StatesFilter, req.TypesFilter = version, []string{"Stable"}, []string{"classic"}
		resp := e.c.ListGroups(ctx, wire(t, req))
		want := 2 // g and idle: older versions have no filter
		if version >= 4 {
			want = 1
		}
		if version <= 5 && len(resp.Groups) != want {
			t.Fatalf("v%d list: %+v", version, resp.Groups)
		}
		return req, resp
	case keyDeleteGroups:
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = version, []string{"idle"}
		return req, e.c.DeleteGroups(ctx, wire(t, req))
	case keyTxnOffsetCommit:
		req := txnCommitReq(version, "g", 1, 0, id, 1, "t", map[int32]int64{1: 7})
		resp := e.c.TxnOffsetCommit(ctx, wire(t, req))
		if version <= 3 && resp.Topics[0].Partitions[0].ErrorCode == errNone {
			if _, code := stableFetch(t, e.c, "g", "t", 1); code != errUnstableOffsetCommit {
				t.Fatalf("v%d txn commit: stable fetch answered %d", version, code)
			}
		}
		return req, resp
	case keyOffsetDelete:
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Version, req.Group = version, "idle"
		req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return req, e.c.OffsetDelete(ctx, wire(t, req))
	}
	t.Fatalf("no exercise for key %d", key)
	return nil, nil
}

func TestVersionsTable(t *testing.T) {
	seen := make(map[int16]bool)
	for _, v := range Versions() {
		if seen[v.Key] {
			t.Fatalf("key %d listed twice", v.Key)
		}
		seen[v.Key] = true
		if v.Min > v.Max || v.Max > kmsg.RequestForKey(v.Key).MaxVersion() {
			t.Fatalf("key %d: range %d-%d not within kmsg's 0-%d", v.Key, v.Min, v.Max, kmsg.RequestForKey(v.Key).MaxVersion())
		}
	}
	for _, key := range []int16{keyOffsetCommit, keyOffsetFetch, keyJoinGroup, keyHeartbeat, keyLeaveGroup, keySyncGroup, keyDescribeGroups, keyListGroups, keyDeleteGroups, keyOffsetDelete, keyTxnOffsetCommit} {
		if !seen[key] {
			t.Fatalf("key %d missing from Versions", key)
		}
	}
	vs := Versions()
	vs[0].Max = 99
	if Versions()[0].Max == 99 {
		t.Fatal("Versions returned the package's own slice")
	}
}
