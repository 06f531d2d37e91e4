package kafka

// InitProducerId (key 22), versions 0–5.
//
// Gives an idempotent producer its producer ID and epoch. IDs come from
// blocks reserved in the coordination store (producer_ids.go), so they are
// unique across brokers and restarts. Every request gets a fresh ID at
// epoch 0, as Kafka answers every non-transactional InitProducerId: the
// producer ID and epoch a v3+ request may carry (KIP-360: the producer lost
// track of its sequences) ask for a bump of the same ID, which Kafka grants
// only to a transactional producer, whose transactional ID proves it owns
// the producer ID. Bumping any ID a client names would let it fence a
// producer it never owned. An ID without an epoch, or the reverse, gets
// INVALID_REQUEST, as in Kafka.
//
// Transactions are not supported: a non-null transactional ID gets
// INVALID_REQUEST, the same answer FindCoordinator gives for a transaction
// coordinator. A store failure gets COORDINATOR_NOT_AVAILABLE, which clients
// retry. The transaction timeout is ignored.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1

	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		if !b.authorized(r, acl.TransactionalID, *req.TransactionalID, acl.Write) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		}
		return resp, nil
	}
	// An idempotent producer needs IdempotentWrite on the cluster or, as
	// Kafka allows since KIP-679, Write on some topic.
	if !b.authorizedCluster(r, acl.IdempotentWrite) && !b.authorizedAny(r, acl.Topic, acl.Write) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if (req.ProducerID < 0) != (req.ProducerEpoch < 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
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
