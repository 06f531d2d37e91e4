package kafka

// DescribeProducers (key 61), version 0 (KIP-664).
//
// The idempotent producers a partition leader remembers (producer_state.go):
// producer ID, epoch, last sequence and the timestamp of its last batch.
// millrace has no transactions, so coordinator_epoch and
// current_txn_start_offset are always -1. A partition this broker does not
// lead gets NOT_LEADER_OR_FOLLOWER; an unknown one
// UNKNOWN_TOPIC_OR_PARTITION.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/log"
)

func init() { regKey(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	states := b.producers
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authorized(r, acl.Topic, rt.Topic, acl.Read)
		for _, partition := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = partition
			p, code := b.leaderPartition(rt.Topic, partition, noLeaderEpoch)
			if !allowed {
				code = kerr.TopicAuthorizationFailed.Code
			}
			if code == 0 {
				sp.ActiveProducers, code = states.describe(log.TopicPartition{Topic: rt.Topic, Partition: partition}, p.log)
			}
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
