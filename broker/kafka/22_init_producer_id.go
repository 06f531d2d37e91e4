package kafka

// InitProducerId (key 22), versions 0–5.
//
// Without a transactional ID, gives an idempotent producer its producer ID
// and epoch. IDs come from blocks reserved in the coordination store
// (producer_ids.go), so they are unique across brokers and restarts. Every
// such request gets a fresh ID at epoch 0, as Kafka answers every
// non-transactional InitProducerId: the producer ID and epoch a v3+ request
// may carry (KIP-360: the producer lost track of its sequences) ask for a
// bump of the same ID, which Kafka grants only to a transactional producer,
// whose transactional ID proves it owns the producer ID. Bumping any ID a
// client names would let it fence a producer it never owned.
//
// With a transactional ID, the transaction coordinator (broker/txn) answers:
// the ID's producer ID with its epoch bumped, fencing any earlier producer
// of the same ID (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before v4); a new
// producer ID when the epoch is exhausted; CONCURRENT_TRANSACTIONS while a
// transaction of the ID is being completed or aborted (an ongoing one is
// aborted first, under a bumped epoch); INVALID_TRANSACTION_TIMEOUT for a
// timeout above transaction.max.timeout.ms; NOT_COORDINATOR on a broker
// that does not coordinate the ID. It needs Write on the transactional ID.
//
// An ID without an epoch, or the reverse, gets INVALID_REQUEST, as in Kafka,
// and so does an empty transactional ID. A store failure gets
// COORDINATOR_NOT_AVAILABLE, which clients retry.
//
// Limits (Kafka has none; docs/limits.md). A transactional ID longer than
// millrace.transactional.id.max.bytes (255) gets INVALID_REQUEST before
// anything is looked up or stored: Kafka answers an ID it cannot use (an
// empty one) so, and clients treat it as fatal instead of retrying. An ID
// new to the coordinator past millrace.max.transactional.ids (10000) in
// all, or millrace.max.transactional.ids.per.principal (2000) created by
// the request's principal, gets POLICY_VIOLATION: Kafka has no error for a
// count of transactional IDs; POLICY_VIOLATION ("the request parameters do
// not satisfy the configured policy") is what millrace already answers at
// millrace.max.partitions (KIP-578's idea), it is not retriable, so a
// producer fails its initTransactions with the reason instead of retrying
// forever, and no client confuses it with a fencing or a coordinator move
// (GROUP_MAX_SIZE_REACHED, the groups' answer, names groups; the
// retriable THROTTLING_QUOTA_EXCEEDED of KIP-599 is for a rate, and would
// have clients retry against a count that only expiry lowers). IDs already
// stored are served as before. Until the coordinator has counted the
// stored IDs after a start, a new ID gets COORDINATOR_LOAD_IN_PROGRESS, as
// Kafka answers while it loads its transaction log.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/txn"
)

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1

	if (req.ProducerID < 0) != (req.ProducerEpoch < 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if req.TransactionalID != nil {
		resp.ErrorCode = initTransactionalProducer(b, r, req, resp)
		return resp, nil
	}
	// An idempotent producer needs IdempotentWrite on the cluster or, as
	// Kafka allows since KIP-679, Write on some topic.
	if !b.authorizedCluster(r, acl.IdempotentWrite) && !b.authorizedAny(r, acl.Topic, acl.Write) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	id, err := b.producerIDs.nextID()
	if err != nil {
		b.logger.Error("allocating a producer ID", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// initTransactionalProducer answers a transactional producer's
// InitProducerId, setting resp's producer ID and epoch on success.
func initTransactionalProducer(b *Broker, r *request, req *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) int16 {
	id := *req.TransactionalID
	if !b.authorized(r, acl.TransactionalID, id, acl.Write) {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	if id == "" || len(id) > b.cfg.Txn.MaxIDBytes {
		return kerr.InvalidRequest.Code
	}
	c, code := b.txnCoordinator()
	if code != 0 {
		return code
	}
	p, code := c.InitProducer(r.conn.principal, id, time.Duration(req.TransactionTimeoutMillis)*time.Millisecond,
		txn.ProducerIDAndEpoch{ID: req.ProducerID, Epoch: req.ProducerEpoch})
	if code != 0 {
		return fencedCode(code, req.Version, 4)
	}
	resp.ProducerID, resp.ProducerEpoch = p.ID, p.Epoch
	return 0
}
