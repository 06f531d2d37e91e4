package kafka

// DeleteTopics (key 20), versions 0–6.
//
// Deletes each topic through broker/cluster. Topics are named by name, or
// from v6 by name or topic ID. An unknown name gets
// UNKNOWN_TOPIC_OR_PARTITION, an unknown ID UNKNOWN_TOPIC_ID. With one broker
// deletion is synchronous (store nodes, then the partition logs); with
// several the topic is marked for deletion and is gone for clients at once,
// while the controller finishes it once every replica deleted its data
// (possibly long after, when a replica is down).
//
// As Kafka (DelayedDeleteTopics), the answer waits until this broker's
// metadata no longer lists each deleted topic (nor so its partitions), at
// most timeout_ms, after which the topic gets REQUEST_TIMED_OUT while its
// deletion goes ahead; timeout_ms <= 0 answers at once. The wait is on the
// model's change notification (cluster.AwaitTopicGone) and, like
// CreateTopics', holds only this connection, in request order as Kafka.
//
// A topic's partitions count against the client's controller_mutation_rate
// (KIP-599, throttle_mutations.go): from v5 a topic over it gets
// THROTTLING_QUOTA_EXCEEDED, before that the response is throttled.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)

	topics := req.Topics
	if req.Version < 6 {
		topics = make([]kmsg.DeleteTopicsRequestTopic, 0, len(req.TopicNames))
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = strp(name)
			topics = append(topics, rt)
		}
	}
	type deleted struct {
		index int // in resp.Topics
		name  string
		id    [16]byte
	}
	var gone []deleted
	gate := b.mutations(r, 5, false)
	for _, rt := range topics {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := ""
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
		default:
			t, ok := b.cluster.TopicByID(rt.TopicID)
			if !ok {
				st.ErrorCode = kerr.UnknownTopicID.Code
				st.ErrorMessage = strp("no topic has this ID")
				resp.Topics = append(resp.Topics, st)
				continue
			}
			name = t.Name
			st.Topic = strp(name)
		}
		if !b.authorized(r, acl.Topic, name, acl.Delete) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			if rt.Topic == nil {
				st.Topic = nil // named by ID: the name is not the principal's to learn
			}
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var id [16]byte
		partitions := 0
		if t, ok := b.cluster.Topic(name); ok {
			id, partitions = t.ID, len(t.Partitions)
			if req.Version >= 6 {
				st.TopicID = t.ID
			}
		}
		if !gate.admit(partitions) {
			st.ErrorCode, st.ErrorMessage = quotaExceededCode, strp(quotaExceededMessage)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if err := b.cluster.DeleteTopic(name); err != nil {
			st.ErrorCode, st.ErrorMessage = clusterErrorCode(err)
			if !isClientError(err) {
				b.logger.Error("deleting a topic", "topic", name, "err", err)
			}
		} else {
			gone = append(gone, deleted{index: len(resp.Topics), name: name, id: id})
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = gate.throttleMillis()
	if req.TimeoutMillis <= 0 || len(gone) == 0 {
		return resp, nil
	}
	wait, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
	defer cancel()
	for _, d := range gone {
		err := b.cluster.AwaitTopicGone(wait, d.name, d.id)
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			st := &resp.Topics[d.index]
			st.ErrorCode = kerr.RequestTimedOut.Code
			st.ErrorMessage = strp(fmt.Sprintf("the topic was still listed after timeout_ms (%d ms); the deletion goes ahead", req.TimeoutMillis))
		default:
			// The connection or the broker is closing: the answer
			// does not go out.
			return resp, nil
		}
	}
	return resp, nil
}
