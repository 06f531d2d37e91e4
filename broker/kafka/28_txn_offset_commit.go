package kafka

// TxnOffsetCommit (key 28), at the versions broker/group serves (v0–v3).
//
// A transactional producer commits its consumer group's offsets inside its
// transaction. The group coordinator keeps them pending (invisible to
// OffsetFetch; UNSTABLE_OFFSET_COMMIT with require_stable) until the
// transaction coordinator's WriteTxnMarkers for "__consumer_offsets"
// completes them (group.Coordinator.CompleteTxnOffsets). From v3 the
// member's generation, member ID and instance ID are checked (KIP-447).
//
// ACLs as Kafka checks them: Write on the transactional ID
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), then Read on
// the group (GROUP_AUTHORIZATION_FAILED), then Read on each topic
// (TOPIC_AUTHORIZATION_FAILED for that topic's partitions while the others
// are committed). Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION from
// the coordinator. v4+ (KIP-890 part 2, no AddOffsetsToTxn) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regGroupKey(28, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.TxnOffsetCommitRequest)
	var code int16
	switch {
	case !b.authorized(r, acl.TransactionalID, req.TransactionalID, acl.Write):
		code = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authorized(r, acl.Group, req.Group, acl.Read):
		code = kerr.GroupAuthorizationFailed.Code
	}
	if code != 0 {
		return txnOffsetCommitAnswer(req, nil, func(string) int16 { return code }), nil
	}
	allowed := make([]kmsg.TxnOffsetCommitRequestTopic, 0, len(req.Topics))
	denied := make(map[string]bool)
	for _, t := range req.Topics {
		if b.authorized(r, acl.Topic, t.Topic, acl.Read) {
			allowed = append(allowed, t)
		} else {
			denied[t.Topic] = true
		}
	}
	if len(denied) == 0 {
		return b.groups.TxnOffsetCommit(ctx, req), nil
	}
	var served *kmsg.TxnOffsetCommitResponse
	if len(allowed) > 0 {
		part := *req
		part.Topics = allowed
		served = b.groups.TxnOffsetCommit(ctx, &part)
	}
	return txnOffsetCommitAnswer(req, served, func(topic string) int16 {
		if denied[topic] {
			return kerr.TopicAuthorizationFailed.Code
		}
		return -1
	}), nil
}

// txnOffsetCommitAnswer builds the response in request order: the topics
// code gives a code (not -1) are answered with it, the others are taken
// from served.
func txnOffsetCommitAnswer(req *kmsg.TxnOffsetCommitRequest, served *kmsg.TxnOffsetCommitResponse, code func(topic string) int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var rest []kmsg.TxnOffsetCommitResponseTopic
	if served != nil {
		rest = served.Topics
	}
	for _, t := range req.Topics {
		if c := code(t.Topic); c != -1 {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, c
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if len(rest) > 0 {
			resp.Topics = append(resp.Topics, rest[0])
			rest = rest[1:]
		}
	}
	return resp
}
