package kafka

// DescribeTransactions (key 65), version 0 (KIP-664).
//
// The state of each named transactional ID this broker coordinates: its
// producer ID and epoch, timeout, state as Kafka spells it, the start of
// its transaction and the partitions it holds. An ID coordinated elsewhere
// gets NOT_COORDINATOR, one without state TRANSACTIONAL_ID_NOT_FOUND. It
// needs Describe on the transactional ID
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); topics the principal may not
// Describe are left out, as Kafka leaves them.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID = id
		s.ProducerID, s.ProducerEpoch, s.StartTimestamp = -1, -1, -1
		c, code := b.txnCoordinator()
		switch {
		case !b.authorized(r, acl.TransactionalID, id, acl.Describe):
			s.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case code != 0:
			s.ErrorCode = code
		default:
			m, code := c.Describe(id)
			if s.ErrorCode = code; code != 0 {
				break
			}
			s.State = string(m.State)
			s.TimeoutMillis = m.TimeoutMs
			s.StartTimestamp = m.StartMs
			s.ProducerID, s.ProducerEpoch = m.ProducerID, m.ProducerEpoch
			for _, topic := range sortedKeys(m.Partitions) {
				if !b.allowed(r, acl.Topic, topic, acl.Describe) {
					continue
				}
				st := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				st.Topic, st.Partitions = topic, m.Partitions[topic]
				s.Topics = append(s.Topics, st)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return resp, nil
}
