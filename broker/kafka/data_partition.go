package kafka

// Shared pieces of the data-path handlers (Produce, Fetch, ListOffsets,
// DeleteRecords, OffsetForLeaderEpoch): finding a partition this broker
// leads, the leader-epoch checks of KIP-320, the high watermark, the
// "when is acks=all satisfied" seam, and the mapping of broker/log errors to
// Kafka error codes.
//
// The two seams the replication engineer plugs into are highWatermark (today
// the log end offset: one broker, so every record is committed as soon as it
// is written) and awaitReplication (today immediate). Both are single
// functions so that the handlers never reason about replication themselves.
// millrace.flush.on.ack plugs into the same two: the high watermark stops at
// the fsynced offset, and awaitReplication fsyncs first (awaitDurable).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/cluster"
	"millrace/broker/log"
)

// noLeaderEpoch is the "do not check" value of current_leader_epoch fields.
const noLeaderEpoch = -1

// ledPartition is a partition this broker leads, found for one request,
// or (follower set) one it follows, found for a consumer's fetch
// (fetch_read_replica.go): its high watermark is then the one the
// follower last heard from its leader.
type ledPartition struct {
	state    *cluster.PartitionState
	log      *log.Log
	broker   *Broker // for the replication hooks
	follower bool
}

// leaderPartition finds topic/partition and checks that this broker leads it
// and that the client's current leader epoch (KIP-320; noLeaderEpoch skips
// the check) matches. The error code is 0 on success, else
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH
// (the client's epoch is older) or UNKNOWN_LEADER_EPOCH (newer).
func (b *Broker) leaderPartition(topic string, partition, currentLeaderEpoch int32) (ledPartition, int16) {
	state, l, ok := b.cluster.Partition(topic, partition)
	if !ok {
		return ledPartition{}, kerr.UnknownTopicOrPartition.Code
	}
	if state.Leader != b.cfg.BrokerID || l == nil {
		return ledPartition{state: state}, kerr.NotLeaderForPartition.Code
	}
	if code := checkLeaderEpoch(currentLeaderEpoch, state.LeaderEpoch); code != 0 {
		return ledPartition{state: state}, code
	}
	if code := b.replicationLeads(topic, partition, state.LeaderEpoch); code != 0 {
		return ledPartition{state: state}, code
	}
	return ledPartition{state: state, log: l, broker: b}, 0
}

// checkLeaderEpoch compares a client's current leader epoch with ours.
func checkLeaderEpoch(client, ours int32) int16 {
	switch {
	case client == noLeaderEpoch:
		return 0
	case client < ours:
		return kerr.FencedLeaderEpoch.Code
	case client > ours:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// highWatermark is the offset below which records are committed and visible
// to consumers. With replication it becomes the smallest log end offset in
// the ISR (docs/architecture.md §5); on a single broker every written record is
// committed, so it is the log end offset.
//
// With several brokers it is the replica manager's (replication_leader.go).
//
// With millrace.flush.on.ack it never passes the leader's fsynced offset:
// a consumer that sees only fsynced records never commits an offset that a
// power cut could take from the log, so committed group offsets stay at or
// below the log end recovered after one.
func highWatermark(p ledPartition) int64 {
	hw := p.log.EndOffset()
	if p.broker != nil {
		if replicated, ok := p.broker.replicationHighWatermark(p); ok {
			hw = replicated
		}
	}
	if p.log.Config().FlushOnAck {
		hw = min(hw, p.log.DurableOffset())
	}
	return hw
}

// lastStableOffset is the offset below which read_committed consumers may
// read (KIP-98): the high watermark, or the first offset of the oldest
// ongoing transaction if that is lower, so that nothing undecided is read.
// When the log cannot load its producer state it is the log start offset:
// nothing is known to be decided.
func lastStableOffset(p ledPartition) int64 {
	hw := highWatermark(p)
	first, ok, err := p.log.FirstUnstableOffset()
	switch {
	case err != nil:
		if p.broker != nil {
			p.broker.logger.Error("loading producer state for the last stable offset", "topic", p.state.Topic, "partition", p.state.Partition, "err", err)
		}
		return min(hw, p.log.StartOffset())
	case ok:
		return min(hw, first)
	}
	return hw
}

// awaitReplication decides when a Produce to p that ended at lastOffset is
// acknowledged: acks=1 at once, acks=-1 (all) once every ISR member has it.
// It returns the Kafka error code for the partition (NOT_ENOUGH_REPLICAS
// when the ISR is smaller than min.insync.replicas, REQUEST_TIMED_OUT when
// the wait outlasts the request's timeout) — replication work; today a lone
// broker is the whole ISR and the high watermark is its log end, so the
// answer is immediate success.
//
// With several brokers the replica manager decides (replication_leader.go).
func awaitReplication(ctx context.Context, b *Broker, p ledPartition, acks int16, lastOffset int64) int16 {
	if code := awaitDurable(ctx, b, p, lastOffset); code != 0 {
		return code
	}
	if code, ok := b.replicationAwait(ctx, p, acks, lastOffset); ok {
		return code
	}
	if acks != -1 {
		return 0
	}
	if highWatermark(p) > lastOffset {
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
// meanwhile, and fsync before they fetch past what they have
// (replication_follower.go), so the ISR's acknowledgement that follows
// means "fsynced on every ISR member".
func awaitDurable(ctx context.Context, b *Broker, p ledPartition, lastOffset int64) int16 {
	if !p.log.Config().FlushOnAck {
		return 0
	}
	err := p.log.SyncTo(ctx, lastOffset+1)
	switch {
	case err == nil:
		// The high watermark may have moved: wake the Fetches it held back.
		b.notifyData(p.state.Topic, p.state.Partition)
		return 0
	case ctx.Err() != nil:
		return kerr.RequestTimedOut.Code
	}
	code, serverFault := logErrorCode(err)
	if errors.Is(err, log.ErrOffsetOutOfRange) {
		// Truncated meanwhile: this broker lost the leadership.
		code, serverFault = kerr.NotLeaderForPartition.Code, false
	}
	if serverFault {
		b.logger.Error("fsync for an acknowledgement", "topic", p.state.Topic, "partition", p.state.Partition, "err", err)
	}
	return code
}

// logErrorCode maps an error from broker/log to a Kafka error code, and
// reports whether it is the broker's fault (worth an error log line).
func logErrorCode(err error) (code int16, serverFault bool) {
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
