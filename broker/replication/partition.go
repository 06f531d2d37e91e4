package replication

// A partition as one request on the data path sees it: found by the leader
// and leader-epoch checks (KIP-320), it answers the high watermark and the
// last stable offset, appends as leader, reads, and decides when an
// acknowledgement may go out. The handlers of broker/kafka translate wire
// types to these calls and back; none of them reasons about replication.

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/cluster"
	"millrace/broker/log"
)

// NoLeaderEpoch is the "do not check" value of current_leader_epoch fields.
const NoLeaderEpoch = -1

// Partition is a partition this broker leads, found for one request, or
// (Follower set) one it follows, found for a consumer's fetch (KIP-392):
// its high watermark is then the one the follower last heard from its
// leader. A failed lookup returns one with only State (maybe nil), for the
// current-leader hint of the error answer.
type Partition struct {
	state    *cluster.PartitionState
	log      *log.Log
	m        *Manager
	follower bool
}

// State is the partition state the lookup found (nil for an unknown
// partition).
func (p Partition) State() *cluster.PartitionState { return p.state }

// Log is the local replica's log.
func (p Partition) Log() *log.Log { return p.log }

// Follower reports a partition this broker follows (a consumer fetch
// served by a follower, KIP-392).
func (p Partition) Follower() bool { return p.follower }

