package kafka

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch is fetchRequest (v12, no wait) carrying a session ID and
// epoch.
func sessionFetch(id, epoch int32, maxBytes int32, parts ...fetchPart) *kmsg.FetchRequest {
	req := fetchRequest(12, 0, 1, maxBytes, parts...)
	req.SessionID, req.SessionEpoch = id, epoch
	return req
}

// answered lists "topic/partition:records-bytes" for each partition of a
// response, in order.
func answered(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d:%d", t.Topic, p.Partition, len(p.RecordBatches)))
		}
	}
	return out
}

// TestFetchSessionLifecycle drives one session through Kafka's rules: a
// full fetch at epoch 0 opens it, incremental fetches answer only changed
// partitions from the offsets last sent, the epoch must match, forgotten
// partitions leave, and epoch -1 is a sessionless fetch that closes the
// session it names.
func TestFetchSessionLifecycle(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("fs", 3, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "fs", 0, 2, 10, -1)
	corr := int32(0)
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		corr++
		return c.roundTrip(req, corr).(*kmsg.FetchResponse)
	}
	all := []fetchPart{{"fs", 0, 0, 1 << 20}, {"fs", 1, 0, 1 << 20}, {"fs", 2, 0, 1 << 20}}

	resp := fetch(sessionFetch(0, 0, 1<<20, all...))
	sid := resp.SessionID
	if resp.ErrorCode != 0 || sid == 0 || sid == -1 {
		t.Fatalf("epoch 0: error %d, session %d", resp.ErrorCode, sid)
	}
	if got := answered(resp); len(got) != 3 || got[0] == "fs/0:0" || got[1] != "fs/1:0" || got[2] != "fs/2:0" {
		t.Fatalf("epoch 0 answered %v, want all three, records on 0", got)
	}
	batch := len(resp.Topics[0].Partitions[0].RecordBatches) / 2

	// Partition 0 now fetched from its end: nothing changed anywhere.
	if resp := fetch(sessionFetch(sid, 1, 1<<20, fetchPart{"fs", 0, 2, 1 << 20})); resp.ErrorCode != 0 || resp.SessionID != sid || len(resp.Topics) != 0 {
		t.Fatalf("epoch 1: error %d, session %d, answered %v; want nothing", resp.ErrorCode, resp.SessionID, answered(resp))
	}
	// An append to partition 1 is answered from its cached offset 0.
	fillPartition(t, c, "fs", 1, 1, 10, -1)
	if got := answered(fetch(sessionFetch(sid, 2, 1<<20))); !slices.Equal(got, []string{fmt.Sprintf("fs/1:%d", batch)}) {
		t.Fatalf("epoch 2 answered %v, want partition 1's batch", got)
	}
	// A repeated epoch is refused; the session expects 3.
	if resp := fetch(sessionFetch(sid, 2, 1<<20)); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("epoch 2 again: error %d, %v", resp.ErrorCode, answered(resp))
	}
	// Partition 1 forgotten: its appends are no longer answered,
	// partition 2's are (high watermark and records).
	req := sessionFetch(sid, 3, 1<<20)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "fs", []int32{1}
	req.ForgottenTopics = append(req.ForgottenTopics, ft)
	fillPartition(t, c, "fs", 1, 1, 10, -1)
	fillPartition(t, c, "fs", 2, 1, 10, -1)
	if got := answered(fetch(req)); !slices.Equal(got, []string{fmt.Sprintf("fs/2:%d", batch)}) {
		t.Fatalf("epoch 3 answered %v, want partition 2 only", got)
	}
	// Partition 1 named again rejoins the session, last, with its new
	// offset.
	if got := answered(fetch(sessionFetch(sid, 4, 1<<20, fetchPart{"fs", 1, 1, 1 << 20}))); !slices.Equal(got, []string{fmt.Sprintf("fs/2:%d", batch), fmt.Sprintf("fs/1:%d", batch)}) {
		t.Fatalf("epoch 4 answered %v, want partition 1 from offset 1 and partition 2 still from 0", got)
	}
	if resp := fetch(sessionFetch(sid+1, 1, 1<<20)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d", resp.ErrorCode)
	}

	// Epoch -1 naming the session: served sessionless, session closed.
	resp = fetch(sessionFetch(sid, -1, 1<<20, fetchPart{"fs", 2, 0, 1 << 20}))
	if resp.ErrorCode != 0 || resp.SessionID != 0 || !slices.Equal(answered(resp), []string{fmt.Sprintf("fs/2:%d", batch)}) {
		t.Fatalf("epoch -1: error %d, session %d, answered %v", resp.ErrorCode, resp.SessionID, answered(resp))
	}
	if resp := fetch(sessionFetch(sid, 5, 1<<20)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d", resp.ErrorCode)
	}
	// kafka-go's Client.Fetch: session ID -1, epoch -1.
	resp = fetch(sessionFetch(-1, -1, 1<<20, fetchPart{"fs", 0, 0, 1 << 20}))
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(answered(resp)) != 1 || answered(resp)[0] == "fs/0:0" {
		t.Fatalf("ID -1 epoch -1: error %d, session %d, answered %v", resp.ErrorCode, resp.SessionID, answered(resp))
	}
	// A session emptied by forgetting everything closes; the request is
	// answered sessionless.
	sid = fetch(sessionFetch(0, 0, 1<<20, fetchPart{"fs", 0, 2, 1 << 20})).SessionID
	req = sessionFetch(sid, 1, 1<<20)
	ft.Partitions = []int32{0}
	req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{ft}
	if resp := fetch(req); resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("emptied session: error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
	if resp := fetch(sessionFetch(sid, 2, 1<<20)); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("emptied session afterwards: error %d", resp.ErrorCode)
	}
}

