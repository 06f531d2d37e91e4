package kafka

import (
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/broker/tier"
)

// TestReplicaFetchBelowTieredLocalStart: a replica fetching a tiered
// partition below the leader's local log start and at or above the remote
// log start gets OFFSET_MOVED_TO_TIERED_STORAGE with the local log start
// (KIP-405's follower fetch); below the remote start, or on a partition
// that is not tiered, the answer stays OFFSET_OUT_OF_RANGE (Kafka's
// ReplicaManager raises OffsetMovedToTieredStorageException only for an
// offset between the log start and the local log start); a consumer is
// never told 109, and a replica at the local start reads as before.
func TestReplicaFetchBelowTieredLocalStart(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, withClusterConfig(func(c *cluster.Config) { c.RemoteStorageSystemEnabled = true }))
	tiered := tb.createTopic("tiered", 1, map[string]string{"remote.storage.enable": "true"})
	tb.createTopic("plain", 1, nil)
	for _, topic := range []string{"tiered", "plain"} {
		l := tb.partitionLog(topic, 0)
		for i := range 4 {
			if _, err := l.Append(makeBatch(t, plainBatch("v")), 0); err != nil {
				t.Fatal(err)
			}
			if i == 2 {
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := l.AdvanceStartOffset(3); err != nil { // local retention kept [3, 4)
			t.Fatal(err)
		}
	}
	// Remote: [1, 2]; [0] expired by total retention.
	st := tier.State{TopicID: tier.EncodeTopicID(tiered.ID), LogStartOffset: 1, Segments: []tier.Segment{{BaseOffset: 1, LastOffset: 2, Key: "k"}}}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	path := tier.StatePath("tiered", 0)
	if err := coord.EnsurePath(tb.store, coord.ParentPath(path)); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.store.Create(path, data, coord.Persistent); err != nil {
		t.Fatal(err)
	}

	c := dial(t, tb.addr)
	for i, tc := range []struct {
		topic     string
		offset    int64
		replica   int32
		code      int16
		logStart  int64
		hasRecord bool
	}{
		{"tiered", 2, 1, kerr.OffsetMovedToTieredStorage.Code, 3, false},
		{"tiered", 1, 1, kerr.OffsetMovedToTieredStorage.Code, 3, false},
		{"tiered", 0, 1, kerr.OffsetOutOfRange.Code, 3, false},
		{"plain", 2, 1, kerr.OffsetOutOfRange.Code, 3, false},
		{"tiered", 3, 1, 0, 3, true},
	} {
		req := fetchRequest(11, 0, 0, 1<<20, fetchPart{topic: tc.topic, offset: tc.offset, maxBytes: 1 << 20})
		req.ReplicaID = tc.replica
		sp := c.roundTrip(req, int32(i+1)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != tc.code || sp.LogStartOffset != tc.logStart || (len(sp.RecordBatches) > 0) != tc.hasRecord {
			t.Errorf("replica %d fetching %s at %d: error %d, log start %d, %d record bytes; want error %d, log start %d, records %v",
				tc.replica, tc.topic, tc.offset, sp.ErrorCode, sp.LogStartOffset, len(sp.RecordBatches), tc.code, tc.logStart, tc.hasRecord)
		}
	}
	req := fetchRequest(11, 0, 0, 1<<20, fetchPart{topic: "tiered", offset: 2, maxBytes: 1 << 20})
	req.ReplicaID = -1
	if sp := c.roundTrip(req, 99).(*kmsg.FetchResponse).Topics[0].Partitions[0]; sp.ErrorCode == kerr.OffsetMovedToTieredStorage.Code {
		t.Error("a consumer was told OFFSET_MOVED_TO_TIERED_STORAGE; only replicas are")
	}
}
