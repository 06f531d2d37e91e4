package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/group"
)

// TestTxnOffsetCommitAuthorization: Write on the transactional ID, then
// Read on the group, then Read on each topic, as Kafka checks them; the
// accepted offsets stay pending (UNSTABLE_OFFSET_COMMIT with require_stable).
func TestTxnOffsetCommitAuthorization(t *testing.T) {
	tb := startBroker(t, withAuthorizer(""))
	grant(t, tb, clusterACL(acl.Create), topicACL("a", acl.Read), topicACL("a", acl.Describe))
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "a", "b"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, tb.addr)
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.Version, commit.TransactionalID, commit.Group = 3, "tx", "g"
	commit.ProducerID, commit.Generation = 1000, -1
	for _, topic := range []string{"a", "b"} {
		commit.Topics = append(commit.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: topic,
			Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}})
	}
	codes := func(id int32) map[string]int16 {
		t.Helper()
		resp := c.roundTrip(commit, id).(*kmsg.TxnOffsetCommitResponse)
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		if len(out) != 2 {
			t.Fatalf("response topics %+v, want a and b", resp.Topics)
		}
		return out
	}
	want := func(got map[string]int16, a, b int16) {
		t.Helper()
		if got["a"] != a || got["b"] != b {
			t.Fatalf("codes %v, want a %d and b %d", got, a, b)
		}
	}
	want(codes(1), kerr.TransactionalIDAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code)
	grant(t, tb, acl.Binding{Pattern: acl.Pattern{Type: acl.TransactionalID, Name: "tx", PatternType: acl.Literal}, Entry: acl.Entry{Operation: acl.Write}})
	want(codes(2), kerr.GroupAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code)
	grant(t, tb, acl.Binding{Pattern: acl.Pattern{Type: acl.Group, Name: "g", PatternType: acl.Literal}, Entry: acl.Entry{Operation: acl.Read}})
	want(codes(3), 0, kerr.TopicAuthorizationFailed.Code)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version, fetch.Group, fetch.RequireStable = 7, "g", true
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "a", Partitions: []int32{0}}}
	of := c.roundTrip(fetch, 4).(*kmsg.OffsetFetchResponse)
	if p := of.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnstableOffsetCommit.Code || p.Offset != -1 {
		t.Fatalf("stable fetch of a pending offset: %+v, want UNSTABLE_OFFSET_COMMIT", p)
	}
	if code := tb.broker.groups.CompleteTxnOffsets(ctx, 1000, 0, true, group.Partition("g")); code != 0 {
		t.Fatalf("completing: %d", code)
	}
	of = c.roundTrip(fetch, 5).(*kmsg.OffsetFetchResponse)
	if p := of.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 5 {
		t.Fatalf("stable fetch after the commit marker: %+v, want offset 5", p)
	}
}
