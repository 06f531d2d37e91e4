package group

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// env is a coordinator on an embedded store in a temporary directory.
type env struct {
	t     testing.TB
	dir   string
	srv   *embedded.Server
	store coord.Store
	cfg   Config
	c     *Coordinator
}

// testConfig accepts short sessions and has no initial rebalance delay, so
// single joins complete at once.
func testConfig() Config {
	return Config{
		MinSessionTimeout:     10 * time.Millisecond,
		MaxSessionTimeout:     time.Minute,
		InitialRebalanceDelay: -1,
	}
}

func newEnv(t testing.TB, cfg Config) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), cfg: cfg}
	e.open()
	t.Cleanup(e.shutdown)
	return e
}

func (e *env) open() {
	e.t.Helper()
	srv, err := embedded.Open(e.dir, testLogger())
	if err != nil {
		e.t.Fatalf("embedded.Open: %v", err)
	}
	store, err := srv.Session()
	if err != nil {
		e.t.Fatalf("Session: %v", err)
	}
	e.srv, e.store = srv, store
	e.c = New(store, e.cfg, testLogger())
}

func (e *env) shutdown() {
	if e.c != nil {
		e.c.Close()
		e.c = nil
	}
	if e.store != nil {
		e.store.Close()
		e.store = nil
	}
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
}

// restart replaces the coordinator with a new one on the same store.
func (e *env) restart() {
	e.c.Close()
	e.c = New(e.store, e.cfg, testLogger())
}

// reopen closes everything and opens the store again from disk.
func (e *env) reopen() {
	e.shutdown()
	e.open()
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func consumerAssignment(topic string, partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	t := kmsg.NewConsumerMemberAssignmentTopic()
	t.Topic, t.Partitions = topic, partitions
	a.Topics = append(a.Topics, t)
	return a.AppendTo(nil)
}

// joinReq is a consumer JoinGroup request.
func joinReq(version int16, group, memberID string, session time.Duration, topics ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = version
	r.Group = group
	r.MemberID = memberID
	r.SessionTimeoutMillis = int32(session / time.Millisecond)
	r.RebalanceTimeoutMillis = int32(session / time.Millisecond)
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMeta(topics...)
	r.Protocols = append(r.Protocols, p)
	return r
}

func clientCtx(id string) context.Context {
	return WithClient(context.Background(), ClientInfo{ID: id, Host: "/127.0.0.1"})
}

// asyncJoin runs a JoinGroup in the background.
func asyncJoin(c *Coordinator, ctx context.Context, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- c.JoinGroup(ctx, req) }()
	return ch
}

func asyncSync(c *Coordinator, ctx context.Context, req *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- c.SyncGroup(ctx, req) }()
	return ch
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a response")
		panic("unreachable")
	}
}

// joinMember does the full (two-step for v4+) join of a lone member and
// returns the final response.
func joinMember(t *testing.T, c *Coordinator, group, client string, session time.Duration, topics ...string) *kmsg.JoinGroupResponse {
	t.Helper()
	ctx := clientCtx(client)
	resp := c.JoinGroup(ctx, joinReq(9, group, "", session, topics...))
	if resp.ErrorCode != errMemberIDRequired {
		t.Fatalf("first join: error %d, want MEMBER_ID_REQUIRED", resp.ErrorCode)
	}
	resp = c.JoinGroup(ctx, joinReq(9, group, resp.MemberID, session, topics...))
	if resp.ErrorCode != errNone {
		t.Fatalf("second join: error %d", resp.ErrorCode)
	}
	return resp
}

func syncReq(group, memberID string, generation int32, assignments map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, memberID, generation
	pt, p := "consumer", "range"
	r.ProtocolType, r.Protocol = &pt, &p
	for id, a := range assignments {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return r
}

func heartbeat(c *Coordinator, group, memberID string, generation int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, memberID, generation
	return c.Heartbeat(context.Background(), r).ErrorCode
}

func commitReq(group, memberID string, generation int32, topic string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 9
	r.Group, r.MemberID, r.Generation = group, memberID, generation
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, 3
		meta := "m"
		rp.Metadata = &meta
		t.Partitions = append(t.Partitions, rp)
	}
	r.Topics = append(r.Topics, t)
	return r
}

func commitCodes(resp *kmsg.OffsetCommitResponse) []int16 {
	var out []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

// fetchOffset returns the committed offset of one partition (v5 request).
func fetchOffset(t *testing.T, c *Coordinator, group, topic string, partition int32) int64 {
	t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 5
	r.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	r.Topics = append(r.Topics, rt)
	resp := c.OffsetFetch(context.Background(), r)
	if resp.ErrorCode != errNone || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("OffsetFetch: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// nodeExists reports whether path exists in the store.
func (e *env) nodeExists(path string) bool {
	ok, _, err := e.store.Exists(path)
	if err != nil && !errors.Is(err, coord.ErrNoNode) {
		e.t.Fatalf("Exists(%s): %v", path, err)
	}
	return ok
}

func (e *env) nodeData(path string) string {
	data, _, err := e.store.Get(path)
	if err != nil {
		return ""
	}
	return string(data)
}