// TestFetchSessionFairness: a partition that returned records goes to the
// end of its session's order, so a byte budget that fits one batch serves
// the partitions in turn.
func TestFetchSessionFairness(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("fair", 2, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "fair", 0, 3, 10, -1)
	fillPartition(t, c, "fair", 1, 3, 10, -1)
	resp := c.roundTrip(sessionFetch(0, 0, 1<<20, fetchPart{"fair", 0, 3, 1 << 20}, fetchPart{"fair", 1, 3, 1 << 20}), 1).(*kmsg.FetchResponse)
	sid := resp.SessionID
	if sid == 0 {
		t.Fatal("no session")
	}
	// max_bytes 1: only the first partition read returns its first batch.
	want := []int32{0, 1, 0, 1}
	offsets := []int64{0, 0}
	for i, w := range want {
		var parts []fetchPart
		if i == 0 {
			parts = []fetchPart{{"fair", 0, 0, 1 << 20}, {"fair", 1, 0, 1 << 20}}
		} else {
			p := want[i-1]
			parts = []fetchPart{{"fair", p, offsets[p], 1 << 20}}
		}
		resp := c.roundTrip(sessionFetch(sid, int32(i+1), 1, parts...), int32(i+2)).(*kmsg.FetchResponse)
		var got []int32
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if len(p.RecordBatches) > 0 {
					got = append(got, p.Partition)
				}
			}
		}
		if resp.ErrorCode != 0 || !slices.Equal(got, []int32{w}) {
			t.Fatalf("fetch %d: error %d, records from %v, want from [%d]", i, resp.ErrorCode, got, w)
		}
		offsets[w]++
	}
}

// TestFetchSessionTopicIDs: a session opened with topic IDs (v13+) takes
// incremental fetches by ID, and one by name gets
// FETCH_SESSION_TOPIC_ID_ERROR.
func TestFetchSessionTopicIDs(t *testing.T) {
	tb := startBroker(t)
	topic := tb.createTopic("fsid", 1, nil)
	c := dial(t, tb.addr)
	req := fetchRequest(13, 0, 1, 1<<20, fetchPart{"", 0, 0, 1 << 20})
	req.Topics[0].TopicID = topic.ID
	req.SessionEpoch = 0
	sid := c.roundTrip(req, 1).(*kmsg.FetchResponse).SessionID
	if sid == 0 {
		t.Fatal("no session")
	}
	fillPartition(t, c, "fsid", 0, 1, 10, -1)
	inc := fetchRequest(13, 0, 1, 1<<20)
	inc.SessionID, inc.SessionEpoch = sid, 1
	resp := c.roundTrip(inc, 2).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].TopicID != topic.ID || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("incremental by ID: error %d, %+v", resp.ErrorCode, resp.Topics)
	}
	if resp := c.roundTrip(sessionFetch(sid, 2, 1<<20), 3).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("incremental by name: error %d", resp.ErrorCode)
	}
}

// TestFetchSessionsOff: with max.incremental.fetch.session.cache.slots 0
// an epoch-0 fetch is answered without a session.
func TestFetchSessionsOff(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.FetchSessionCacheSlots = 0 }))
	tb.createTopic("off", 1, nil)
	c := dial(t, tb.addr)
	if resp := c.roundTrip(sessionFetch(0, 0, 1<<20, fetchPart{"off", 0, 0, 1 << 20}), 1).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 {
		t.Fatalf("error %d, session %d, answered %v", resp.ErrorCode, resp.SessionID, answered(resp))
	}
}

