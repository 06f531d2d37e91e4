package kafka

// DeleteTopics (key 20), versions 0–6.
//
// Deletes each topic through broker/cluster. Topics are named by name, or
// from v6 by name or topic ID. An unknown name gets
// UNKNOWN_TOPIC_OR_PARTITION, an unknown ID UNKNOWN_TOPIC_ID. With one broker
// deletion is synchronous (store nodes, then the partition logs); with
// several the topic is marked for deletion and is gone for clients at once,
// while the controller finishes it once every replica deleted its data
// (possibly long after, when a replica is down). timeout_ms is not used.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
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
		if t, ok := b.cluster.Topic(name); ok && req.Version >= 6 {
			st.TopicID = t.ID
		}
		if err := b.cluster.DeleteTopic(name); err != nil {
			st.ErrorCode, st.ErrorMessage = clusterErrorCode(err)
			if !isClientError(err) {
				b.logger.Error("deleting a topic", "topic", name, "err", err)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
