package kafka

// ListPartitionReassignments (key 46), version 0 (KIP-455).
//
// Lists the moves of the pending reassignment request (every one when
// topics is null, else the listed partitions that are moving): replicas is
// the partition's replica list now (during a move, old and new together),
// adding the target replicas it did not have before the move and removing
// the replicas it had that the target drops. A move written by another tool
// without its original replicas is described against the list now.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/cluster"
)

func init() { regKey(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !b.authorizedCluster(r, acl.Describe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	pending, err := cluster.PendingReassignments(b.store)
	if err != nil {
		b.logger.Error("reading partition reassignments", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		resp.ErrorMessage = strp(err.Error())
		return resp, nil
	}
	asked := func(topic string, partition int32) bool {
		if req.Topics == nil {
			return true
		}
		for _, t := range req.Topics {
			if t.Topic == topic && slices.Contains(t.Partitions, partition) {
				return true
			}
		}
		return false
	}
	for _, m := range pending {
		state, _, ok := b.cluster.Partition(m.Topic, m.Partition)
		if !ok || !asked(m.Topic, m.Partition) || sameMembers(state.Replicas, m.Replicas) {
			continue // gone, not asked for, or done (the controller drops it next)
		}
		before := m.Original
		if before == nil {
			before = state.Replicas
		}
		sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		sp.Partition = m.Partition
		sp.Replicas = slices.Clone(state.Replicas)
		sp.AddingReplicas = missingFrom(m.Replicas, before)
		sp.RemovingReplicas = missingFrom(before, m.Replicas)
		at := slices.IndexFunc(resp.Topics, func(t kmsg.ListPartitionReassignmentsResponseTopic) bool { return t.Topic == m.Topic })
		if at < 0 {
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = m.Topic
			resp.Topics = append(resp.Topics, st)
			at = len(resp.Topics) - 1
		}
		resp.Topics[at].Partitions = append(resp.Topics[at].Partitions, sp)
	}
	return resp, nil
}

// sameMembers reports whether a and b hold the same brokers, in any order.
func sameMembers(a, b []int32) bool {
	return len(a) == len(b) && len(missingFrom(a, b)) == 0
}

// missingFrom returns the members of a that b lacks, in a's order (never
// nil: the response's lists are not nullable).
func missingFrom(a, b []int32) []int32 {
	out := []int32{}
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}
