package replica

// The preferred read replica of KIP-392: which replica a consumer should
// fetch a partition from. The leader decides, when a consumer fetches from
// it; the answer goes back as the partition's preferred_read_replica, with
// no records, and the consumer then fetches from that replica until it
// fails or the consumer's metadata.max.age.ms passes.
//
// The rules are Kafka's (ReplicaManager.findPreferredReadReplica and
// RackAwareReplicaSelector):
//
//   - Only in-sync followers are candidates (KAFKA-14372: a follower out of
//     the ISR would keep the consumer behind for as long as it lags), and
//     only those holding the fetch offset (log start <= offset <= log end),
//     so the consumer can read on without an OFFSET_OUT_OF_RANGE.
//   - A consumer without a rack, or whose rack has no candidate, reads from
//     the leader; so does one in the leader's own rack.
//   - Among several candidates in the consumer's rack the most caught-up
//     wins: the largest log end offset, then the one that caught up most
//     recently; ties go to the smallest broker ID, so the choice is stable.

import "time"

// RackAwareSelectorClass is the replica.selector.class value that turns
// rack-aware read replicas on: Kafka's class name, so a server.properties
// written for Kafka works unchanged. The default (empty) is Kafka's: every
// consumer reads from the leader.
const RackAwareSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// ReadCandidate is one in-sync follower able to serve a read, as the
// leader sees it (Kafka's ReplicaView, without the endpoint).
type ReadCandidate struct {
	ID int32
	// LogEndOffset is the follower's log end offset (its last fetch offset).
	LogEndOffset int64
	// SinceCaughtUp is how long ago the follower was last caught up.
	SinceCaughtUp time.Duration
}

// ReadCandidates lists the in-sync followers that hold fetchOffset, for
// PreferredReadReplica; none while not leading. A follower whose log start
// offset is not known yet (it has not fetched in this term) is left out.
func (l *Leader) ReadCandidates(fetchOffset int64, now time.Time) []ReadCandidate {
	if l.role != roleLeading {
		return nil
	}
	var out []ReadCandidate
	for _, id := range l.isr {
		f, ok := l.followers[id]
		if id == l.localID || !ok || f.endOffset < fetchOffset || f.logStart < 0 || f.logStart > fetchOffset {
			continue
		}
		out = append(out, ReadCandidate{ID: id, LogEndOffset: f.endOffset, SinceCaughtUp: max(now.Sub(f.lastCaughtUp), 0)})
	}
	return out
}

// FollowerLogStart records a follower's log start offset, which its fetch
// requests carry: a follower whose retention deleted the offset a consumer
// asks for cannot serve it.
func (l *Leader) FollowerLogStart(replica int32, logStart int64) {
	if f, ok := l.followers[replica]; ok {
		f.logStart = logStart
	}
}

// PreferredReadReplica is RackAwareReplicaSelector's choice for a consumer
// in clientRack: the ID of a follower among candidates, or -1 when the
// consumer should read from the leader (in leaderRack). rackOf gives a
// follower's rack and whether it can be offered at all (a broker that is
// not registered, or has no endpoint the consumer can reach, cannot).
func PreferredReadReplica(clientRack, leaderRack string, candidates []ReadCandidate, rackOf func(id int32) (string, bool)) int32 {
	if clientRack == "" || clientRack == leaderRack {
		return -1
	}
	var best *ReadCandidate
	for i := range candidates {
		c := &candidates[i]
		if rack, ok := rackOf(c.ID); !ok || rack != clientRack {
			continue
		}
		if best == nil || moreCaughtUp(c, best) {
			best = c
		}
	}
	if best == nil {
		return -1
	}
	return best.ID
}

// moreCaughtUp orders candidates as Kafka's ReplicaView comparator does,
// with the broker ID last so the order is total.
func moreCaughtUp(a, b *ReadCandidate) bool {
	switch {
	case a.LogEndOffset != b.LogEndOffset:
		return a.LogEndOffset > b.LogEndOffset
	case a.SinceCaughtUp != b.SinceCaughtUp:
		return a.SinceCaughtUp < b.SinceCaughtUp
	}
	return a.ID < b.ID
}

// ValidSelectorClass reports whether replica.selector.class names a
// selector millrace has: none (empty) or Kafka's rack-aware one.
func ValidSelectorClass(name string) bool {
	return name == "" || name == RackAwareSelectorClass
}
