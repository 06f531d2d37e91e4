package cluster

import "errors"

// Errors returned by the metadata layer. They are wrapped with a sentence that
// names the topic and the reason, so callers test with errors.Is and may show
// err.Error() to the client as the Kafka error message.
var (
	// ErrTopicExists: CreateTopic for a name that is already taken.
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic: the topic (or topic ID) does not exist.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrInvalidTopic: the name breaks Kafka's naming rules.
	ErrInvalidTopic = errors.New("invalid topic name")
	// ErrInvalidPartitions: a partition count that is not positive, does
	// not grow the topic, or is above millrace.max.partitions.per.topic.
	ErrInvalidPartitions = errors.New("invalid partition count")
	// ErrPolicyViolation: a creation that would go beyond a broker limit
	// other than the per-topic partition count (millrace.max.partitions,
	// millrace.max.partitions.per.request).
	ErrPolicyViolation = errors.New("policy violation")
	// ErrInvalidReplicationFactor: not positive, or more than the live brokers.
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")
	// ErrInvalidReplicaAssignment: an explicit assignment with gaps, duplicate
	// or unknown brokers, or uneven replica counts.
	ErrInvalidReplicaAssignment = errors.New("invalid replica assignment")
	// ErrInvalidConfig: an unknown topic config name or a bad value.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrClosed: the cluster was closed.
	ErrClosed = errors.New("cluster closed")
)
