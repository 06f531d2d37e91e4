package kafka

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionRequest is a v12 consumer fetch at epoch 0 of partitions
// 0..n-1 of topic, and its response, answered without errors.
func sessionRequest(topic string, n int) (*kmsg.FetchRequest, *kmsg.FetchResponse) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	st := kmsg.NewFetchResponseTopic()
	st.Topic = topic
	for p := range n {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = int32(p), 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition = int32(p)
		st.Partitions = append(st.Partitions, sp)
	}
	req.Topics = append(req.Topics, rt)
	resp.Topics = append(resp.Topics, st)
	return req, resp
}

// TestFetchSessionCostAccounting measures the heap sessions hold and
// checks that what the cache counts them as (the byte budget) is never
// less, and not far more, for sessions of many partitions of one topic
// and of many topics: each has served an incremental fetch, so it holds
// its reused request and snapshot too.
func TestFetchSessionCostAccounting(t *testing.T) {
	const sessions = 40
	for _, shape := range []struct {
		name             string
		topics, perTopic int
		topicNameBytes   int
	}{
		{"1000 partitions of a topic with a 200-byte name", 1, 1000, 200},
		{"1000 topics of one partition with 50-byte names", 1000, 1, 50},
	} {
		t.Run(shape.name, func(t *testing.T) {
			req, resp := sessionRequest(fmt.Sprintf("%0*d", shape.topicNameBytes, 0), shape.perTopic)
			for i := 1; i < shape.topics; i++ {
				more, answered := sessionRequest(fmt.Sprintf("%0*d", shape.topicNameBytes, i), shape.perTopic)
				req.Topics = append(req.Topics, more.Topics...)
				resp.Topics = append(resp.Topics, answered.Topics...)
			}
			partitions := shape.topics * shape.perTopic
			incremental := kmsg.NewPtrFetchRequest()
			incremental.SetVersion(12)
			incremental.ReplicaID = -1

			c := newFetchSessionCache(testSessionLimits(1<<20, time.Hour, 1<<20))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range sessions {
				owner := fetchSessionOwner{conn: uint64(i + 1), principal: "User:test"}
				id := c.create(req, resp, owner, everyTopic)
				if id == 0 {
					t.Fatal("no session")
				}
				incremental.SessionID, incremental.SessionEpoch = id, 1
				if fc := c.begin(incremental, owner, everyTopic); fc.session == nil {
					t.Fatal("the incremental fetch was not served from the session")
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			c.mu.Lock()
			counted := c.bytes
			c.mu.Unlock()
			t.Logf("%d sessions of %d partitions hold %d bytes (%.0f a partition); the cache counts %d (%.0f)",
				sessions, partitions, held, float64(held)/float64(sessions*partitions), counted, float64(counted)/float64(sessions*partitions))
			if counted < held {
				t.Errorf("the cache counts %d bytes for sessions holding %d: its per-partition or per-topic cost is too small", counted, held)
			}
			if counted > held*3/2 {
				t.Errorf("the cache counts %d bytes for sessions holding %d: more than half again", counted, held)
			}
			runtime.KeepAlive(c)
		})
	}
}

// TestFetchSessionUncachedPartitions: partitions answered
// UNKNOWN_TOPIC_OR_PARTITION are answered but not cached, a fetch of
// nothing else gets no session, and once a topic left out appears or
// grows the session closes, so the client names its partitions again.
func TestFetchSessionUncachedPartitions(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("known", 2, nil)
	c := dial(t, tb.addr)
	corr := int32(0)
	fetch := func(req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		corr++
		return c.roundTrip(req, corr).(*kmsg.FetchResponse)
	}
	cached := func() (sessions, partitions int) { return tb.broker.fetchSessions.stats() }
	errorsIn := func(resp *kmsg.FetchResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
			}
		}
		return out
	}
	parts := func(topic string, from, to int32) []fetchPart {
		var out []fetchPart
		for p := from; p < to; p++ {
			out = append(out, fetchPart{topic, p, 0, 1 << 20})
		}
		return out
	}

	// The hostile client's fetch: 1,000 partitions of a topic that does
	// not exist, each answered with its error, none cached.
	resp := fetch(sessionFetch(0, 0, 1<<20, parts("nowhere", 0, 1000)...))
	if errs := errorsIn(resp); resp.SessionID != 0 || len(errs) != 1000 || errs["nowhere/999"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("epoch 0 of 1000 unknown partitions: session %d, %d partitions answered", resp.SessionID, len(errs))
	}
	if s, p := cached(); s != 0 || p != 0 {
		t.Fatalf("cached %d sessions of %d partitions after fetching unknown partitions", s, p)
	}

	// A session of the partitions that exist only.
	resp = fetch(sessionFetch(0, 0, 1<<20, append(parts("known", 0, 3), parts("later", 0, 1)...)...))
	sid := resp.SessionID
	if errs := errorsIn(resp); sid == 0 || errs["known/0"] != 0 || errs["known/2"] != kerr.UnknownTopicOrPartition.Code || errs["later/0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("mixed epoch 0: session %d, errors %v", sid, errs)
	}
	if s, p := cached(); s != 1 || p != 2 {
		t.Fatalf("cached %d sessions of %d partitions, want 1 of 2", s, p)
	}
	// Added incrementally: answered, not cached.
	resp = fetch(sessionFetch(sid, 1, 1<<20, parts("elsewhere", 0, 100)...))
	if errs := errorsIn(resp); resp.SessionID != sid || len(errs) != 100 || errs["elsewhere/0"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("epoch 1: session %d, errors %v", resp.SessionID, errs)
	}
	if s, p := cached(); s != 1 || p != 2 {
		t.Fatalf("after epoch 1 cached %d sessions of %d partitions, want 1 of 2", s, p)
	}
	if resp := fetch(sessionFetch(sid, 2, 1<<20)); resp.ErrorCode != 0 || resp.SessionID != sid || len(resp.Topics) != 0 {
		t.Fatalf("epoch 2: error %d, session %d, answered %v", resp.ErrorCode, resp.SessionID, answered(resp))
	}
	// "later" appears: the session closes.
	tb.createTopic("later", 1, nil)
	if resp := fetch(sessionFetch(sid, 3, 1<<20)); resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("epoch 3 after a topic left out appeared: error %d, session %d; want the session closed", resp.ErrorCode, resp.SessionID)
	}
	// "known" grows to 3 partitions: a session that left out known/2
	// closes too.
	sid = fetch(sessionFetch(0, 0, 1<<20, parts("known", 0, 3)...)).SessionID
	if _, err := tb.cluster.CreatePartitions("known", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if resp := fetch(sessionFetch(sid, 1, 1<<20)); resp.SessionID != 0 {
		t.Fatalf("after known grew: session %d, want the session closed", resp.SessionID)
	}
	// More than maxExcludedTopics topics left out: no session.
	var many []fetchPart
	for i := range maxExcludedTopics + 1 {
		many = append(many, fetchPart{fmt.Sprintf("gone-%d", i), 0, 0, 1 << 20})
	}
	if resp := fetch(sessionFetch(0, 0, 1<<20, append(parts("known", 0, 1), many...)...)); resp.SessionID != 0 {
		t.Fatalf("a fetch leaving out %d topics got session %d", len(many), resp.SessionID)
	}
}

