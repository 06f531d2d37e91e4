package kafka

// EndTxn (key 26), versions 0–4.
//
// A transactional producer commits or aborts its transaction. The
// coordinator (broker/txn) writes the decision to the coordination store
// before answering; the markers follow on every partition and group of the
// transaction, and the producer's next transaction gets
// CONCURRENT_TRANSACTIONS until they are written. A retried EndTxn of a
// decided transaction gets the same answer; the opposite decision, or an
// EndTxn with no transaction, gets INVALID_TXN_STATE. It needs Write on the
// transactional ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); PRODUCER_FENCED
// is INVALID_PRODUCER_EPOCH before v2. Version 5 (KIP-890 part 2: an epoch
// bump with every transaction) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/txn"
)

func init() { regKey(26, 0, 4, handleEndTxn) }

func handleEndTxn(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !b.authorized(r, acl.TransactionalID, req.TransactionalID, acl.Write) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	c, code := b.txnCoordinator()
	if code == 0 {
		code = c.EndTransaction(req.TransactionalID, txn.ProducerIDAndEpoch{ID: req.ProducerID, Epoch: req.ProducerEpoch}, req.Commit)
	}
	resp.ErrorCode = fencedCode(code, req.Version, 2)
	return resp, nil
}
