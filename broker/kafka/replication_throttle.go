package kafka

// Replication throttles (KIP-73): leader.replication.throttled.rate bounds
// the record bytes per second this broker, as leader, sends to followers of
// the replicas a topic's leader.replication.throttled.replicas lists, so
// that a reassignment catching up new replicas cannot take the bandwidth
// of clients. As Kafka's leader does (ReplicaManager.shouldLeaderThrottle):
//
//   - only followers out of the ISR are held: an in-sync follower keeps up
//     with produce traffic that clients already pay for, and holding it
//     would stall acks=all producers;
//   - while the rate is exceeded, a throttled partition is answered with no
//     records (no error), and the follower asks again;
//   - the bytes sent for throttled partitions are recorded after they are
//     read, so the rate holds over time rather than per request.
//
// Replication is exempt from client quotas (throttle.go); this is its own
// bound. follower.replication.throttled.rate is the follower's side, held
// by the replica fetchers (broker/interbroker/throttle.go) with the same
// kind of byte rate.

import (
	"math"
	"sync"
	"time"

	"millrace/broker/log"
	"millrace/broker/replication"
)

// byteRate is a token bucket of bytes per second, one second deep: it is
// exceeded while the bytes recorded are more than the rate has refilled.
// Recording may overdraw it, as Kafka records a response's bytes after
// sending it.
type byteRate struct {
	rate float64 // bytes per second; math.MaxInt64 and above: unbounded

	mu     sync.Mutex // guards the following
	tokens float64
	last   time.Time
}

// bounded reports whether the rate bounds anything.
func (r *byteRate) bounded() bool { return r.rate < math.MaxInt64 }

// Exceeded reports whether no bytes are left at now.
func (r *byteRate) Exceeded(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refillLocked(now)
	return r.tokens <= 0
}

// Record takes n bytes sent at now.
func (r *byteRate) Record(n int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refillLocked(now)
	r.tokens -= float64(n)
}

func (r *byteRate) refillLocked(now time.Time) {
	if r.last.IsZero() {
		r.tokens, r.last = r.rate, now
		return
	}
	if elapsed := now.Sub(r.last); elapsed > 0 {
		r.tokens = min(r.rate, r.tokens+r.rate*elapsed.Seconds())
		r.last = now
	}
}

// leaderThrottled reports whether replicaID's fetch of topic's partition p
// is under leader.replication.throttled.rate: the partition's replica on
// this broker is listed, and the follower is out of the ISR.
func (b *Broker) leaderThrottled(p replication.Partition, partition, replicaID int32) bool {
	if !b.leaderReplication.bounded() || p.Log() == nil || p.State() == nil {
		return false
	}
	if !log.ThrottledReplica(p.Log().Config().LeaderReplicationThrottledReplicas, partition, b.cfg.BrokerID) {
		return false
	}
	for _, id := range p.State().ISR {
		if id == replicaID {
			return false
		}
	}
	return true
}
