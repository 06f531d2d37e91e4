package kafka

// Fetch from the closest replica (KIP-392), both halves of it.
//
//   - The leader: a consumer fetch (v11+) that names the consumer's rack
//     (client.rack) is answered, when replica.selector.class is Kafka's
//     RackAwareReplicaSelector and an in-sync follower in that rack holds
//     the fetch offset, with that follower's ID as the partition's
//     preferred_read_replica, the leader's high watermark, last stable
//     offset and log start, and no records (broker/replica/read_replica.go
//     decides). Such an answer is sent at once, without the long poll, as
//     Kafka does: there is nothing to wait for here.
//   - A follower: a consumer fetch (v11+) for a partition this broker
//     follows is served from the local log up to the follower's own high
//     watermark, which its fetcher learns from the leader's fetch answers
//     (broker/interbroker/fetcher.go), and its last stable offset; older
//     fetch versions, which cannot have been sent here by a leader, still get
//     NOT_LEADER_OR_FOLLOWER, as Kafka answers them. The consumer's current
//     leader epoch is checked against the partition state, as on the
//     leader (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH). Kafka's answers
//     to a consumer whose follower fell behind are kept: a follower out of
//     the ISR still serves what it has below its high watermark (the
//     leader stops sending consumers to it, and they return to the leader
//     when their metadata.max.age.ms ends the preference); an offset past
//     the follower's high watermark but within its log gets no records; an
//     offset past its log end gets OFFSET_OUT_OF_RANGE, and a broker that
//     no longer holds a replica NOT_LEADER_OR_FOLLOWER — both make the
//     consumer go back to the leader.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/replica"
	"millrace/broker/replication"
)

// preferredReadReplica is the follower a consumer fetching p (which this
// broker leads) at fetchOffset should read from instead, or -1 to read
// here. listener is the one the consumer connected to: a follower with no
// endpoint there cannot be offered.
func (b *Broker) preferredReadReplica(req *kmsg.FetchRequest, p replication.Partition, fetchOffset int64, listener string) int32 {
	if b.cfg.ReplicaSelectorClass == "" || req.Version < 11 || req.Rack == "" || isFollowerFetch(req) {
		return -1
	}
	candidates := p.ReadCandidates(fetchOffset)
	if candidates == nil {
		return -1
	}
	return replica.PreferredReadReplica(req.Rack, b.cfg.Rack, candidates, func(id int32) (string, bool) {
		info, ok := b.cluster.Broker(id)
		if !ok {
			return "", false
		}
		if _, _, ok := advertisedOn(info, listener); !ok {
			return "", false
		}
		return info.Rack, true
	})
}

// readablePartition is the partition a fetch reads: the one this broker
// leads, or for a consumer fetch of v11+ (which a leader may have sent
// here) one it follows.
func (b *Broker) readablePartition(req *kmsg.FetchRequest, topic string, partition, currentLeaderEpoch int32) (replication.Partition, int16) {
	p, code := b.replicas.Leader(topic, partition, currentLeaderEpoch)
	if code != kerr.NotLeaderForPartition.Code || req.Version < 11 || isFollowerFetch(req) {
		return p, code
	}
	if fp, fcode := b.replicas.Follower(topic, partition, currentLeaderEpoch); fcode != kerr.NotLeaderForPartition.Code {
		return fp, fcode
	}
	return p, code
}
