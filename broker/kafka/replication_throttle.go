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
//     records (no error), and the follower asks again; otherwise with at
//     most the bytes the rate has left (a batch at least). Kafka's leader
//     reads up to the follower's replica.fetch.max.bytes (1 MiB) and so
//     overdraws by up to that; millrace's followers ask for 8 MiB, which
//     would let a move through in bursts of several seconds' worth;
//   - the bytes sent for throttled partitions are recorded after they are
//     read, so the rate holds over time rather than per request.
//
// Replication is exempt from client quotas (throttle.go); this is its own
// bound. follower.replication.throttled.rate is the follower's side, held
// by the replica fetchers (broker/interbroker/throttle.go) with the same
// kind of byte rate.

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"millrace/broker/log"
	"millrace/broker/replication"
)

// byteRate is a token bucket of bytes per second, one second deep: it is
// exceeded while the bytes recorded are more than the rate has refilled.
// Recording may overdraw it, as Kafka records a response's bytes after
// sending it. The rate can change at runtime (a dynamic broker config);
// the bucket then holds at most the new second's worth.
type byteRate struct {
	// rate is the bytes per second as float64 bits; math.MaxInt64 and
	// above: unbounded, and then Exceeded and Record take no lock.
	rate atomic.Uint64

	mu     sync.Mutex // guards the following
	tokens float64
	last   time.Time
}

// newByteRate returns a rate of bytesPerSecond.
func newByteRate(bytesPerSecond int64) *byteRate {
	r := &byteRate{}
	r.set(bytesPerSecond)
	return r
}

// set changes the rate.
func (r *byteRate) set(bytesPerSecond int64) { r.rate.Store(math.Float64bits(float64(bytesPerSecond))) }

func (r *byteRate) perSecond() float64 { return math.Float64frombits(r.rate.Load()) }

// bounded reports whether the rate bounds anything.
func (r *byteRate) bounded() bool { return r.perSecond() < math.MaxInt64 }

// Exceeded reports whether no bytes are left at now.
func (r *byteRate) Exceeded(now time.Time) bool {
	if !r.bounded() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refillLocked(now)
	return r.tokens <= 0
}

// Available returns the bytes left at now (math.MaxInt64 when unbounded):
// what a throttled replica's next read may take, so that one response
// does not overdraw the rate by more than a batch.
func (r *byteRate) Available(now time.Time) int64 {
	if !r.bounded() {
		return math.MaxInt64
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refillLocked(now)
	return int64(r.tokens)
}

// Record takes n bytes sent at now.
func (r *byteRate) Record(n int64, now time.Time) {
	if !r.bounded() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refillLocked(now)
	r.tokens -= float64(n)
}

func (r *byteRate) refillLocked(now time.Time) {
	rate := r.perSecond()
	if r.last.IsZero() {
		r.tokens, r.last = rate, now
		return
	}
	if elapsed := now.Sub(r.last); elapsed > 0 {
		r.tokens = r.tokens + rate*elapsed.Seconds()
		r.last = now
	}
	// Also after a change of the rate: never more than a second's worth.
	r.tokens = min(rate, r.tokens)
}

// replicationRates sets leader.replication.throttled.rate and
// follower.replication.throttled.rate to their effective values: this
// broker's dynamic config, else the cluster-wide one, else the properties
// file's (Kafka's DynamicConfig.Broker, set by an operator or by
// kafka-reassign-partitions.sh --throttle). Called at start and on every
// change of the dynamic broker configs.
func (b *Broker) replicationRates() {
	for _, r := range []struct {
		name   string
		static int64
		rate   *byteRate
	}{
		{"leader.replication.throttled.rate", b.cfg.LeaderReplicationThrottledRate, b.leaderReplication},
		{"follower.replication.throttled.rate", b.cfg.FollowerReplicationThrottledRate, b.followerReplication},
	} {
		rate := r.static
		if v, ok := b.cluster.BrokerSetting(r.name); ok {
			// Checked when it was written (cluster.checkRate).
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				rate = n
			}
		}
		r.rate.set(rate)
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
