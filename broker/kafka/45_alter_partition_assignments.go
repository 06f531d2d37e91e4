package kafka

// AlterPartitionReassignments (key 45), versions 0–1 (KIP-455).
//
// Each listed partition with a replica list starts moving onto it, or gets
// it as its new target when it is already moving; a null list cancels the
// partition's move, which then goes back to the replicas it had before.
// The moves are written to the reassignment request in the coordination
// store (cluster.AlterReassignments), which the controller carries out, so
// any broker may take the request and it returns once it is recorded; list
// the progress with ListPartitionReassignments. A single broker only checks
// the moves: each valid one is already done. Per partition:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty list, a
// repeated broker, a broker that is not live), NO_REASSIGNMENT_IN_PROGRESS
// (a cancel of a partition that is not moving), INVALID_REQUEST (a
// partition listed twice), and with v1's allow_replication_factor_change
// false, INVALID_REPLICATION_FACTOR for a list whose length differs from
// the partition's replica count.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/cluster"
)

func init() { regKey(45, 0, 1, handleAlterPartitionAssignments) }

func handleAlterPartitionAssignments(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !b.authorizedCluster(r, acl.Alter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	type key struct {
		topic     string
		partition int32
	}
	var listed []key
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			listed = append(listed, key{rt.Topic, rp.Partition})
		}
	}
	twice := listedTwice(listed, func(k key) key { return k })
	var (
		moves   []cluster.Reassignment
		answers []*kmsg.AlterPartitionAssignmentsResponseTopicPartition // each move's, answered below
	)
	// Sized up front: answers point into these slices.
	resp.Topics = make([]kmsg.AlterPartitionAssignmentsResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.AlterPartitionAssignmentsResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case twice[key{rt.Topic, rp.Partition}]:
				sp.ErrorCode = kerr.InvalidRequest.Code
				sp.ErrorMessage = strp("partition listed more than once")
			case rp.Replicas != nil && req.Version >= 1 && !req.AllowReplicationFactorChange && b.changesReplicationFactor(rt.Topic, rp.Partition, rp.Replicas):
				sp.ErrorCode = kerr.InvalidReplicationFactor.Code
				sp.ErrorMessage = strp("the target changes the replication factor, which the request does not allow")
			default:
				moves = append(moves, cluster.Reassignment{Topic: rt.Topic, Partition: rp.Partition, Replicas: rp.Replicas})
				answers = append(answers, sp)
			}
		}
	}
	if len(moves) == 0 {
		return resp, nil
	}
	errs, err := b.cluster.AlterReassignments(moves)
	if err != nil {
		b.logger.Error("recording partition reassignments", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		resp.ErrorMessage = strp(err.Error())
		return resp, nil
	}
	for i, m := range moves {
		answers[i].ErrorCode, answers[i].ErrorMessage = clusterErrorCode(errs[i])
		if errs[i] == nil {
			b.logger.Info("partition reassignment requested", "topic", m.Topic, "partition", m.Partition,
				"replicas", fmt.Sprint(m.Replicas), "cancel", m.Replicas == nil)
		}
	}
	return resp, nil
}

// changesReplicationFactor reports whether target has another length than
// the partition's replica list (unknown partitions are left to the
// reassignment's own checks).
func (b *Broker) changesReplicationFactor(topic string, partition int32, target []int32) bool {
	state, _, ok := b.cluster.Partition(topic, partition)
	return ok && len(state.Replicas) != len(target)
}
