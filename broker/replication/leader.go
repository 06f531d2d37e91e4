package replication

// The leader's half of replication as the data path meets it: the min-ISR
// check before an acks=all append, the acks=all wait, followers' fetches
// and the read-replica candidates (KIP-392). Each answers "not replicated"
// without multi-broker mode, so the single-broker rules stay as they were.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/replica"
)

// refusesAcksAll is asked before an acks=all batch is appended:
// NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas (the
// batch must not be written), NOT_LEADER_OR_FOLLOWER when fenced, else 0.
func (m *Manager) refusesAcksAll(topic string, partition int32) int16 {
	return m.asLeader(topic, partition, func(h *hosted) int16 {
		return kafkaCode(h.leader.CheckAcksAll())
	})
}

// asLeader runs f under the partition's lock when this broker leads it
// with several brokers: 0 on a single broker (nothing to check),
// NOT_LEADER_OR_FOLLOWER when it does not lead, else what f answers.
func (m *Manager) asLeader(topic string, partition int32, f func(h *hosted) int16) int16 {
	if !m.cfg.Replicated {
		return 0
	}
	h := m.hostedPartition(topic, partition)
	if h == nil {
		return kerr.NotLeaderForPartition.Code
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.leading {
		return kerr.NotLeaderForPartition.Code
	}
	return f(h)
}

// awaitAcks tells the leader about an append to p and, for acks=all,
// waits until every ISR member has lastOffset (AwaitISR says when).
func (m *Manager) awaitAcks(ctx context.Context, p Partition, acks int16, lastOffset int64) int16 {
	h := m.hostedPartition(p.state.Topic, p.state.Partition)
	if h == nil {
		return kerr.NotLeaderForPartition.Code
	}
	h.mu.Lock()
	if !h.leading {
		h.mu.Unlock()
		if acks == -1 {
			return kerr.NotLeaderForPartition.Code
		}
		return 0
	}
	h.appendedLocked()
	if acks != -1 {
		h.mu.Unlock()
		return 0
	}
	id := replica.RequestID(m.nextRequest.Add(1))
	answer := make(chan int16, 1)
	h.waiters[id] = answer
	d, err := h.leader.WaitForAcks(id, lastOffset)
	if err != nil {
		// The records are no longer in the log: it was truncated after a
		// leadership change.
		delete(h.waiters, id)
		h.mu.Unlock()
		return kerr.NotLeaderForPartition.Code
	}
	h.applyLocked(d)
	h.mu.Unlock()

	timer := time.NewTimer(m.cfg.ProduceAckTimeout)
	defer timer.Stop()
	select {
	case code := <-answer:
		return code
	case <-timer.C:
	case <-ctx.Done():
	case <-m.stopping:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case code := <-answer: // answered meanwhile
		return code
	default:
	}
	delete(h.waiters, id)
	if h.leader != nil {
		h.leader.Abandon(id)
	}
	return kerr.RequestTimedOut.Code
}

// FollowerFetch feeds a follower's fetch (its replica ID, fetch offset,
// log start offset and current leader epoch, -1 if the request has none)
// to the leader, which counts the fetch offset as that replica's log end
// for the ISR and the high watermark: 0 to serve it, else the Kafka error
// to answer it with.
func (m *Manager) FollowerFetch(topic string, partition, replicaID int32, fetchOffset, logStart int64, epoch int32) int16 {
	return m.asLeader(topic, partition, func(h *hosted) int16 {
		h.appendedLocked()
		d, err := h.leader.FollowerFetch(replicaID, fetchOffset, epoch, time.Now())
		if err != nil {
			return kafkaCode(err)
		}
		h.leader.FollowerLogStart(replicaID, logStart)
		h.applyLocked(d)
		return 0
	})
}

// ReadCandidates are the followers a consumer fetching p at fetchOffset
// could read from instead (KIP-392; replica.PreferredReadReplica
// chooses): none unless this broker leads p with several brokers.
func (p Partition) ReadCandidates(fetchOffset int64) []replica.ReadCandidate {
	if !p.m.cfg.Replicated {
		return nil
	}
	h := p.m.hostedPartition(p.state.Topic, p.state.Partition)
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.leading {
		return nil
	}
	return h.leader.ReadCandidates(fetchOffset, time.Now())
}

// kafkaCode maps a replica.KafkaError to its code (0 for nil).
func kafkaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *replica.KafkaError
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
