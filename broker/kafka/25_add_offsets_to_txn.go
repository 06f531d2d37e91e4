package kafka

// AddOffsetsToTxn (key 25), versions 0–4.
//
// A transactional producer names the consumer group whose offsets its
// transaction will commit (TxnOffsetCommit, sent to the group's
// coordinator), so that the transaction's markers complete them. It needs
// Write on the transactional ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
// and Read on the group (GROUP_AUTHORIZATION_FAILED). The coordinator's
// answers are AddPartitionsToTxn's (PRODUCER_FENCED is
// INVALID_PRODUCER_EPOCH before v2).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/txn"
)

func init() { regKey(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !b.authorized(r, acl.TransactionalID, req.TransactionalID, acl.Write):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.authorized(r, acl.Group, req.Group, acl.Read):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case !b.groups.ValidGroupID(req.Group):
		resp.ErrorCode = kerr.InvalidGroupID.Code
	default:
		c, code := b.txnCoordinator()
		if code == 0 {
			code = c.AddGroup(req.TransactionalID, txn.ProducerIDAndEpoch{ID: req.ProducerID, Epoch: req.ProducerEpoch}, req.Group)
		}
		resp.ErrorCode = fencedCode(code, req.Version, 2)
	}
	return resp, nil
}