// Leader finds topic/partition and checks that this broker leads it and
// that the client's current leader epoch (KIP-320; NoLeaderEpoch skips the
// check) matches. The error code is 0 on success, else
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (also while the
// replica manager still follows, is fenced, or has no coordination
// session), FENCED_LEADER_EPOCH (the client's epoch is older) or
// UNKNOWN_LEADER_EPOCH (newer).
func (m *Manager) Leader(topic string, partition, currentLeaderEpoch int32) (Partition, int16) {
	state, l, ok := m.cluster.Partition(topic, partition)
	if !ok {
		return Partition{}, kerr.UnknownTopicOrPartition.Code
	}
	if state.Leader != m.brokerID || l == nil {
		return Partition{state: state}, kerr.NotLeaderForPartition.Code
	}
	if code := checkLeaderEpoch(currentLeaderEpoch, state.LeaderEpoch); code != 0 {
		return Partition{state: state}, code
	}
	if m.cfg.Replicated {
		h := m.hostedPartition(topic, partition)
		if h == nil || h.leadingEpoch.Load() != int64(state.LeaderEpoch) {
			return Partition{state: state}, kerr.NotLeaderForPartition.Code
		}
	}
	return Partition{state: state, log: l, m: m}, 0
}

// LeaderForAppend is Leader for a produce with acks: an acks=all produce
// is first refused, before anything is written, with NOT_ENOUGH_REPLICAS
// when the ISR is smaller than min.insync.replicas, or
// NOT_LEADER_OR_FOLLOWER when this broker does not lead (both without a
// state for the leader hint).
func (m *Manager) LeaderForAppend(topic string, partition int32, acks int16) (Partition, int16) {
	if acks == -1 {
		if code := m.refusesAcksAll(topic, partition); code != 0 {
			return Partition{}, code
		}
	}
	return m.Leader(topic, partition, NoLeaderEpoch)
}

// Follower finds a partition this broker follows, for a consumer fetch
// (v11+) to read from, with the same checks Leader makes:
// NOT_LEADER_OR_FOLLOWER when this broker holds no replica of it (or is
// between roles, or runs alone), FENCED_LEADER_EPOCH or
// UNKNOWN_LEADER_EPOCH when the consumer's current leader epoch is older or
// newer than the partition's.
func (m *Manager) Follower(topic string, partition, currentLeaderEpoch int32) (Partition, int16) {
	state, l, ok := m.cluster.Partition(topic, partition)
	if !m.cfg.Replicated || !ok || l == nil || state.Leader == m.brokerID || !slices.Contains(state.Replicas, m.brokerID) {
		return Partition{state: state}, kerr.NotLeaderForPartition.Code
	}
	h := m.hostedPartition(topic, partition)
	if h == nil || h.log != l || h.leadingEpoch.Load() >= 0 {
		return Partition{state: state}, kerr.NotLeaderForPartition.Code
	}
	if code := checkLeaderEpoch(currentLeaderEpoch, state.LeaderEpoch); code != 0 {
		return Partition{state: state}, code
	}
	return Partition{state: state, log: l, m: m, follower: true}, 0
}

// checkLeaderEpoch compares a client's current leader epoch with ours.
func checkLeaderEpoch(client, ours int32) int16 {
	switch {
	case client == NoLeaderEpoch:
		return 0
	case client < ours:
		return kerr.FencedLeaderEpoch.Code
	case client > ours:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// HighWatermark is the offset below which records are committed and
// visible to consumers, in one place:
//
//   - on a single broker every written record is committed: the log end;
//   - with several brokers the replica manager's, the smallest log end
//     offset in the ISR (docs/architecture.md §5), never above the log end;
//     on a follower the one it last heard from its leader;
//   - with millrace.flush.on.ack never past the fsynced offset: a consumer
//     that sees only fsynced records never commits an offset that a power
//     cut could take from the log, so committed group offsets stay at or
//     below the log end recovered after one.
func (p Partition) HighWatermark() int64 {
	hw := p.log.EndOffset()
	if p.m.cfg.Replicated {
		hw = 0
		if h := p.m.hostedPartition(p.state.Topic, p.state.Partition); h != nil {
			hw = min(h.highWatermark.Load(), p.log.EndOffset())
		}
	}
	if p.log.Config().FlushOnAck {
		hw = min(hw, p.log.DurableOffset())
	}
	return hw
}

// LastStableOffset is the offset below which read_committed consumers may
// read (KIP-98): the high watermark, or the first offset of the oldest
// ongoing transaction if that is lower, so that nothing undecided is read.
// When the log cannot load its producer state it is the log start offset:
// nothing is known to be decided.
func (p Partition) LastStableOffset() int64 {
	hw := p.HighWatermark()
	first, ok, err := p.log.FirstUnstableOffset()
	switch {
	case err != nil:
		p.m.logger.Error("loading producer state for the last stable offset", "topic", p.state.Topic, "partition", p.state.Partition, "err", err)
		return min(hw, p.log.StartOffset())
	case ok:
		return min(hw, first)
	}
	return hw
}

// AppendAsLeader appends validated producer batches at the partition's
// leader epoch and wakes the Fetches waiting on it. The log checks an
// idempotent batch against its producer's sequence and appends it under
// one lock; a duplicate is answered with its original offsets and wakes
// no one.
func (p Partition) AppendAsLeader(batches log.ValidBatches) (log.AppendInfo, error) {
	info, err := p.log.AppendValidated(batches, p.state.LeaderEpoch)
	if err == nil && !info.Duplicate {
		p.m.NotifyData(p.state.Topic, p.state.Partition)
	}
	return info, err
}

// AppendMarker appends a transaction marker at the partition's leader
// epoch and wakes the Fetches waiting on it.
func (p Partition) AppendMarker(marker log.EndTxnMarker) (int64, error) {
	offset, err := p.log.AppendEndTxnMarker(marker, p.state.LeaderEpoch)
	if err == nil {
		p.m.NotifyData(p.state.Topic, p.state.Partition)
	}
	return offset, err
}

// Read reads whole batches from offset, up to maxBytes, below upTo (the
// high watermark, the last stable offset, or for a replica the log end).
func (p Partition) Read(offset int64, maxBytes int, upTo int64) (*log.Slice, error) {
	return p.log.Read(offset, maxBytes, upTo)
}

// AwaitISR decides when an append to p that ended at lastOffset is
// acknowledged, and returns the Kafka error code for the partition:
//
//   - with millrace.flush.on.ack the log is fsynced to lastOffset first
//     (awaitDurable), for every acks;
//   - on a single broker at once (the lone broker is the whole ISR and the
//     append moved the high watermark past lastOffset);
//   - with several brokers acks=1 at once, acks=-1 (all) once every ISR
//     member has lastOffset (the high watermark passed it), or
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
//     min.insync.replicas, NOT_LEADER_OR_FOLLOWER when this broker stopped
//     leading, REQUEST_TIMED_OUT when the produce timeout passed.
func (p Partition) AwaitISR(ctx context.Context, acks int16, lastOffset int64) int16 {
	if code := p.awaitDurable(ctx, lastOffset); code != 0 {
		return code
	}
	if p.m.cfg.Replicated {
		return p.m.awaitAcks(ctx, p, acks, lastOffset)
	}
	if acks != -1 {
		return 0
	}
	if p.HighWatermark() > lastOffset {
		return 0
	}
	// Unreachable on a single broker: the append moved the log end, which is
	// the high watermark, past lastOffset.
	return kerr.NotEnoughReplicasAfterAppend.Code
}

// awaitDurable fsyncs the leader's log up to lastOffset when the topic has
// millrace.flush.on.ack, before any acknowledgement (acks=1 and acks=all
// alike; acks=0 too, since the high watermark, and so what consumers see,
// waits for the fsync). Produces to the partition meanwhile share the fsync
// (log.SyncTo's group commit). With replication the followers fetch
// meanwhile, and fsync before they fetch past what they have, so the ISR's
// acknowledgement that follows means "fsynced on every ISR member".
func (p Partition) awaitDurable(ctx context.Context, lastOffset int64) int16 {
	if !p.log.Config().FlushOnAck {
		return 0
	}
	err := p.log.SyncTo(ctx, lastOffset+1)
	switch {
	case err == nil:
		// The high watermark may have moved: wake the Fetches it held back.
		p.m.NotifyData(p.state.Topic, p.state.Partition)
		return 0
	case ctx.Err() != nil:
		return kerr.RequestTimedOut.Code
	}
	code, serverFault := LogErrorCode(err)
	if errors.Is(err, log.ErrOffsetOutOfRange) {
		// Truncated meanwhile: this broker lost the leadership.
		code, serverFault = kerr.NotLeaderForPartition.Code, false
	}
	if serverFault {
		p.m.logger.Error("fsync for an acknowledgement", "topic", p.state.Topic, "partition", p.state.Partition, "err", err)
	}
	return code
}

// LogErrorCode maps an error from broker/log to a Kafka error code, and
// reports whether it is the broker's fault (worth an error log line).
func LogErrorCode(err error) (code int16, serverFault bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, log.ErrCorruptBatch):
		return kerr.CorruptMessage.Code, false
	case errors.Is(err, log.ErrInvalidRecord):
		return kerr.InvalidRecord.Code, false
	case errors.Is(err, log.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code, false
	case errors.Is(err, log.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code, false
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code, false
	case errors.Is(err, log.ErrClosed):
		// The partition was deleted or the broker is stopping: the client
		// should refresh its metadata and retry elsewhere.
		return kerr.NotLeaderForPartition.Code, false
	default:
		return kerr.KafkaStorageError.Code, true
	}
}
