package kafka

import (
	"fmt"
	"runtime"
	"testing"
	"time"

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
