package kafka

// CreateTopics (key 19), versions 0–7.
//
// Creates each topic through broker/cluster: a partition count and
// replication factor (-1 for the broker defaults num.partitions and
// default.replication.factor, v4+), or an explicit replica assignment (then
// both must be -1), plus config overrides validated by broker/log (unknown
// names and bad values get INVALID_CONFIG; a null value too). A replication
// factor above the number of live brokers gets INVALID_REPLICATION_FACTOR.
// validate_only (v1+) checks everything and creates nothing. From v5 a
// successful topic's response carries its partition count, replication
// factor and effective configs; from v7 its topic ID. A name listed twice in
// one request gets INVALID_REQUEST.
//
// Partition counts are bounded before anything is sized from them: a topic
// above millrace.max.partitions.per.topic gets INVALID_PARTITIONS, and once
// the request's topics (in request order, validate_only or not) would add
// more than millrace.max.partitions.per.request, or the cluster would hold
// more than millrace.max.partitions, the topic gets POLICY_VIOLATION; the
// message names the limit.
//
// As Kafka (DelayedCreateTopics), the answer waits until this broker's
// metadata lists each created topic with every partition led by a live
// broker, so a Metadata request that follows never sees the topic partly;
// at most timeout_ms, after which the topic gets REQUEST_TIMED_OUT while its
// creation goes ahead. timeout_ms <= 0 answers at once, as Kafka. The wait
// is on the model's change notification (cluster.AwaitTopicReady), not a
// poll. The handler stays ordered (regKey) although it may wait: Kafka reads
// nothing more from a connection until its request is answered, so a
// Metadata pipelined behind CreateTopics sees the topic; the wait holds only
// this connection, and is short, since this broker's model holds the topic
// when the creation returns.
//
// Each topic's partitions count against the client's
// controller_mutation_rate (KIP-599, throttle_mutations.go): from v6 a
// topic over it gets THROTTLING_QUOTA_EXCEEDED, before that the response is
// throttled.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
)

func init() { regKey(19, 0, 7, handleCreateTopics) }

func handleCreateTopics(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	twice := listedTwice(req.Topics, func(rt kmsg.CreateTopicsRequestTopic) string { return rt.Topic })
	answered := make(map[string]bool, len(req.Topics))
	budget := int64(b.cluster.MaxPartitionsPerRequest())
	var created []int // indexes in resp.Topics of the topics created
	gate := b.mutations(r, 6, req.ValidateOnly)
	for _, rt := range req.Topics {
		if answered[rt.Topic] {
			continue
		}
		answered[rt.Topic] = true
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		if twice[rt.Topic] {
			st.ErrorCode = kerr.InvalidRequest.Code
			st.ErrorMessage = strp("the topic is listed more than once in the request")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if !b.mayCreateTopic(r, rt.Topic) {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		requested := int64(rt.NumPartitions)
		switch {
		case len(rt.ReplicaAssignment) > 0:
			requested = int64(len(rt.ReplicaAssignment))
		case requested == -1:
			requested = int64(b.cfg.NumPartitions)
		}
		// A count above the per-topic limit is the cluster's to refuse
		// (INVALID_PARTITIONS); the budget is for counts valid alone.
		if requested > budget && requested <= int64(b.cluster.MaxPartitionsPerTopic()) {
			st.ErrorCode = kerr.PolicyViolation.Code
			st.ErrorMessage = strp(fmt.Sprintf("%d partitions would bring the request above millrace.max.partitions.per.request (%d)", requested, b.cluster.MaxPartitionsPerRequest()))
			resp.Topics = append(resp.Topics, st)
			continue
		}
		// A count the cluster refuses anyway (INVALID_PARTITIONS) mutates
		// nothing and is not counted.
		if requested <= int64(b.cluster.MaxPartitionsPerTopic()) && !gate.admit(int(requested)) {
			st.ErrorCode, st.ErrorMessage = quotaExceededCode, strp(quotaExceededMessage)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if b.createTopic(&st, rt, req.ValidateOnly) {
			budget -= max(requested, 0)
			if !req.ValidateOnly {
				created = append(created, len(resp.Topics))
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = gate.throttleMillis()
	if req.TimeoutMillis > 0 && len(created) > 0 {
		b.awaitCreated(ctx, req.TimeoutMillis, resp.Topics, created)
	}
	return resp, nil
}

// awaitCreated waits, at most timeoutMillis in all, until this broker's
// metadata lists every created topic whole; those not listed by then get
// REQUEST_TIMED_OUT.
func (b *Broker) awaitCreated(ctx context.Context, timeoutMillis int32, topics []kmsg.CreateTopicsResponseTopic, created []int) {
	wait, cancel := context.WithTimeout(ctx, time.Duration(timeoutMillis)*time.Millisecond)
	defer cancel()
	for _, i := range created {
		st := &topics[i]
		err := b.cluster.AwaitTopicReady(wait, st.Topic, st.TopicID)
		switch {
		case err == nil, errors.Is(err, cluster.ErrUnknownTopic):
			// Ready, or deleted or re-created since: the creation
			// itself succeeded.
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			st.ErrorCode = kerr.RequestTimedOut.Code
			st.ErrorMessage = strp(fmt.Sprintf("the topic was created but not every partition had a leader within timeout_ms (%d ms); the creation goes ahead", timeoutMillis))
		default:
			// The connection or the broker is closing: the answer
			// does not go out.
			return
		}
	}
}

// createTopic creates (or validates) one topic into its response entry and
// reports whether it succeeded.
func (b *Broker) createTopic(st *kmsg.CreateTopicsResponseTopic, rt kmsg.CreateTopicsRequestTopic, validateOnly bool) bool {
	spec := cluster.TopicSpec{
		Name:              rt.Topic,
		Partitions:        rt.NumPartitions,
		ReplicationFactor: rt.ReplicationFactor,
		Config:            make(map[string]string, len(rt.Configs)),
	}
	for _, c := range rt.Configs {
		if c.Value == nil {
			st.ErrorCode = kerr.InvalidConfig.Code
			st.ErrorMessage = strp("config " + c.Name + " has a null value; leave it out to use the default")
			return false
		}
		spec.Config[c.Name] = *c.Value
	}
	if len(rt.ReplicaAssignment) > 0 {
		spec.Assignment = make(map[int32][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if _, dup := spec.Assignment[a.Partition]; dup {
				st.ErrorCode = kerr.InvalidReplicaAssignment.Code
				st.ErrorMessage = strp("the replica assignment lists a partition twice")
				return false
			}
			spec.Assignment[a.Partition] = a.Replicas
		}
	}
	t, err := b.cluster.CreateTopic(spec, validateOnly)
	if err != nil {
		st.ErrorCode, st.ErrorMessage = clusterErrorCode(err)
		if !isClientError(err) {
			b.logger.Error("creating a topic", "topic", rt.Topic, "err", err)
		}
		return false
	}
	if !validateOnly {
		st.TopicID = t.ID
		b.warnIgnoredTopicConfigs(rt.Topic, t.Config)
	}
	st.NumPartitions = int32(len(t.Partitions))
	st.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
	for _, e := range plannedTopicEntries(b, t.Config) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.Source = e.name, strp(e.value), e.source
		st.Configs = append(st.Configs, c)
	}
	return true
}
