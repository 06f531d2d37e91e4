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
// are checked before anything is sized from the count.
//
// As Kafka's DelayedCreatePartitions, the answer waits until this broker's
// metadata lists every grown topic with its new partitions led, at most
// timeout_ms, after which the topic gets REQUEST_TIMED_OUT while the change
// goes ahead; timeout_ms <= 0 answers at once.
//
// The partitions added count against the client's controller_mutation_rate
// (KIP-599, throttle_mutations.go): from v3 a topic over it gets
// THROTTLING_QUOTA_EXCEEDED, before that the response is throttled.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/cluster"
)

func init() { regKey(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)

	twice := listedTwice(req.Topics, func(rt kmsg.CreatePartitionsRequestTopic) string { return rt.Topic })
	answered := make(map[string]bool, len(req.Topics))
	budget := int64(b.cluster.MaxPartitionsPerRequest())
	var grown []grownTopic
	gate := b.mutations(r, 3, req.ValidateOnly)
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
		// A count the cluster refuses anyway (INVALID_PARTITIONS) mutates
		// nothing and is not counted.
		if rt.Count <= b.cluster.MaxPartitionsPerTopic() && !gate.admit(int(added)) {
			st.ErrorCode, st.ErrorMessage = quotaExceededCode, strp(quotaExceededMessage)
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
		t, err := b.cluster.CreatePartitions(rt.Topic, rt.Count, assignment, req.ValidateOnly)
		if err != nil {
			st.ErrorCode, st.ErrorMessage = clusterErrorCode(err)
			if !isClientError(err) {
				b.logger.Error("adding partitions", "topic", rt.Topic, "err", err)
			}
		} else {
			budget -= added
			if !req.ValidateOnly {
				grown = append(grown, grownTopic{len(resp.Topics), t.ID, rt.Count})
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = gate.throttleMillis()
	if req.TimeoutMillis > 0 && len(grown) > 0 {
		b.awaitGrown(ctx, req.TimeoutMillis, resp.Topics, grown)
	}
	return resp, nil
}

// grownTopic is a topic CreatePartitions grew: its answer's index, its ID
// and the partition count it now has.
type grownTopic struct {
	index int
	id    [16]byte
	count int32
}

// awaitGrown waits, at most timeoutMillis in all, until this broker's
// metadata lists every grown topic with its new partitions led; those not
// listed by then get REQUEST_TIMED_OUT.
func (b *Broker) awaitGrown(ctx context.Context, timeoutMillis int32, topics []kmsg.CreatePartitionsResponseTopic, grown []grownTopic) {
	wait, cancel := context.WithTimeout(ctx, time.Duration(timeoutMillis)*time.Millisecond)
	defer cancel()
	for _, g := range grown {
		st := &topics[g.index]
		err := b.cluster.AwaitPartitionsReady(wait, st.Topic, g.id, g.count)
		switch {
		case err == nil, errors.Is(err, cluster.ErrUnknownTopic):
			// Ready, or deleted since: the change itself succeeded.
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			st.ErrorCode = kerr.RequestTimedOut.Code
			st.ErrorMessage = strp(fmt.Sprintf("the partitions were added but not every one had a leader within timeout_ms (%d ms); the change goes ahead", timeoutMillis))
		default:
			// The connection or the broker is closing: the answer
			// does not go out.
			return
		}
	}
}
