package kafka

// ListTransactions (key 66), versions 0–1 (KIP-664).
//
// The transactional IDs this broker coordinates (an admin client asks
// every broker), those the principal may Describe, filtered by state and
// producer ID when the request names any and, from v1, to transactions
// running longer than duration_filter_millis (Kafka's rule: now minus the
// transaction's start). A state filter Kafka does not know is echoed in
// unknown_state_filters and matches nothing. v2's ID pattern (a Java
// regular expression) is not served.

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/txn"
)

func init() { regKey(66, 0, 1, handleListTransactions) }

// txnStates are the states a ListTransactions filter may name.
var txnStates = []txn.State{txn.Empty, txn.Ongoing, txn.PrepareCommit, txn.PrepareAbort, txn.CompleteCommit, txn.CompleteAbort, txn.Dead}

func handleListTransactions(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []txn.State
	for _, f := range req.StateFilters {
		if s := txn.State(f); slices.Contains(txnStates, s) {
			states = append(states, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
		}
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		return resp, nil // nothing can match
	}
	c, code := b.txnCoordinator()
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	list, code := c.List(states, req.ProducerIDFilters)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	now := time.Now().UnixMilli()
	for _, m := range list {
		if req.Version >= 1 && req.DurationFilterMillis >= 0 && now-m.StartMs <= req.DurationFilterMillis {
			continue
		}
		if !b.allowed(r, acl.TransactionalID, m.TransactionalID, acl.Describe) {
			continue
		}
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.TransactionState = m.TransactionalID, m.ProducerID, string(m.State)
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return resp, nil
}
