package replica

import "errors"

// KafkaError is a produce or fetch outcome the caller returns to the client
// as the Kafka error code Code. Decisions carry these values; compare with
// errors.Is against the variables below.
type KafkaError struct {
	Code    int16
	Name    string
	Message string
}

func (e *KafkaError) Error() string { return e.Name + ": " + e.Message }

// Outcomes of acks=all produce requests and follower fetches.
var (
	// ErrNotLeaderOrFollower (6): this broker is no longer the partition's
	// leader; the client refreshes metadata and retries elsewhere.
	ErrNotLeaderOrFollower = &KafkaError{6, "NOT_LEADER_OR_FOLLOWER", "this broker is not the leader of the partition"}
	// ErrNotEnoughReplicas (19): acks=all was refused before appending
	// because the ISR is smaller than min.insync.replicas.
	ErrNotEnoughReplicas = &KafkaError{19, "NOT_ENOUGH_REPLICAS", "the in-sync replica set is smaller than min.insync.replicas"}
	// ErrNotEnoughReplicasAfterAppend (20): the records were appended, but
	// the ISR shrank below min.insync.replicas before they were replicated.
	ErrNotEnoughReplicasAfterAppend = &KafkaError{20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "the in-sync replica set shrank below min.insync.replicas after the append"}
	// ErrFencedLeaderEpoch (74): a fetch carried an older leader epoch.
	ErrFencedLeaderEpoch = &KafkaError{74, "FENCED_LEADER_EPOCH", "the request's leader epoch is older than the leader's"}
	// ErrUnknownLeaderEpoch (75): a fetch carried a newer leader epoch than
	// this leader knows; the leader has not caught up with the controller yet.
	ErrUnknownLeaderEpoch = &KafkaError{75, "UNKNOWN_LEADER_EPOCH", "the request's leader epoch is newer than the leader's"}
	// ErrOffsetOutOfRange (1): a follower fetched beyond the leader's log end.
	ErrOffsetOutOfRange = &KafkaError{1, "OFFSET_OUT_OF_RANGE", "the fetch offset is beyond the leader's log end offset"}
	// ErrReplicaNotAvailable (9): the fetching broker is not a replica of
	// the partition.
	ErrReplicaNotAvailable = &KafkaError{9, "REPLICA_NOT_AVAILABLE", "the fetching broker is not a replica of the partition"}
)

// ErrInvalidEvent is wrapped by errors for events that contradict the state
// machine's state (a leader state without the leader in its ISR, a stale
// epoch, an ISR result for a proposal that is not in flight). They mean a
// bug or a race in the caller; the state is left unchanged.
var ErrInvalidEvent = errors.New("replica: invalid event")
