package kafka

// InitProducerId (key 22), versions 0–5.
//
// Gives an idempotent producer its producer ID and epoch. IDs come from
// blocks reserved in the coordination store (producer_ids.go), so they are
// unique across brokers and restarts. A request without an ID (-1/-1) gets
// a fresh ID at epoch 0. A request that passes its current ID and epoch
// (v3+, KIP-360: the producer lost track of its sequences and wants to
// start over) gets the same ID with the epoch bumped; the partitions then
// accept the new epoch from sequence 0 and refuse the old one. When the
// epoch cannot be bumped further (it would reach MaxInt16) a fresh ID is
// handed out instead. An ID without an epoch, or the reverse, gets
// INVALID_REQUEST, as in Kafka.
//
// Transactions are not supported: a non-null transactional ID gets
// INVALID_REQUEST, the same answer FindCoordinator gives for a transaction
// coordinator. A store failure gets COORDINATOR_NOT_AVAILABLE, which clients
// retry. The transaction timeout is ignored.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(22, 0, 5, handleInitProducerID) }

func handleInitProducerID(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1

	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if (req.ProducerID < 0) != (req.ProducerEpoch < 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if req.ProducerID >= 0 && req.ProducerEpoch < math.MaxInt16-1 {
		// KIP-360 bump: same ID, next epoch.
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return resp, nil
	}
	states, ok := componentOf[*producerStates](b, producerStateComponent)
	if !ok {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	id, err := states.ids.nextID()
	if err != nil {
		b.logger.Error("allocating a producer ID", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
