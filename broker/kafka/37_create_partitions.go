package kafka

// CreatePartitions (key 37), versions 0–3.
//
// Grows topics to the requested partition count through broker/cluster,
// optionally with an explicit replica list for each new partition (one list
// per added partition, each as long as the topic's replication factor). A
// count that does not grow the topic gets INVALID_PARTITIONS, a bad
// assignment INVALID_REPLICA_ASSIGNMENT, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION, a topic listed twice INVALID_REQUEST.
// validate_only checks and changes nothing. A count above
// millrace.max.partitions.per.topic gets INVALID_PARTITIONS; once the
// request's topics (in request order) would add more than
// millrace.max.partitions.per.request partitions, or the cluster would hold
// more than millrace.max.partitions, the topic gets POLICY_VIOLATION. Both
// are checked before anything is sized from the count. timeout_ms is not used: the change
// is synchronous.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)

	twice := listedTwice(req.Topics, func(rt kmsg.CreatePartitionsRequestTopic) string { return rt.Topic })
	answered := make(map[string]bool, len(req.Topics))
	budget := int64(b.cluster.MaxPartitionsPerRequest())
	for _, rt := range req.Topics {
		if answered[rt.Topic] {
			continue
		}
		answered[rt.Topic] = true
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		if twice[rt.Topic] {
			st.ErrorCode = kerr.InvalidRequest.Code
			st.ErrorMessage = strp("the topic is listed more than once in the request")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !b.authorized(r, acl.Topic, rt.Topic, acl.Alter) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		added := int64(rt.Count)
		if t, ok := b.cluster.Topic(rt.Topic); ok {
			added -= int64(len(t.Partitions))
		}
		// A count above the per-topic limit is the cluster's to refuse
		// (INVALID_PARTITIONS); the budget is for counts valid alone.
		if added > budget && rt.Count <= b.cluster.MaxPartitionsPerTopic() {
			st.ErrorCode = kerr.PolicyViolation.Code
			st.ErrorMessage = strp(fmt.Sprintf("%d new partitions would bring the request above millrace.max.partitions.per.request (%d)", added, b.cluster.MaxPartitionsPerRequest()))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var assignment [][]int32
		if rt.Assignment != nil {
			assignment = make([][]int32, len(rt.Assignment))
			for i, a := range rt.Assignment {
				assignment[i] = a.Replicas
			}
		}
		if _, err := b.cluster.CreatePartitions(rt.Topic, rt.Count, assignment, req.ValidateOnly); err != nil {
			st.ErrorCode, st.ErrorMessage = clusterErrorCode(err)
			if !isClientError(err) {
				b.logger.Error("adding partitions", "topic", rt.Topic, "err", err)
			}
		} else {
			budget -= added
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
