package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// TestTransactionVerificationRace (KIP-890): the coordinator verifies a
// transaction's first batch on a partition, and the transaction ends (its
// marker written to the partition) before the batch is appended: the batch
// is refused with INVALID_TXN_STATE and opens no transaction.
func TestTransactionVerificationRace(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("race", 1, nil)
	l := tb.partitionLog("race", 0)
	c := dial(t, tb.addr)
	corr := int32(1)
	next := func() int32 { corr++; return corr }

	id := "tx"
	pid, epoch := c.initTxnProducer(t, id, next())
	areq := kmsg.NewPtrAddPartitionsToTxnRequest()
	areq.SetVersion(3)
	areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "race", []int32{0}
	areq.Topics = append(areq.Topics, at)
	if ar := c.roundTrip(areq, next()).(*kmsg.AddPartitionsToTxnResponse); ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: error %d", ar.Topics[0].Partitions[0].ErrorCode)
	}

	spec := idempotentBatch(pid, epoch, 0, "raced")
	spec.attrs = attrTransactional
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "race"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = makeBatch(t, spec)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	// The produce handler's two steps, with the transaction's end between.
	verified := tb.broker.verifyTxnPartitions(context.Background(), req)
	if code := verified.failed["race"][0]; code != 0 {
		t.Fatalf("verification: error %d, want none (the partition is in the transaction)", code)
	}
	ereq := kmsg.NewPtrEndTxnRequest()
	ereq.SetVersion(3)
	ereq.TransactionalID, ereq.ProducerID, ereq.ProducerEpoch, ereq.Commit = id, pid, epoch, true
	if er := c.roundTrip(ereq, next()).(*kmsg.EndTxnResponse); er.ErrorCode != 0 {
		t.Fatalf("EndTxn: error %d", er.ErrorCode)
	}
	waitfor.Until(t, 10*time.Second, "the commit marker", func() bool { return l.EndOffset() == 1 })
	sp := kmsg.NewProduceResponseTopicPartition()
	tb.broker.produceTo("race", 1, rp, &sp, verified.checks["race"][0])
	if sp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("batch verified before the marker, appended after: error %d, want INVALID_TXN_STATE", sp.ErrorCode)
	}
	if end := l.EndOffset(); end != 1 {
		t.Fatalf("log end %d, want 1 (the marker alone)", end)
	}
	if _, ongoing, err := l.FirstUnstableOffset(); err != nil || ongoing {
		t.Fatalf("the refused batch opened a transaction (%v)", err)
	}
}

// TestVerificationCode: each translation Kafka's AddPartitionsToTxnManager
// and ReplicaManager make of a coordinator's verification answer.
func TestVerificationCode(t *testing.T) {
	for _, tc := range []struct {
		name          string
		code, version int16
		want          int16
	}{
		{"verified", 0, 9, 0},
		{"fenced producer", kerr.ProducerFenced.Code, 9, kerr.InvalidProducerEpoch.Code},
		{"fenced producer, Produce v13", kerr.ProducerFenced.Code, 13, kerr.InvalidProducerEpoch.Code},
		{"stale epoch as it comes", kerr.InvalidProducerEpoch.Code, 9, kerr.InvalidProducerEpoch.Code},
		{"broker refused by the coordinator", kerr.ClusterAuthorizationFailed.Code, 9, kerr.InvalidTxnState.Code},
		{"partition not in the transaction", kerr.InvalidTxnState.Code, 9, kerr.InvalidTxnState.Code},
		{"abortable, Produce v10", kerr.TransactionAbortable.Code, 10, kerr.InvalidTxnState.Code},
		{"abortable, Produce v11", kerr.TransactionAbortable.Code, 11, kerr.TransactionAbortable.Code},
		{"not coordinator", kerr.NotCoordinator.Code, 9, kerr.NotEnoughReplicas.Code},
		{"coordinator not available", kerr.CoordinatorNotAvailable.Code, 9, kerr.NotEnoughReplicas.Code},
		{"coordinator loading", kerr.CoordinatorLoadInProgress.Code, 9, kerr.NotEnoughReplicas.Code},
		{"concurrent transactions", kerr.ConcurrentTransactions.Code, 9, kerr.NotEnoughReplicas.Code},
		{"network exception", kerr.NetworkException.Code, 9, kerr.NotEnoughReplicas.Code},
		{"timed out", kerr.RequestTimedOut.Code, 9, kerr.NotEnoughReplicas.Code},
		{"transactional ID not authorized", kerr.TransactionalIDAuthorizationFailed.Code, 9, kerr.TransactionalIDAuthorizationFailed.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verificationCode(tc.code, tc.version); got != tc.want {
				t.Errorf("verificationCode(%d, v%d) = %d, want %d", tc.code, tc.version, got, tc.want)
			}
		})
	}
}
