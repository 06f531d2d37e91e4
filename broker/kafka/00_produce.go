package kafka

// Produce (key 0), versions 3–13.
//
// Versions 0–2 carry the old message-set format (magic 0 and 1), which
// millrace does not store (docs/architecture.md §2: the unit on disk is the v2 record
// batch); Kafka 4 dropped them too. A v3+ request whose records are an old
// message set gets UNSUPPORTED_FOR_MESSAGE_FORMAT.
//
// Each partition's records must be exactly one v2 batch, as Kafka demands
// from v3 (INVALID_RECORD otherwise). The batch is validated and appended
// verbatim by broker/log (compressed batches stay compressed); its errors
// map to CORRUPT_MESSAGE (bad CRC, framing), INVALID_RECORD,
// MESSAGE_TOO_LARGE (max.message.bytes) and UNSUPPORTED_FOR_MESSAGE_FORMAT
// (magic < 2), with the reason in the error message (v8+). Disk failures get
// KAFKA_STORAGE_ERROR. A partition this broker does not lead gets
// NOT_LEADER_OR_FOLLOWER, with the current leader (v10+ tag) when known; an
// unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; from v13 topics are
// named by ID and an unknown ID gets UNKNOWN_TOPIC_ID. acks other than -1, 0
// and 1 get INVALID_REQUIRED_ACKS.
//
// Idempotent batches (producer ID set) are checked against the partition's
// producer state, which its log keeps (broker/log/producers.go): duplicates
// of one of the last five batches are answered with the original base
// offset and not appended.
//
// Transactional batches (KIP-98) are accepted from a request naming its
// transactional ID, which needs Write on that transactional ID
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise, for the whole request,
// as Kafka answers; also when transactional batches come without one). The
// log records the producer's ongoing transaction, which holds the last
// stable offset back until the coordinator's marker ends it
// (27_write_txn_markers.go). A transaction's first batch on a partition
// is verified with its coordinator first (produce_txn_verify.go, KIP-890).
// A non-transactional batch from a producer in a transaction gets
// INVALID_TXN_STATE. Control batches are written only by
// the broker: a client's gets INVALID_RECORD.
//
// broker/log walks every record, decompressing compressed batches up to
// millrace.max.decompressed.bytes (MESSAGE_TOO_LARGE beyond it), as Kafka's
// LogValidator does. On CreateTime topics a record timestamp outside
// message.timestamp.before.max.ms / after.max.ms gets INVALID_TIMESTAMP, as
// does a producer batch claiming LogAppendTime. On a compacted topic a
// record without a key (as in Kafka) or with a key longer than
// millrace.compacted.max.key.bytes (millrace's own bound) gets
// INVALID_RECORD. Every record refused for what it holds is listed in the
// partition's per-record errors (KIP-467, v8+: its index in the batch and
// why; recordErrors), and the error message counts them and quotes the
// first three, as Kafka's LogValidator answers; INVALID_TIMESTAMP if a
// timestamp is among the reasons. A CreateTime batch whose maxTimestamp
// is not its records' largest (librdkafka's records with timestamp -1
// under a maxTimestamp of 0) is accepted and its header set, as Kafka does.
//
// Every partition answered with an error is counted by error and logged,
// rate-limited (produce_refusals.go).
//
// The response carries the base offset, the log append time (-1 for
// CreateTime topics) and the log start offset. message.timestamp.type is
// applied by broker/log.
//
// acks=0 gets no response; as in Kafka, if any partition failed the
// connection is closed instead, so the client refreshes its metadata. When
// an acks=-1 produce is acknowledged is decided by the partition (replication.Partition.AwaitISR).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"

	"millrace/broker/log"
	"millrace/broker/replication"
	"millrace/internal/recordbatch"
)

// produceKey is Produce's API key; its request frames are recycled (framepool.go).
const produceKey = 0

func init() { regKey(produceKey, 3, 13, handleProduce) }