// TestFetchSessionBounds: the bounds per connection, per principal and in
// bytes, each applied with Kafka's eviction rules.
func TestFetchSessionBounds(t *testing.T) {
	const age = time.Minute
	now := time.Unix(1000000, 0)
	req, resp := sessionRequest("t", 10)
	sessionCost := int64(fetchSessionBytes + 10*fetchSessionPartitionBytes + fetchSessionTopicBytes + len("t"))
	newCache := func(change func(*fetchSessionLimits)) *fetchSessionCache {
		limits := testSessionLimits(100, age, 100)
		change(&limits)
		c := newFetchSessionCache(limits)
		c.now = func() time.Time { return now }
		return c
	}
	open := func(c *fetchSessionCache, conn uint64, principal string) int32 {
		return c.create(req, resp, fetchSessionOwner{conn: conn, principal: principal}, everyTopic)
	}
	stale := func(c *fetchSessionCache, id int32) { c.sessions[id].lastUsed.Store(now.Add(-2 * age).UnixNano()) }

	t.Run("per connection: the connection's least recently used goes", func(t *testing.T) {
		c := newCache(func(l *fetchSessionLimits) { l.perConnection = 2 })
		first, second := open(c, 1, "User:a"), open(c, 1, "User:a")
		c.sessions[first].lastUsed.Store(now.Add(-time.Second).UnixNano())
		other := open(c, 2, "User:a")
		third := open(c, 1, "User:a")
		if third == 0 || c.sessions[first] != nil || c.sessions[second] == nil || c.sessions[other] == nil || len(c.sessions) != 3 {
			t.Fatalf("sessions %v: want the first replaced by the third", c.sessions)
		}
		if c.evictions.Load() != 1 || c.byConn[1] != 2 {
			t.Fatalf("evictions %d, connection 1 holds %d", c.evictions.Load(), c.byConn[1])
		}
	})
	t.Run("per principal: only Kafka's evictions among its own", func(t *testing.T) {
		c := newCache(func(l *fetchSessionLimits) { l.perPrincipal = 2 })
		a1, a2 := open(c, 1, "User:a"), open(c, 2, "User:a")
		if id := open(c, 3, "User:a"); id != 0 {
			t.Fatal("a third young session of User:a")
		}
		if id := open(c, 4, "User:b"); id == 0 {
			t.Fatal("User:b got no session while User:a is at its bound")
		}
		stale(c, a1)
		if id := open(c, 3, "User:a"); id == 0 || c.sessions[a1] != nil || c.sessions[a2] == nil {
			t.Fatal("User:a's stale session did not make room for its new one")
		}
	})
	t.Run("bytes: a new session evicts as Kafka allows or gets none", func(t *testing.T) {
		c := newCache(func(l *fetchSessionLimits) { l.maxBytes = 2*sessionCost + sessionCost/2 })
		first, second := open(c, 1, "User:a"), open(c, 2, "User:b")
		if first == 0 || second == 0 {
			t.Fatal("no room for two sessions")
		}
		if id := open(c, 3, "User:c"); id != 0 {
			t.Fatal("a third session over the byte budget")
		}
		stale(c, second)
		if id := open(c, 3, "User:c"); id == 0 || c.sessions[second] != nil {
			t.Fatal("a stale session did not make room")
		}
		if c.bytes != 2*sessionCost {
			t.Fatalf("the cache counts %d bytes, want %d", c.bytes, 2*sessionCost)
		}
	})
	t.Run("bytes: a session growing past the budget closes", func(t *testing.T) {
		c := newCache(func(l *fetchSessionLimits) { l.maxBytes = 2*sessionCost + sessionCost/2 })
		owner := fetchSessionOwner{conn: 1, principal: "User:a"}
		grows := c.create(req, resp, owner, everyTopic)
		other := open(c, 2, "User:b")
		more, _ := sessionRequest("u", 10)
		more.SessionID, more.SessionEpoch = grows, 1
		fc := c.begin(more, owner, everyTopic)
		if fc.session == nil {
			t.Fatal("the incremental fetch was not served from the session")
		}
		if c.answered(fc.session, nil, fc.scratch, everyTopic) || c.sessions[grows] != nil || c.sessions[other] == nil {
			t.Fatal("a session grown past the budget was kept, or a young one evicted for it")
		}
		if c.bytes != sessionCost {
			t.Fatalf("the cache counts %d bytes, want %d", c.bytes, sessionCost)
		}
	})
	t.Run("a session larger than the whole budget", func(t *testing.T) {
		c := newCache(func(l *fetchSessionLimits) { l.maxBytes = sessionCost - 1 })
		if id := open(c, 1, "User:a"); id != 0 || c.bytes != 0 {
			t.Fatalf("session %d, %d bytes counted", id, c.bytes)
		}
	})
}
