package kafka

// DeleteRecords (key 21), versions 0–2.
//
// Moves a partition's log start offset up to the requested offset (-1: the
// high watermark) through broker/log, which deletes the segments wholly
// below it; records below it become unreadable at once. An offset past the
// high watermark, or negative other than -1, gets OFFSET_OUT_OF_RANGE; an
// offset at or below the current start changes nothing. The response's low
// watermark is the log start offset afterwards. A partition this broker does
// not lead gets NOT_LEADER_OR_FOLLOWER; an unknown one
// UNKNOWN_TOPIC_OR_PARTITION. On a tiered topic (remote.storage.enable) the
// remote segments below the offset go as well, first (KIP-405); a failure
// of the remote store or state gets KAFKA_STORAGE_ERROR and deletes
// nothing locally. The deletion is synchronous, so timeout_ms is
// not used (with replication, the low watermark of the followers will be
// waited for here).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/replication"
)

func init() { regKey(21, 0, 2, handleDeleteRecords) }

// deleteToHighWatermark is the offset that means "up to the high watermark".
const deleteToHighWatermark = -1

func handleDeleteRecords(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		allowed := b.authorized(r, acl.Topic, rt.Topic, acl.Delete)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			if !allowed {
				sp.LowWatermark, sp.ErrorCode = -1, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.LowWatermark, sp.ErrorCode = b.deleteRecords(rt.Topic, rp.Partition, rp.Offset)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// deleteRecords advances one partition's start offset; it returns the low
// watermark (-1 on error) and the error code.
func (b *Broker) deleteRecords(topic string, partition int32, offset int64) (int64, int16) {
	p, code := b.replicas.Leader(topic, partition, replication.NoLeaderEpoch)
	if code != 0 {
		return -1, code
	}
	hw := p.HighWatermark()
	if offset == deleteToHighWatermark {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kerr.OffsetOutOfRange.Code
	}
	// A tiered partition's remote segments go first (broker/tier), so no
	// remote read serves what is deleted; the low watermark is then the
	// remote log start when there is remote data.
	remoteStart := int64(-1)
	if b.remoteDeleteRecords != nil && p.Log().Config().RemoteStorageEnable {
		var err error
		if remoteStart, err = b.remoteDeleteRecords(topic, partition, offset); err != nil {
			b.logger.Error("deleting remote records", "topic", topic, "partition", partition, "offset", offset, "err", err)
			return -1, kerr.KafkaStorageError.Code
		}
	}
	if err := p.Log().AdvanceStartOffset(offset); err != nil {
		code, serverFault := replication.LogErrorCode(err)
		if serverFault {
			b.logger.Error("advancing the log start offset", "topic", topic, "partition", partition, "offset", offset, "err", err)
		}
		return -1, code
	}
	low := p.Log().StartOffset()
	if remoteStart >= 0 {
		low = min(low, remoteStart)
	}
	b.logger.Info("records deleted", "topic", topic, "partition", partition, "log_start_offset", low)
	return low, 0
}
