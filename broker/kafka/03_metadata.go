package kafka

// Metadata (key 3), versions 0–12.
//
// Lists the live brokers, the cluster ID, the controller and the requested
// topics (all topics for a null list, or an empty list at v0) with their
// partitions' leaders, leader epochs (v7+), replicas, ISR and offline replicas
// (v5+: replicas on dead brokers, and this broker where its log of the
// partition refuses appends after a failed write), and topic IDs (v10+). Topics may be named by ID from v10; an unknown
// ID gets UNKNOWN_TOPIC_ID.
//
// A missing topic is created with the broker defaults (num.partitions,
// default.replication.factor) when auto.create.topics.enable is on and the
// request allows it (allow_auto_topic_creation, v4+; always before v4). As in
// Kafka, the request that creates a topic gets LEADER_NOT_AVAILABLE for it
// with no partitions, and the client asks again: a client that only looks
// (kafka-go's ReadPartitions right after deleting a topic) sees no
// partitions, never a topic that appeared under its feet. An invalid name gets
// INVALID_TOPIC_EXCEPTION; a missing topic without auto-creation gets
// UNKNOWN_TOPIC_OR_PARTITION. One request auto-creates at most
// millrace.max.partitions.per.request partitions, as CreateTopics: topics
// beyond that get UNKNOWN_TOPIC_OR_PARTITION (a later request may create
// them), and the cluster at most millrace.max.partitions (POLICY_VIOLATION).
//
// Brokers are listed with their address on the listener the request came in
// on; a broker without that listener is left out, and partitions it leads get
// LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE before v6), as in Kafka.
//
// With an authorizer, topics the principal may not Describe are left out of
// an all-topics answer and get TOPIC_AUTHORIZATION_FAILED when named (by
// name or ID), and auto-creation needs Create on the cluster or the topic
// (TOPIC_AUTHORIZATION_FAILED otherwise), as in Kafka (authorizeMetadata).
//
// A topic is never listed without its partitions, as Kafka's metadata
// cache: one whose assignment names none (written to the store by another
// tool) is left out of an all-topics answer and gets
// UNKNOWN_TOPIC_OR_PARTITION when named; a partition without a live leader
// is listed with LEADER_NOT_AVAILABLE.
//
// Authorized operations (v8+) are reported only when asked for: every
// operation without an authorizer, else those the ACLs allow. Version 13
// (top-level error code) is not served.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/log"
)

func init() { regKey(3, 0, 12, handleMetadata) }

// Kafka's ACL operation codes, for authorized-operation bit sets (KIP-430).
const (
	aclRead            = 3
	aclWrite           = 4
	aclCreate          = 5
	aclDelete          = 6
	aclAlter           = 7
	aclDescribe        = 8
	aclClusterAction   = 9
	aclDescribeConfigs = 10
	aclAlterConfigs    = 11
	aclIdempotentWrite = 12
)

func opBits(ops ...int) int32 {
	var bits int32
	for _, op := range ops {
		bits |= 1 << op
	}
	return bits
}

var (
	topicOperations   = opBits(aclRead, aclWrite, aclCreate, aclDelete, aclAlter, aclDescribe, aclDescribeConfigs, aclAlterConfigs)
	clusterOperations = opBits(aclCreate, aclAlter, aclDescribe, aclClusterAction, aclDescribeConfigs, aclAlterConfigs, aclIdempotentWrite)
)

