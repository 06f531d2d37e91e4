package interbroker

// The follower's side of the replication throttle (KIP-73):
// follower.replication.throttled.rate bounds the record bytes per second
// this broker fetches, from all its leaders together, for the replicas a
// topic's follower.replication.throttled.replicas lists on this broker. As
// Kafka's replica fetcher does (shouldFollowerThrottle), only a replica
// that is not caught up is held: one whose log end is behind the high
// watermark its leader last sent. While the rate is exceeded such a
// partition is left out of the next fetch, and otherwise asks for at most
// the bytes the rate has left (the leader still sends a batch at least):
// Kafka's follower asks for replica.fetch.max.bytes (1 MiB) and overdraws
// by up to that, where millrace's 8 MiB would let a move through in bursts
// of several seconds' worth. The bytes it fetched are recorded once
// appended.

import (
	"time"

	"millrace/broker/log"
)

// ReplicationQuota is a byte rate shared by the fetchers.
type ReplicationQuota interface {
	// Exceeded reports whether no bytes are left at now.
	Exceeded(now time.Time) bool
	// Available returns the bytes left at now.
	Available(now time.Time) int64
	// Record takes n bytes fetched at now.
	Record(n int64, now time.Time)
}

// ThrottleReplication holds the fetchers' throttled replicas to q
// (follower.replication.throttled.rate). Set before the first Follow.
func (fs *Fetchers) ThrottleReplication(q ReplicationQuota) { fs.quota = q }

// throttled reports whether fp's replica is held to the follower quota: it
// is listed for this broker and not caught up.
func (lf *leaderFetcher) throttled(fp *fetchedPartition) bool {
	q := lf.fs.quota
	if q == nil || !log.ThrottledReplica(fp.p.Log.Config().FollowerReplicationThrottledReplicas, fp.p.Partition, lf.fs.brokerID) {
		return false
	}
	return fp.p.Log.EndOffset() < fp.leaderHighWatermark
}

// unthrottled returns the partitions of ready to fetch now: those held
// while the quota is exceeded are left out.
func (lf *leaderFetcher) unthrottled(ready []*fetchedPartition, now time.Time) []*fetchedPartition {
	q := lf.fs.quota
	if q == nil || !q.Exceeded(now) {
		return ready
	}
	kept := ready[:0]
	for _, fp := range ready {
		if !lf.throttled(fp) {
			kept = append(kept, fp)
		}
	}
	return kept
}

// partitionMaxBytes is what a fetch asks of fp's partition: at most what
// the quota has left when fp is throttled, and 1 byte at least, for which
// the leader still sends a whole batch (KIP-74).
func (lf *leaderFetcher) partitionMaxBytes(fp *fetchedPartition, now time.Time) int32 {
	if !lf.throttled(fp) {
		return followerFetchBytes
	}
	return int32(max(min(lf.fs.quota.Available(now), followerFetchBytes), 1))
}
