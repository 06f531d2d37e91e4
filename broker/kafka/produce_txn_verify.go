package kafka

// Transaction verification for Produce (KIP-890 part 1). Before a
// producer's first transactional batch on a partition, the leader asks the
// transaction coordinator of the request's transactional ID, with
// AddPartitionsToTxn v4+ verify_only, whether its ongoing transaction holds
// the partition. Without it, a batch delayed past its transaction's end (a
// hung producer, a retry after a timeout) would open a transaction on the
// partition that no coordinator knows of, holding the last stable offset
// back until a later transaction of the same producer ended it, and the
// batch would be committed or aborted with that later transaction.
//
// Once a batch is appended the log knows the transaction is ongoing until
// its marker, so only a transaction's first batch on each partition is
// verified: the log's producer state is the per-producer cache. All
// partitions of one request that need it are verified with one request.
// When the coordinator is this broker it is asked directly.
//
// The transaction may end while the coordinator is asked (its marker
// written here between the question and the append): each batch carries
// the log's verification guard (log.StartTxnVerification), which the
// marker clears, and the log refuses the batch with INVALID_TXN_STATE. A
// batch of a transaction found ongoing carries it too: its marker may land
// just as well between this check and the append.
//
// The coordinator's answers map as Kafka maps them (verificationCode):
// INVALID_TXN_STATE for a partition not in the transaction;
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH and
// CLUSTER_AUTHORIZATION_FAILED INVALID_TXN_STATE; NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
// CONCURRENT_TRANSACTIONS and a coordinator that cannot be reached become
// NOT_ENOUGH_REPLICAS, which every producer retries (older clients do not
// know to retry the others on a produce).
// transaction.partition.verification.enable=false turns it off.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/log"
	"millrace/broker/txn"

	"millrace/internal/recordbatch"
)

// txnVerifyTimeout bounds the wait for the coordinator's answer when the
// produce's own timeout is longer or absent.
const txnVerifyTimeout = 10 * time.Second

// txnVerified is what verifyTxnPartitions found, by topic and partition.
type txnVerified struct {
	// failed holds the error code of each transactional batch whose
	// verification failed; partitions that need none or passed are absent.
	failed map[string]map[int32]int16
	// checks holds the guard each transactional batch is appended with.
	checks map[string]map[int32]log.TxnVerification
}

// verifyTxnPartitions verifies the transactional batches of req, which
// names its transactional ID.
func (b *Broker) verifyTxnPartitions(ctx context.Context, req *kmsg.ProduceRequest) txnVerified {
	if !b.cfg.Txn.PartitionVerification || req.TransactionID == nil {
		return txnVerified{}
	}
	var producer txn.ProducerIDAndEpoch
	need := map[string][]int32{}
	checks := map[string]map[int32]log.TxnVerification{}
	for _, rt := range req.Topics {
		topic := rt.Topic
		if req.Version >= 13 {
			t, ok := b.cluster.TopicByID(rt.TopicID)
			if !ok {
				continue
			}
			topic = t.Name
		}
		for _, part := range rt.Partitions {
			h, err := recordbatch.ParseHeader(part.Records)
			if err != nil || !h.Transactional() || h.Control() {
				continue // the produce path answers these
			}
			state, l, ok := b.cluster.Partition(topic, part.Partition)
			if !ok || l == nil || state.Leader != b.cfg.BrokerID {
				continue
			}
			tv, needed, err := l.StartTxnVerification(h.ProducerID, h.ProducerEpoch)
			if err != nil {
				continue // a state that cannot load fails the append itself
			}
			if checks[topic] == nil {
				checks[topic] = map[int32]log.TxnVerification{}
			}
			checks[topic][part.Partition] = tv
			if !needed {
				continue
			}
			producer = txn.ProducerIDAndEpoch{ID: h.ProducerID, Epoch: h.ProducerEpoch}
			need[topic] = append(need[topic], part.Partition)
		}
	}
	if len(need) == 0 {
		return txnVerified{checks: checks}
	}
	timeout := min(time.Duration(req.TimeoutMillis)*time.Millisecond, txnVerifyTimeout)
	if timeout <= 0 {
		timeout = txnVerifyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	codes, err := b.askTxnVerification(ctx, *req.TransactionID, producer, need)
	if err != nil {
		b.logger.Warn("verifying transactional partitions with the coordinator", "transactional_id", *req.TransactionID, "err", err)
	}
	failed := map[string]map[int32]int16{}
	for topic, partitions := range need {
		for _, p := range partitions {
			code := kerr.NotEnoughReplicas.Code
			if err == nil {
				code = verificationCode(codes[topic][p], req.Version)
			}
			if code == 0 {
				continue
			}
			if failed[topic] == nil {
				failed[topic] = map[int32]int16{}
			}
			failed[topic][p] = code
		}
	}
	return txnVerified{failed: failed, checks: checks}
}

// askTxnVerification asks the coordinator of id whether its ongoing
// transaction holds topics' partitions; a partition missing from the
// answer gets INVALID_TXN_STATE.
func (b *Broker) askTxnVerification(ctx context.Context, id string, producer txn.ProducerIDAndEpoch, topics map[string][]int32) (map[string]map[int32]int16, error) {
	coordinator, _, ok := b.cluster.GroupCoordinator(id)
	if !ok {
		return nil, errors.New("no coordinator for the transactional ID")
	}
	if coordinator.ID == b.cfg.BrokerID {
		return verifyPartitionsInTxn(b, id, producer, topics), nil
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = id, producer.ID, producer.Epoch, true
	for topic, partitions := range topics {
		rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		rt.Topic, rt.Partitions = topic, partitions
		t.Topics = append(t.Topics, rt)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{t}
	raw, err := b.brokers.Request(ctx, coordinator.ID, req)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.AddPartitionsToTxnResponse)
	codes := map[string]map[int32]int16{}
	for topic, partitions := range topics {
		codes[topic] = map[int32]int16{}
		for _, p := range partitions {
			codes[topic][p] = kerr.InvalidTxnState.Code
			if resp.ErrorCode != 0 {
				codes[topic][p] = resp.ErrorCode
			}
		}
	}
	if resp.ErrorCode != 0 {
		return codes, nil
	}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != id {
			continue
		}
		for _, rtt := range rt.Topics {
			for _, rp := range rtt.Partitions {
				if _, asked := codes[rtt.Topic][rp.Partition]; asked {
					codes[rtt.Topic][rp.Partition] = rp.ErrorCode
				}
			}
		}
	}
	return codes, nil
}

// verificationCode maps a coordinator's verification answer to what a
// Produce of version produceVersion answers, as Kafka's
// AddPartitionsToTxnManager and ReplicaManager translate it: a fenced
// producer gets INVALID_PRODUCER_EPOCH, the error producers handle as
// fatal here (librdkafka only aborts the transaction on PRODUCER_FENCED
// and the zombie goes on); a coordinator that refused the broker itself
// (CLUSTER_AUTHORIZATION_FAILED) must not reach the client and becomes
// INVALID_TXN_STATE, as does TRANSACTION_ABORTABLE for Produce v10 and
// older, which predate it; the answers that mean "ask again" become
// NOT_ENOUGH_REPLICAS, which every producer retries without a metadata
// refresh (older clients do not know to retry the others on a produce).
func verificationCode(code, produceVersion int16) int16 {
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.ClusterAuthorizationFailed.Code:
		return kerr.InvalidTxnState.Code
	case kerr.TransactionAbortable.Code:
		if produceVersion <= 10 {
			return kerr.InvalidTxnState.Code
		}
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.NetworkException.Code, kerr.RequestTimedOut.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}