func handleMetadata(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	defer b.authorizeMetadata(r, req, resp)
	defer b.markRefusingReplicas(resp)

	brokers := b.cluster.Brokers()
	live := make(map[int32]bool, len(brokers))
	listener := b.listenerOf(r)
	reachable := make(map[int32]bool, len(brokers))
	for _, info := range brokers {
		live[info.ID] = true
		host, port, ok := advertisedOn(info, listener)
		if !ok {
			continue
		}
		reachable[info.ID] = true
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = info.ID, host, port
		if info.Rack != "" {
			rb.Rack = strp(info.Rack)
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	resp.ClusterID = strp(b.cluster.ClusterID())
	resp.ControllerID = b.cluster.ControllerID()
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterOperations
	}

	allTopics := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	if allTopics {
		for _, t := range b.cluster.Topics() {
			if len(t.Partitions) == 0 {
				continue
			}
			resp.Topics = append(resp.Topics, metadataTopic(t, live, reachable, req.Version, req.IncludeTopicAuthorizedOperations))
		}
		return resp, nil
	}

	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	budget := int64(b.cluster.MaxPartitionsPerRequest())
	seenNames := make(map[string]bool)
	seenIDs := make(map[[16]byte]bool)
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			if seenIDs[rt.TopicID] {
				continue
			}
			seenIDs[rt.TopicID] = true
			t, ok := b.cluster.TopicByID(rt.TopicID)
			if !ok || len(t.Partitions) == 0 {
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode, mt.TopicID = kerr.UnknownTopicID.Code, rt.TopicID
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, metadataTopic(t, live, reachable, req.Version, req.IncludeTopicAuthorizedOperations))
			continue
		}
		name := *rt.Topic
		if seenNames[name] {
			continue
		}
		seenNames[name] = true
		if b.metadataTopicDenied(r, name, autoCreate) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = strp(name), kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		t, created, err := b.metadataLookup(name, autoCreate && budget >= int64(b.cfg.NumPartitions))
		if created {
			budget -= int64(b.cfg.NumPartitions)
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = strp(name)
			mt.ErrorCode, _ = clusterErrorCode(err)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if created {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = strp(name), kerr.LeaderNotAvailable.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, metadataTopic(t, live, reachable, req.Version, req.IncludeTopicAuthorizedOperations))
	}
	return resp, nil
}

// metadataLookup finds a topic, creating it with the defaults when
// autoCreate allows; created reports whether this call created it.
func (b *Broker) metadataLookup(name string, autoCreate bool) (t *cluster.Topic, created bool, err error) {
	if t, ok := b.cluster.Topic(name); ok {
		if len(t.Partitions) == 0 {
			return nil, false, fmt.Errorf("%w: %q has no partitions", cluster.ErrUnknownTopic, name)
		}
		return t, false, nil
	}
	if err := cluster.ValidateTopicName(name); err != nil {
		return nil, false, err
	}
	if !autoCreate {
		return nil, false, cluster.ErrUnknownTopic
	}
	t, err = b.cluster.CreateTopic(cluster.TopicSpec{
		Name:              name,
		Partitions:        b.cfg.NumPartitions,
		ReplicationFactor: b.cfg.DefaultReplicationFactor,
	}, false)
	if errors.Is(err, cluster.ErrTopicExists) {
		// Another request created it first.
		if t, ok := b.cluster.Topic(name); ok {
			return t, false, nil
		}
		// Created elsewhere and not yet in this broker's model, or still
		// being deleted: for the client the topic is not there yet.
		return nil, false, fmt.Errorf("%w: %v", cluster.ErrUnknownTopic, err)
	}
	if err != nil {
		if !isClientError(err) {
			b.logger.Error("auto-creating a topic", "topic", name, "err", err)
		}
		return nil, false, err
	}
	b.logger.Info("topic auto-created", "topic", name)
	return t, true, nil
}

// markRefusingReplicas lists this broker among the offline replicas (v5+)
// of the partitions whose log here refuses appends after a failed write, as
// Kafka lists the replicas of a log directory gone offline. Only this
// broker knows its logs: `millrace cluster status` asks every broker.
func (b *Broker) markRefusingReplicas(resp *kmsg.MetadataResponse) {
	if b.logs == nil {
		return
	}
	refusing := b.logs.Refusing()
	if len(refusing) == 0 {
		return
	}
	me := b.cfg.BrokerID
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil {
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if refusing[log.TopicPartition{Topic: *t.Topic, Partition: p.Partition}] && !slices.Contains(p.OfflineReplicas, me) {
				p.OfflineReplicas = append(p.OfflineReplicas, me)
			}
		}
	}
}

// metadataTopic describes one topic; live holds the live broker IDs and
// reachable those with the client's listener.
func metadataTopic(t *cluster.Topic, live, reachable map[int32]bool, version int16, withOps bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = strp(t.Name)
	mt.TopicID = t.ID
	if withOps {
		mt.AuthorizedOperations = topicOperations
	}
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Partition
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		for _, id := range p.Replicas {
			if !live[id] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		switch {
		case p.Leader < 0 || !live[p.Leader]:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader = -1
		case !reachable[p.Leader]:
			// The leader lacks the client's listener: a
			// misconfiguration, named as Kafka does from v6 on.
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			if version >= 6 {
				mp.ErrorCode = kerr.ListenerNotFound.Code
			}
			mp.Leader = -1
		}
		if mp.Replicas == nil {
			mp.Replicas = []int32{}
		}
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