func handleProduce(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	byID := req.Version >= 13
	// Kafka checks the transactional ID before anything else, and answers
	// every partition with the failure.
	txnDenied := hasTransactionalRecords(req) && (req.TransactionID == nil || !b.authorized(r, acl.TransactionalID, *req.TransactionID, acl.Write))
	var verified txnVerified
	if !txnDenied {
		verified = b.verifyTxnPartitions(ctx, req)
	}

	// pending is a written partition waiting for its acknowledgement,
	// located by topic and partition index in the response.
	type pending struct {
		topic, partition int
		name             string
		p                replication.Partition
		last             int64
	}
	// Nearly every request writes one partition or a few: their entries
	// stay on the stack.
	var writtenBuf [4]pending
	written := writtenBuf[:0]
	failed := false
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		topicCode := int16(0)
		if byID {
			if t, ok := b.cluster.TopicByID(rt.TopicID); ok {
				name = t.Name
			} else {
				topicCode = kerr.UnknownTopicID.Code
			}
		}
		if topicCode == 0 && !b.authorized(r, acl.Topic, name, acl.Write) {
			topicCode = kerr.TopicAuthorizationFailed.Code
		}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(rt.Partitions))
		for _, part := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = part.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			switch {
			case txnDenied:
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				sp.ErrorMessage = strp("transactional batches need the request's transactional ID, with Write permission on it")
			case topicCode != 0:
				sp.ErrorCode = topicCode
			case req.Acks != -1 && req.Acks != 0 && req.Acks != 1:
				sp.ErrorCode = kerr.InvalidRequiredAcks.Code
			case verified.failed[name][part.Partition] != 0:
				sp.ErrorCode = verified.failed[name][part.Partition]
				sp.ErrorMessage = strp("the transaction coordinator does not hold this partition in the producer's ongoing transaction (KIP-890 verification)")
				if sp.ErrorCode == kerr.NotEnoughReplicas.Code {
					sp.ErrorMessage = strp("the transaction coordinator could not be asked whether the producer's transaction holds this partition; retry")
				}
			default:
				if p, last := b.produceTo(name, req.Acks, part, &sp, verified.checks[name][part.Partition]); sp.ErrorCode == 0 {
					written = append(written, pending{topic: len(resp.Topics), partition: len(st.Partitions), name: name, p: p, last: last})
				}
			}
			if sp.ErrorCode != 0 {
				failed = true
				b.produceRefused(r, name, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for _, w := range written {
		if code := w.p.AwaitISR(ctx, req.Acks, w.last); code != 0 {
			sp := &resp.Topics[w.topic].Partitions[w.partition]
			sp.ErrorCode = code
			failed = true
			b.produceRefused(r, w.name, sp)
		}
	}
	if req.Acks == 0 {
		if failed {
			return nil, closef("a produce with acks=0 failed on at least one partition; closing so the client refreshes its metadata")
		}
		return noResponse, nil
	}
	return resp, nil
}

// produceTo appends one partition's records and fills in its response. It
// returns the partition and the last offset written (or of the duplicate
// found), for the acknowledgement wait (AwaitISR).
//
// The partition checks leadership (and for acks=all the ISR's size
// against min.insync.replicas, before anything is written) and appends;
// the log checks an idempotent batch against its producer's sequence and
// appends it under one lock (broker/log's producer state); this maps what
// they answer to Kafka's error codes. tv is the verification of a
// transactional batch (produce_txn_verify.go), zero for none.
func (b *Broker) produceTo(topic string, acks int16, part kmsg.ProduceRequestTopicPartition, sp *kmsg.ProduceResponseTopicPartition, tv log.TxnVerification) (replication.Partition, int64) {
	p, code := b.replicas.LeaderForAppend(topic, part.Partition, acks)
	if code != 0 {
		sp.ErrorCode = code
		if code == kerr.NotLeaderForPartition.Code && p.State() != nil && p.State().Leader >= 0 {
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = p.State().Leader, p.State().LeaderEpoch
		}
		return replication.Partition{}, -1
	}
	batches, err := p.Log().ValidateProduce(part.Records, time.Now())
	if err != nil {
		sp.ErrorCode, sp.ErrorMessage = produceErrorCode(err), strp(err.Error())
		sp.ErrorRecords = recordErrors(err)
		return replication.Partition{}, -1
	}
	headers := batches.Headers()
	if len(headers) != 1 {
		sp.ErrorCode = kerr.InvalidRecord.Code
		sp.ErrorMessage = strp("a produce request must carry exactly one record batch per partition")
		return replication.Partition{}, -1
	}
	if h := headers[0]; h.Control() {
		sp.ErrorCode, sp.ErrorMessage = kerr.InvalidRecord.Code, strp("control batches are written by the broker, not produced")
		return replication.Partition{}, -1
	}
	info, err := p.AppendAsLeader(batches.WithTxnVerification(tv))
	var refused *log.ProducerError
	if err != nil {
		refused = asProducerError(err)
	}
	switch {
	case errors.Is(err, log.ErrProducerState):
		b.logger.Error("loading producer state", "topic", topic, "partition", part.Partition, "err", err)
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return replication.Partition{}, -1
	case refused != nil:
		sp.ErrorCode, sp.ErrorMessage = producerErrorCode(refused), strp(refused.Message)
		return replication.Partition{}, -1
	case err != nil:
		code, serverFault := replication.LogErrorCode(err)
		// A log refusing appends after a failed write said so once
		// itself; a client retrying must not write a line per attempt.
		if serverFault && !p.Log().Refusing() {
			b.logger.Error("appending to a partition", "topic", topic, "partition", part.Partition, "err", err)
		}
		sp.ErrorCode, sp.ErrorMessage = code, strp(err.Error())
		return replication.Partition{}, -1
	case info.Duplicate:
		// A retry of a batch already written: its original offsets.
		sp.BaseOffset, sp.LogStartOffset = info.FirstOffset, p.Log().StartOffset()
		return p, info.LastOffset
	}
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = info.FirstOffset, info.LogAppendTime, p.Log().StartOffset()
	b.metrics.produced(topic, info.Records, len(part.Records))
	return p, info.LastOffset
}

// asProducerError is errors.As for a *log.ProducerError. Its target escapes
// to the heap, so it is declared here, reached only when an append failed,
// rather than allocated for every produced partition.
func asProducerError(err error) *log.ProducerError {
	var refused *log.ProducerError
	if errors.As(err, &refused) {
		return refused
	}
	return nil
}

// producerErrorCode maps a batch or marker refused by the log's producer
// state: INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
// INVALID_TXN_STATE, TRANSACTION_COORDINATOR_FENCED, or INVALID_RECORD for
// a producer ID without an epoch or sequence.
func producerErrorCode(err *log.ProducerError) int16 {
	switch {
	case errors.Is(err, log.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, log.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, log.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, log.ErrCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	default:
		return kerr.InvalidRecord.Code
	}
}

// produceErrorCode maps a validation error: INVALID_TIMESTAMP, which only
// a produce can get, or the storage mapping shared with other appends.
func produceErrorCode(err error) int16 {
	if errors.Is(err, log.ErrInvalidTimestamp) {
		return kerr.InvalidTimestamp.Code
	}
	code, _ := replication.LogErrorCode(err)
	return code
}

// recordErrors are the per-record errors (KIP-467, v8+) of a batch the log
// refused for some of its records: each one's index in the batch and why,
// so the client fails those and can send the others again (librdkafka
// fails the others with _INVALID_DIFFERENT_RECORD; the Java client
// likewise). nil for a batch refused as a whole.
func recordErrors(err error) []kmsg.ProduceResponseTopicPartitionErrorRecord {
	var be *log.BatchError
	if !errors.As(err, &be) || len(be.Records) == 0 {
		return nil
	}
	out := make([]kmsg.ProduceResponseTopicPartitionErrorRecord, len(be.Records))
	for i, r := range be.Records {
		out[i] = kmsg.NewProduceResponseTopicPartitionErrorRecord()
		out[i].RelativeOffset, out[i].ErrorMessage = int32(r.Index), strp(r.Message)
	}
	return out
}

// hasTransactionalRecords reports whether any partition's records start
// with a transactional batch (a produce carries one batch per partition).
// It reads each batch's attributes only: the header is parsed once, by
// the validation (Log.ValidateProduce), whose headers the append uses.
func hasTransactionalRecords(req *kmsg.ProduceRequest) bool {
	for _, rt := range req.Topics {
		for _, part := range rt.Partitions {
			if recordbatch.IsTransactional(part.Records) {
				return true
			}
		}
	}
	return false
}
