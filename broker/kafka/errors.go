package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/cluster"
)

// clusterErrorCode maps an error from broker/cluster to a Kafka error code
// and the message to send with it. Anything unrecognised is a store or disk
// failure: UNKNOWN_SERVER_ERROR, with the detail logged by the caller.
func clusterErrorCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	var code int16
	switch {
	case errors.Is(err, cluster.ErrTopicExists):
		code = kerr.TopicAlreadyExists.Code
	case errors.Is(err, cluster.ErrUnknownTopic):
		code = kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, cluster.ErrInvalidTopic):
		code = kerr.InvalidTopicException.Code
	case errors.Is(err, cluster.ErrInvalidPartitions):
		code = kerr.InvalidPartitions.Code
	case errors.Is(err, cluster.ErrInvalidReplicationFactor):
		code = kerr.InvalidReplicationFactor.Code
	case errors.Is(err, cluster.ErrInvalidReplicaAssignment):
		code = kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, cluster.ErrPolicyViolation):
		code = kerr.PolicyViolation.Code
	case errors.Is(err, cluster.ErrInvalidConfig):
		code = kerr.InvalidConfig.Code
	case errors.Is(err, cluster.ErrInvalidBrokerConfig):
		// Kafka answers a read-only or bad broker config this way
		// (ConfigException on a broker resource).
		code = kerr.InvalidRequest.Code
	case errors.Is(err, cluster.ErrNoReassignmentInProgress):
		code = kerr.NoReassignmentInProgress.Code
	case errors.Is(err, cluster.ErrElectionNotNeeded):
		code = kerr.ElectionNotNeeded.Code
	case errors.Is(err, cluster.ErrPreferredLeaderNotAvailable):
		code = kerr.PreferredLeaderNotAvailable.Code
	case errors.Is(err, cluster.ErrEligibleLeadersNotAvailable):
		code = kerr.EligibleLeadersNotAvailable.Code
	default:
		code = kerr.UnknownServerError.Code
	}
	return code, &msg
}

// isClientError reports whether err is the client's fault (not worth an
// error log line).
func isClientError(err error) bool {
	code, _ := clusterErrorCode(err)
	return code != kerr.UnknownServerError.Code
}

func strp(s string) *string { return &s }

// listedTwice reports the items a request lists more than once, by key;
// Kafka answers each of those with INVALID_REQUEST.
func listedTwice[K comparable, R any](items []R, key func(R) K) map[K]bool {
	seen := make(map[K]bool, len(items))
	twice := make(map[K]bool)
	for _, it := range items {
		k := key(it)
		twice[k] = twice[k] || seen[k]
		seen[k] = true
	}
	return twice
}
