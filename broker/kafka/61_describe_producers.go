package kafka

// DescribeProducers (key 61), version 0 (KIP-664).
//
// The idempotent producers a partition leader's log remembers
// (broker/log/producers.go):
// producer ID, epoch, last sequence and the timestamp of its last batch,
// the coordinator epoch of its last transaction marker and the first offset
// of its ongoing transaction (-1 for none of either). A partition this broker does not
// lead gets NOT_LEADER_OR_FOLLOWER; an unknown one
// UNKNOWN_TOPIC_OR_PARTITION.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/log"
	"millrace/broker/replication"
)

func init() { regKey(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authorized(r, acl.Topic, rt.Topic, acl.Read)
		for _, partition := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = partition
			p, code := b.replicas.Leader(rt.Topic, partition, replication.NoLeaderEpoch)
			if !allowed {
				code = kerr.TopicAuthorizationFailed.Code
			}
			if code == 0 {
				sp.ActiveProducers, code = b.describeProducers(rt.Topic, partition, p.Log())
			}
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// describeProducers lists a partition's producers by ID; the code is
// KAFKA_STORAGE_ERROR when the log cannot load its producer state.
func (b *Broker) describeProducers(topic string, partition int32, l *log.Log) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, int16) {
	producers, err := l.Producers()
	if err != nil {
		b.logger.Error("loading producer state", "topic", topic, "partition", partition, "err", err)
		return nil, kerr.KafkaStorageError.Code
	}
	out := make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(producers))
	for _, p := range producers {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch = p.ID, int32(p.Epoch)
		ap.LastSequence, ap.LastTimestamp = p.LastSequence, p.LastTimestamp
		ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = p.CoordinatorEpoch, p.CurrentTxnStartOffset
		out = append(out, ap)
	}
	return out, 0
}
