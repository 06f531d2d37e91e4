package kafka

// The leader's half of replication as the data-path handlers see it: the
// hooks that data_partition.go, 00_produce.go and 01_fetch.go call. Each
// answers "not replicated" (ok false, or code 0) without multi-broker mode,
// so the single-broker rules stay as they were.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/replica"
)

// replicationLeads checks that this broker's replica manager leads the
// partition at epoch (the model's): 0, or NOT_LEADER_OR_FOLLOWER while it
// is still following, fenced, or without a coordination session.
func (b *Broker) replicationLeads(topic string, partition, epoch int32) int16 {
	m := b.replication()
	if m == nil {
		return 0
	}
	rp := m.partition(topic, partition)
	if rp == nil || rp.leadingEpoch.Load() != int64(epoch) {
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// replicationHighWatermark is the leader's high watermark in multi-broker
// mode; ok is false without it.
func (b *Broker) replicationHighWatermark(p ledPartition) (hw int64, ok bool) {
	m := b.replication()
	if m == nil {
		return 0, false
	}
	rp := m.partition(p.state.Topic, p.state.Partition)
	if rp == nil {
		return 0, true
	}
	return min(rp.highWatermark.Load(), p.log.EndOffset()), true
}

// replicationRefusesAcksAll is asked before an acks=all batch is appended:
// NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas (the
// batch must not be written), NOT_LEADER_OR_FOLLOWER when fenced, else 0.
func (b *Broker) replicationRefusesAcksAll(topic string, partition int32) int16 {
	m := b.replication()
	if m == nil {
		return 0
	}
	rp := m.partition(topic, partition)
	if rp == nil {
		return kerr.NotLeaderForPartition.Code
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if !rp.leading {
		return kerr.NotLeaderForPartition.Code
	}
	return kafkaCode(rp.leader.CheckAcksAll())
}

// refuseAcksAll sets sp's error code and reports true when
// replicationRefusesAcksAll refuses the batch.
func (b *Broker) refuseAcksAll(topic string, partition int32, sp *kmsg.ProduceResponseTopicPartition) bool {
	if code := b.replicationRefusesAcksAll(topic, partition); code != 0 {
		sp.ErrorCode = code
		return true
	}
	return false
}

// replicationAwait tells the leader about an append to p and, for acks=all,
// waits until every ISR member has lastOffset (the high watermark passed
// it), the ISR shrank below min.insync.replicas
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND), this broker stopped leading
// (NOT_LEADER_OR_FOLLOWER) or the produce timeout passed
// (REQUEST_TIMED_OUT). ok is false without multi-broker mode.
func (b *Broker) replicationAwait(ctx context.Context, p ledPartition, acks int16, lastOffset int64) (code int16, ok bool) {
	m := b.replication()
	if m == nil {
		return 0, false
	}
	rp := m.partition(p.state.Topic, p.state.Partition)
	if rp == nil {
		return kerr.NotLeaderForPartition.Code, true
	}
	rp.mu.Lock()
	if !rp.leading {
		rp.mu.Unlock()
		if acks == -1 {
			return kerr.NotLeaderForPartition.Code, true
		}
		return 0, true
	}
	rp.appendedLocked()
	if acks != -1 {
		rp.mu.Unlock()
		return 0, true
	}
	id := replica.RequestID(m.nextRequest.Add(1))
	answer := make(chan int16, 1)
	rp.waiters[id] = answer
	d, err := rp.leader.WaitForAcks(id, lastOffset)
	if err != nil {
		// The records are no longer in the log: it was truncated after a
		// leadership change.
		delete(rp.waiters, id)
		rp.mu.Unlock()
		return kerr.NotLeaderForPartition.Code, true
	}
	rp.applyLocked(d)
	rp.mu.Unlock()

	timer := time.NewTimer(m.cfg.ProduceAckTimeout)
	defer timer.Stop()
	select {
	case code := <-answer:
		return code, true
	case <-timer.C:
	case <-ctx.Done():
	case <-m.stopping:
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	select {
	case code := <-answer: // answered meanwhile
		return code, true
	default:
	}
	delete(rp.waiters, id)
	if rp.leader != nil {
		rp.leader.Abandon(id)
	}
	return kerr.RequestTimedOut.Code, true
}

// replicationFollowerFetch feeds a follower's fetch (its replica ID, fetch
// offset, log start offset and current leader epoch, -1 if the request has
// none) to the leader: 0 to serve it, else the Kafka error to answer it
// with.
func (b *Broker) replicationFollowerFetch(topic string, partition, replicaID int32, fetchOffset, logStart int64, epoch int32) int16 {
	m := b.replication()
	if m == nil {
		return 0
	}
	rp := m.partition(topic, partition)
	if rp == nil {
		return kerr.NotLeaderForPartition.Code
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if !rp.leading {
		return kerr.NotLeaderForPartition.Code
	}
	rp.appendedLocked()
	d, err := rp.leader.FollowerFetch(replicaID, fetchOffset, epoch, time.Now())
	if err != nil {
		return kafkaCode(err)
	}
	rp.leader.FollowerLogStart(replicaID, logStart)
	rp.applyLocked(d)
	return 0
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
