package kafka

// AddPartitionsToTxn (key 24), versions 0–5.
//
// v0–v3 are a transactional producer's: before its first record to a
// partition in a transaction it names the partition here, so the
// coordinator (broker/txn) knows where to write the transaction's markers.
// It needs Write on the transactional ID
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition) and on each
// topic (TOPIC_AUTHORIZATION_FAILED); a partition that does not exist gets
// UNKNOWN_TOPIC_OR_PARTITION; when any partition fails, the others get
// OPERATION_NOT_ATTEMPTED and none is added, as in Kafka. Otherwise every
// partition gets the coordinator's answer: none, NOT_COORDINATOR,
// CONCURRENT_TRANSACTIONS while the previous transaction completes,
// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
// before v2).
//
// v4+ is the brokers' batched form (KIP-890): several transactional IDs
// per request, each either added as above or, with verify_only, checked:
// a partition the ID's ongoing transaction holds gets no error, any other
// INVALID_TXN_STATE. It needs ClusterAction on the cluster
// (CLUSTER_AUTHORIZATION_FAILED at the top level), as Kafka requires of
// inter-broker requests.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/txn"
)

func init() { regKey(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		topics := make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
		codes := addPartitionsToTxn(b, r, req.TransactionalID, txn.ProducerIDAndEpoch{ID: req.ProducerID, Epoch: req.ProducerEpoch}, topics, true, req.Version)
		for _, topic := range sortedKeys(codes) {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = topic
			for _, p := range sortedKeys(codes[topic]) {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[topic][p]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	if !b.authorizedCluster(r, acl.ClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, t := range req.Transactions {
		topics := make(map[string][]int32, len(t.Topics))
		for _, rt := range t.Topics {
			topics[rt.Topic] = append(topics[rt.Topic], rt.Partitions...)
		}
		p := txn.ProducerIDAndEpoch{ID: t.ProducerID, Epoch: t.ProducerEpoch}
		var codes map[string]map[int32]int16
		if t.VerifyOnly {
			codes = verifyPartitionsInTxn(b, t.TransactionalID, p, topics)
		} else {
			codes = addPartitionsToTxn(b, r, t.TransactionalID, p, topics, false, req.Version)
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = t.TransactionalID
		for _, topic := range sortedKeys(codes) {
			rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rtt.Topic = topic
			for _, p := range sortedKeys(codes[topic]) {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[topic][p]
				rtt.Partitions = append(rtt.Partitions, rp)
			}
			rt.Topics = append(rt.Topics, rtt)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp, nil
}

// addPartitionsToTxn adds topics' partitions to transactional ID id's
// transaction and returns each partition's code; checkTopics checks Write
// on each topic (a producer's request; a broker's has ClusterAction).
func addPartitionsToTxn(b *Broker, r *request, id string, p txn.ProducerIDAndEpoch, topics map[string][]int32, checkTopics bool, version int16) map[string]map[int32]int16 {
	codes := make(map[string]map[int32]int16, len(topics))
	all := func(code int16) map[string]map[int32]int16 {
		for t, ps := range topics {
			codes[t] = make(map[int32]int16, len(ps))
			for _, pt := range ps {
				codes[t][pt] = code
			}
		}
		return codes
	}
	if !b.authorized(r, acl.TransactionalID, id, acl.Write) {
		return all(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	c, code := b.txnCoordinator()
	if code != 0 {
		return all(code)
	}
	failed := false
	all(0)
	for t, ps := range topics {
		topicCode := int16(0)
		if checkTopics && !b.authorized(r, acl.Topic, t, acl.Write) {
			topicCode = kerr.TopicAuthorizationFailed.Code
		}
		for _, pt := range ps {
			code := topicCode
			if _, _, ok := b.cluster.Partition(t, pt); code == 0 && !ok {
				code = kerr.UnknownTopicOrPartition.Code
			}
			codes[t][pt] = code
			failed = failed || code != 0
		}
	}
	if failed {
		for t, ps := range codes {
			for pt, code := range ps {
				if code == 0 {
					codes[t][pt] = kerr.OperationNotAttempted.Code
				}
			}
		}
		return codes
	}
	return all(fencedCode(c.AddPartitions(id, p, topics), version, 2))
}

// verifyPartitionsInTxn answers a verify_only transaction of the batched
// form.
func verifyPartitionsInTxn(b *Broker, id string, p txn.ProducerIDAndEpoch, topics map[string][]int32) map[string]map[int32]int16 {
	c, code := b.txnCoordinator()
	var verified map[string]map[int32]int16
	if code == 0 {
		verified, code = c.VerifyPartitions(id, p, topics)
	}
	codes := make(map[string]map[int32]int16, len(topics))
	for t, ps := range topics {
		codes[t] = make(map[int32]int16, len(ps))
		for _, pt := range ps {
			if code != 0 {
				codes[t][pt] = code
			} else {
				codes[t][pt] = verified[t][pt]
			}
		}
	}
	return codes
}

// sortedKeys returns m's keys in order, so answers list topics and
// partitions the same way every time.
func sortedKeys[K string | int32, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
