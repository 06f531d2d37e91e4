package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTransactionAPIs drives the coordinator's APIs with raw requests: a
// partition that does not exist holds the others back, the brokers'
// verify_only form answers whether the transaction holds a partition, the
// old versions get INVALID_PRODUCER_EPOCH for a fenced producer, and
// Describe/ListTransactions show the result.
func TestTransactionAPIs(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("t", 2, nil)
	c := dial(t, tb.addr)
	corr := int32(0)
	next := func() int32 { corr++; return corr }

	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	init.TransactionalID = strp("tx")
	init.TransactionTimeoutMillis = 60000
	init.ProducerID, init.ProducerEpoch = -1, -1
	ir := c.roundTrip(init, next()).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %d", ir.ErrorCode)
	}
	pid, epoch := ir.ProducerID, ir.ProducerEpoch

	add := func(version int16, partitions ...int32) map[int32]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.SetVersion(version)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx", pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = "t", partitions
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{rt}
		resp := c.roundTrip(req, next()).(*kmsg.AddPartitionsToTxnResponse)
		out := map[int32]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[rp.Partition] = rp.ErrorCode
			}
		}
		return out
	}
	verify := func(partitions ...int32) map[int32]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.SetVersion(5)
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "tx", pid, epoch, true
		tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		tt.Topic, tt.Partitions = "t", partitions
		tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{tt}
		req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
		resp := c.roundTrip(req, next()).(*kmsg.AddPartitionsToTxnResponse)
		out := map[int32]int16{}
		for _, rtx := range resp.Transactions {
			for _, rt := range rtx.Topics {
				for _, rp := range rt.Partitions {
					out[rp.Partition] = rp.ErrorCode
				}
			}
		}
		return out
	}

	if got := add(3, 0, 9); got[0] != kerr.OperationNotAttempted.Code || got[9] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("adding an unknown partition: %v", got)
	}
	if got := verify(0); got[0] != kerr.InvalidTxnState.Code {
		t.Fatalf("verifying a partition never added: %v", got)
	}
	if got := add(3, 0); got[0] != 0 {
		t.Fatalf("adding partition 0: %v", got)
	}
	if got := verify(0, 1); got[0] != 0 || got[1] != kerr.InvalidTxnState.Code {
		t.Fatalf("verifying partitions 0 and 1: %v", got)
	}
	epoch++ // a stale epoch from here on: the producer is someone else's
	if got := add(1, 1); got[1] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v1 with a stale epoch: %v", got)
	}
	if got := add(3, 1); got[1] != kerr.ProducerFenced.Code {
		t.Fatalf("v3 with a stale epoch: %v", got)
	}
	epoch--

	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{"tx", "none"}
	dr := c.roundTrip(describe, next()).(*kmsg.DescribeTransactionsResponse)
	if len(dr.TransactionStates) != 2 {
		t.Fatalf("DescribeTransactions: %+v", dr)
	}
	if s := dr.TransactionStates[0]; s.ErrorCode != 0 || s.State != "Ongoing" || s.ProducerID != pid ||
		len(s.Topics) != 1 || s.Topics[0].Topic != "t" || len(s.Topics[0].Partitions) != 1 || s.StartTimestamp <= 0 {
		t.Fatalf("described tx: %+v", s)
	}
	if s := dr.TransactionStates[1]; s.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("described an unknown ID: %+v", s)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(3)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "tx", pid, epoch, false
	if er := c.roundTrip(end, next()).(*kmsg.EndTxnResponse); er.ErrorCode != 0 {
		t.Fatalf("EndTxn abort: %d", er.ErrorCode)
	}
	end.Commit = true
	if er := c.roundTrip(end, next()).(*kmsg.EndTxnResponse); er.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("EndTxn commit after abort: %d", er.ErrorCode)
	}

	list := kmsg.NewPtrListTransactionsRequest()
	list.SetVersion(1)
	list.DurationFilterMillis = -1
	list.StateFilters = []string{"PrepareAbort", "CompleteAbort", "Bogus"}
	lr := c.roundTrip(list, next()).(*kmsg.ListTransactionsResponse)
	if lr.ErrorCode != 0 || len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != "tx" ||
		len(lr.UnknownStateFilters) != 1 || lr.UnknownStateFilters[0] != "Bogus" {
		t.Fatalf("ListTransactions: %+v", lr)
	}
	list.StateFilters = []string{"Ongoing"}
	if lr := c.roundTrip(list, next()).(*kmsg.ListTransactionsResponse); len(lr.TransactionStates) != 0 {
		t.Fatalf("ListTransactions Ongoing: %+v", lr)
	}
}
