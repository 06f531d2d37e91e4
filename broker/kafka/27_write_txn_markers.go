package kafka

// WriteTxnMarkers (key 27), versions 0–1: the transaction coordinator ends
// a producer's transaction on the partitions this broker leads (KIP-98).
//
// It needs ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED on
// every partition otherwise), as only brokers send it. For each marker and
// partition the leader's log appends the end transaction marker, a control
// batch, stamped with the leader epoch (broker/log/txn.go); the partition is
// answered once the marker is replicated as for acks=all
// (replication.Partition.AwaitISR), so a committed transaction's records are
// visible to read_committed consumers as soon as the coordinator completes
// it. The log refuses a marker whose producer epoch is older than its
// producer's (INVALID_PRODUCER_EPOCH) or whose coordinator epoch is older
// than the last one it saw (TRANSACTION_COORDINATOR_FENCED): a later decision
// for the producer reached the partition already. A partition this broker
// does not lead gets NOT_LEADER_OR_FOLLOWER, an unknown one
// UNKNOWN_TOPIC_OR_PARTITION.
//
// Markers for "__consumer_offsets" end transactional offset commits: the
// partition is group.Partition(group) of the groups this broker
// coordinates, and the group coordinator makes the producer's pending
// offsets on it committed or drops them (broker/group).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/log"
	"millrace/broker/replication"
)

func init() { regKey(27, 0, 1, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.WriteTxnMarkersRequest)
	if !b.authorizedCluster(r, acl.ClusterAction) {
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, rt := range m.Topics {
				st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				st.Topic = rt.Topic
				for _, p := range rt.Partitions {
					sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					sp.Partition, sp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
				}
				rm.Topics = append(rm.Topics, st)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return resp, nil
	}
	return b.writeTxnMarkers(ctx, req), nil
}

// writeTxnMarkers writes req's markers on this broker and answers each
// partition; the handler after its authorization check.
func (b *Broker) writeTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// pending is a written marker waiting for replication, located by
	// marker, topic and partition index in the response.
	type pending struct {
		marker, topic, partition int
		p                        replication.Partition
		offset                   int64
	}
	var written []pending
	now := time.Now().UnixMilli()
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, 0, len(req.Markers))
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		marker := log.EndTxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch, Timestamp: now}
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, 0, len(m.Topics))
		for _, rt := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, 0, len(rt.Partitions))
			for _, partition := range rt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = partition
				if rt.Topic == consumerOffsetsTopic {
					sp.ErrorCode = b.groups.CompleteTxnOffsets(ctx, m.ProducerID, m.ProducerEpoch, m.Committed, partition)
				} else if p, offset, code := b.appendTxnMarker(rt.Topic, partition, marker); code != 0 {
					sp.ErrorCode = code
				} else {
					written = append(written, pending{marker: len(resp.Markers), topic: len(rm.Topics), partition: len(st.Partitions), p: p, offset: offset})
				}
				st.Partitions = append(st.Partitions, sp)
			}
			rm.Topics = append(rm.Topics, st)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	// All appended first, then waited for: the followers fetch them
	// together.
	for _, w := range written {
		if code := w.p.AwaitISR(ctx, -1, w.offset); code != 0 {
			resp.Markers[w.marker].Topics[w.topic].Partitions[w.partition].ErrorCode = code
		}
	}
	return resp
}

// appendTxnMarker appends marker to a partition this broker leads and
// returns the partition and the marker's offset, or the error code.
func (b *Broker) appendTxnMarker(topic string, partition int32, marker log.EndTxnMarker) (replication.Partition, int64, int16) {
	p, code := b.replicas.Leader(topic, partition, replication.NoLeaderEpoch)
	if code != 0 {
		return replication.Partition{}, -1, code
	}
	offset, err := p.AppendMarker(marker)
	var refused *log.ProducerError
	switch {
	case err == nil:
		return p, offset, 0
	case errors.As(err, &refused):
		b.logger.Info("transaction marker refused", "topic", topic, "partition", partition, "producer_id", marker.ProducerID, "reason", refused.Message)
		return replication.Partition{}, -1, producerErrorCode(refused)
	case errors.Is(err, log.ErrProducerState):
		b.logger.Error("loading producer state for a transaction marker", "topic", topic, "partition", partition, "err", err)
		return replication.Partition{}, -1, kerr.KafkaStorageError.Code
	}
	code, serverFault := replication.LogErrorCode(err)
	if serverFault {
		b.logger.Error("appending a transaction marker", "topic", topic, "partition", partition, "err", err)
	}
	return replication.Partition{}, -1, code
}
