package kafka

// Helpers shared by the transaction coordinator's handlers (22, 24, 25,
// 26, 65, 66).

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/txn"
)

// txnCoordinator returns the transaction coordinator, or the error code a
// request gets without one (a broker without a coordination store).
func (b *Broker) txnCoordinator() (*txn.Coordinator, int16) {
	if b.txn == nil {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return b.txn, 0
}

// fencedCode is PRODUCER_FENCED as a request of version v may carry it:
// the versions before fencedSince know only INVALID_PRODUCER_EPOCH, which
// Kafka answers them instead (KIP-588).
func fencedCode(code int16, v, fencedSince int16) int16 {
	if code == kerr.ProducerFenced.Code && v < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
