package kafka

// A replica's fetch below a tiered partition's local log start (KIP-405's
// follower fetch). The leader keeps only the local tail of a
// remote.storage.enable partition; what lies below its local log start and
// at or above the remote log start is in the object store. A follower
// fetching there (a new replica of a reassignment, one that was away
// longer than local retention) gets OFFSET_MOVED_TO_TIERED_STORAGE (109)
// instead of OFFSET_OUT_OF_RANGE, and restarts its log at the leader's
// local log start from the remote state (broker/tier/replica.go).
//
// The answer's log_start_offset carries that local log start. Kafka's
// follower asks for it with ListOffsets (earliest-local, -4); only
// millrace followers receive 109 (consumers never do: their fetches below
// the local start are served from remote storage), so the Fetch answer
// carries it and the follower needs no second request.
//
// An offset below the remote log start, or a partition with nothing
// remote, keeps the usual OFFSET_OUT_OF_RANGE.

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/replication"
	"millrace/broker/tier"
)

// replicaFetchTiered decides a replica's fetch of p at fetchOffset: 109
// and the leader's local log start when the offset is remote, 0 to read
// the log as usual.
func (b *Broker) replicaFetchTiered(p replication.Partition, topic string, partition int32, fetchOffset int64) (code int16, localStart int64) {
	l := p.Log()
	localStart = l.StartOffset()
	if fetchOffset >= localStart || !l.Config().RemoteStorageEnable || b.store == nil {
		return 0, localStart
	}
	t, ok := b.cluster.Topic(topic)
	if !ok {
		return 0, localStart
	}
	st, _, exists, err := tier.ReadState(b.store, topic, partition)
	if err != nil {
		b.logger.Warn("reading the remote state for a replica's fetch below the local log start", "topic", topic, "partition", partition, "err", err)
		return kerr.KafkaStorageError.Code, localStart
	}
	if !exists || st.TopicID != tier.EncodeTopicID(t.ID) || fetchOffset < st.LogStartOffset {
		return 0, localStart
	}
	return kerr.OffsetMovedToTieredStorage.Code, localStart
}
