package kafka

// OffsetForLeaderEpoch (key 23), versions 0–4.
//
// For each partition, the end offset of the requested leader epoch (KIP-101,
// KIP-279): for the latest epoch the log end offset, for an older one the
// start offset of the next higher epoch, with the largest epoch at or below
// the one asked for (v1+); for an epoch newer than any known, epoch -1 and
// offset -1 (broker/log's EndOffsetForEpoch). Followers use it to truncate
// to the leader's log before fetching; consumers (KIP-320) to detect
// truncation after a leader change.
//
// current_leader_epoch (v2+, -1 for none) is checked against the partition
// state: older gets FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. Only
// the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere); the replica ID
// (v3+) is not used.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/replication"
)

func init() { regKey(23, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// As in Kafka: ClusterAction (a follower) answers every topic,
	// otherwise Describe on each.
	replica := b.authorizedCluster(r, acl.ClusterAction)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		allowed := replica || b.authorized(r, acl.Topic, rt.Topic, acl.Describe)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			current := int32(replication.NoLeaderEpoch)
			if req.Version >= 2 {
				current = rp.CurrentLeaderEpoch
			}
			p, code := b.replicas.Leader(rt.Topic, rp.Partition, current)
			if !allowed {
				code = kerr.TopicAuthorizationFailed.Code
			}
			if code != 0 {
				sp.ErrorCode = code
			} else {
				sp.LeaderEpoch, sp.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