// TestFetchSessionEviction follows Kafka's eviction rules on a cache of
// two slots.
func TestFetchSessionEviction(t *testing.T) {
	const age = time.Minute
	// newSession asks for a session of size partitions, by a follower or
	// a consumer; it returns the session ID, 0 for none.
	newSession := func(c *fetchSessionCache, follower bool, size int) int32 {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID = -1
		if follower {
			req.ReplicaID = 1
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		for p := range size {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return c.create(req, req.ResponseKind().(*kmsg.FetchResponse), fetchSessionOwner{conn: rand.Uint64(), principal: "User:test"}, everyTopic)
	}
	type session struct {
		follower bool
		size     int
		created  time.Duration // before now
		used     time.Duration // before now
	}
	cases := []struct {
		name     string
		cache    []session
		follower bool
		size     int
		evicted  int // index into cache, -1 for none, -2 for no session at all
	}{
		{"young sessions are kept from a larger consumer", []session{{false, 5, 0, 0}, {false, 6, 0, 0}}, false, 10, -2},
		{"an unused session is evicted by any", []session{{false, 50, 2 * age, 2 * age}, {false, 5, 0, 0}}, false, 1, 0},
		{"an old session is evicted by a larger consumer", []session{{false, 5, 2 * age, 0}, {false, 4, 0, 0}}, false, 6, 0},
		{"the smallest old session goes first", []session{{false, 5, 2 * age, 0}, {false, 4, 2 * age, 0}}, false, 6, 1},
		{"not by one of equal size", []session{{false, 5, 2 * age, 0}, {false, 5, 2 * age, 0}}, false, 5, -2},
		{"a follower evicts a young consumer", []session{{true, 5, 0, 0}, {false, 50, 0, 0}}, true, 1, 1},
		{"a follower does not evict a young follower", []session{{true, 5, 0, 0}, {true, 5, 0, 0}}, true, 10, -2},
		{"a consumer does not evict an old follower", []session{{true, 5, 2 * age, 0}, {true, 5, 2 * age, 0}}, false, 10, -2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000000, 0)
			c := newFetchSessionCache(testSessionLimits(2, age, 100))
			c.now = func() time.Time { return now }
			var ids []int32
			for _, s := range tc.cache {
				c.now = func() time.Time { return now.Add(-s.created) }
				id := newSession(c, s.follower, s.size)
				if id == 0 {
					t.Fatal("no session while the cache had room")
				}
				c.sessions[id].lastUsed.Store(now.Add(-s.used).UnixNano())
				ids = append(ids, id)
			}
			c.now = func() time.Time { return now }
			id := newSession(c, tc.follower, tc.size)
			if (id == 0) != (tc.evicted == -2) {
				t.Fatalf("new session %d, want one: %v", id, tc.evicted != -2)
			}
			for i, old := range ids {
				if _, kept := c.sessions[old]; kept == (i == tc.evicted) {
					t.Errorf("session %d kept: %v", i, kept)
				}
			}
		})
	}
	c := newFetchSessionCache(testSessionLimits(0, age, 100))
	if id := newSession(c, true, 1); id != 0 {
		t.Fatalf("a cache of no slots made session %d", id)
	}
	c = newFetchSessionCache(testSessionLimits(2, age, 3))
	if id := newSession(c, false, 4); id != 0 {
		t.Fatalf("a session of 4 partitions over a limit of 3: %d", id)
	}
}

// TestFetchSessionConcurrentFetches: a long-polling incremental fetch and
// the next epoch's fetch on another connection are both served from the
// session; the session keeps working afterwards.
func TestFetchSessionConcurrentFetches(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("race", 1, nil)
	a, b := dial(t, tb.addr), dial(t, tb.addr)
	sid := a.roundTrip(sessionFetch(0, 0, 1<<20, fetchPart{"race", 0, 0, 1 << 20}), 1).(*kmsg.FetchResponse).SessionID
	if sid == 0 {
		t.Fatal("no session")
	}
	waiting := sessionFetch(sid, 1, 1<<20)
	waiting.MaxWaitMillis = 10000
	a.send(frame(waiting, 2))
	// Epoch 2 is accepted once the waiting fetch has begun.
	for corr := int32(100); ; corr++ {
		resp := b.roundTrip(sessionFetch(sid, 2, 1<<20), corr).(*kmsg.FetchResponse)
		if resp.ErrorCode == 0 {
			if resp.SessionID != sid || len(resp.Topics) != 0 {
				t.Fatalf("epoch 2: session %d, answered %v", resp.SessionID, answered(resp))
			}
			break
		}
		if resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || corr > 10000 {
			t.Fatalf("epoch 2: error %d", resp.ErrorCode)
		}
	}
	fillPartition(t, b, "race", 0, 1, 10, -1)
	if resp := a.readResponse(waiting, 2).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != sid || len(answered(resp)) != 1 || answered(resp)[0] == "race/0:0" {
		t.Fatalf("epoch 1 woken: error %d, session %d, answered %v", resp.ErrorCode, resp.SessionID, answered(resp))
	}
	if resp := b.roundTrip(sessionFetch(sid, 3, 1<<20, fetchPart{"race", 0, 1, 1 << 20}), 3).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != sid {
		t.Fatalf("epoch 3: error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
}

// testSessionLimits are limits of slots sessions of at most maxSize
// partitions, unused sessions evictable after age, and no other bound.
func testSessionLimits(slots int, age time.Duration, maxSize int) fetchSessionLimits {
	return fetchSessionLimits{slots: slots, evictionAge: age, maxSize: func() int { return maxSize },
		perConnection: 1 << 30, perPrincipal: 1 << 30, maxBytes: 1 << 62}
}

// everyTopic is a fetchTopicState in which every topic exists with one
// partition and may be read.
func everyTopic(sessionKey) int32 { return 1 }
