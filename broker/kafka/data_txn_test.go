package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// produceTxn sends one transactional batch for transactional ID "tx".
// initTxnProducer asks for the transactional ID's producer ID and epoch
// (InitProducerId v4, a 60 s transaction timeout).
func (c *rawClient) initTxnProducer(t *testing.T, id string, correlationID int32) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
	resp := c.roundTrip(req, correlationID).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: error %d", resp.ErrorCode)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func (c *rawClient) produceTxn(topic string, producer int64, epoch int16, sequence int32, correlationID int32, values ...string) *kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	spec := idempotentBatch(producer, epoch, sequence, values...)
	spec.attrs = attrTransactional
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000
	id := "tx"
	req.TransactionID = &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = makeBatch(c.t, spec)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req, correlationID).(*kmsg.ProduceResponse)
	return &resp.Topics[0].Partitions[0]
}

// writeMarker sends WriteTxnMarkers for one partition and returns its code.
func (c *rawClient) writeMarker(topic string, producer int64, epoch int16, commit bool, correlationID int32) int16 {
	c.t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = producer, epoch, commit, 0
	rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, rt)
	req.Markers = append(req.Markers, m)
	resp := c.roundTrip(req, correlationID).(*kmsg.WriteTxnMarkersResponse)
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// fetchIsolated fetches partition 0 of topic from offset at an isolation level.
func (c *rawClient) fetchIsolated(topic string, offset int64, isolation int8, correlationID int32) kmsg.FetchResponseTopicPartition {
	c.t.Helper()
	req := fetchRequest(11, 0, 0, 1<<20, fetchPart{topic: topic, offset: offset, maxBytes: 1 << 20})
	req.IsolationLevel = isolation
	resp := c.roundTrip(req, correlationID).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}

// listLatest answers ListOffsets latest for partition 0 at an isolation level.
func (c *rawClient) listLatest(topic string, isolation int8, correlationID int32) int64 {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req, correlationID).(*kmsg.ListOffsetsResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		c.t.Fatalf("ListOffsets: error %d", p.ErrorCode)
	}
	return p.Offset
}

// TestTransactionsOnAPartition: transactional batches hold the last stable
// offset back until their markers; read_committed fetches stop there and
// list the aborted transactions of the range they return; ListOffsets
// answers the LSO for read_committed; DescribeProducers shows the ongoing
// transaction; a marker from an older producer epoch is refused.
func TestTransactionsOnAPartition(t *testing.T) {
	// The markers here are written by hand, without a coordinator.
	tb := startBroker(t, withConfig(func(c *Config) { c.Txn.PartitionVerification = false }))
	tb.createTopic("txn", 1, nil)
	c := dial(t, tb.addr)
	corr := int32(1)
	next := func() int32 { corr++; return corr }

	for _, p := range []struct {
		producer int64
		values   []string
	}{{1, []string{"a1", "a2"}}, {2, []string{"b1"}}} {
		if rp := c.produceTxn("txn", p.producer, 0, 0, next(), p.values...); rp.ErrorCode != 0 {
			t.Fatalf("transactional produce: error %d", rp.ErrorCode)
		}
	}
	if rp := c.produceRaw(9, "txn", 0, -1, makeBatch(t, plainBatch("plain")), next()); rp.ErrorCode != 0 {
		t.Fatalf("plain produce: error %d", rp.ErrorCode)
	}
	// 0-1 producer 1, 2 producer 2, 3 plain: nothing is stable yet.
	f := c.fetchIsolated("txn", 0, 1, next())
	if f.ErrorCode != 0 || f.HighWatermark != 4 || f.LastStableOffset != 0 || len(f.RecordBatches) != 0 {
		t.Fatalf("read_committed before markers: error %d hw %d lso %d, %d bytes", f.ErrorCode, f.HighWatermark, f.LastStableOffset, len(f.RecordBatches))
	}
	if f := c.fetchIsolated("txn", 0, 0, next()); len(batchesIn(t, f.RecordBatches)) != 3 || f.LastStableOffset != 0 {
		t.Fatalf("read_uncommitted: %d batches, lso %d", len(batchesIn(t, f.RecordBatches)), f.LastStableOffset)
	}
	if got := c.listLatest("txn", 1, next()); got != 0 {
		t.Fatalf("ListOffsets read_committed latest %d, want 0", got)
	}
	if got := c.listLatest("txn", 0, next()); got != 4 {
		t.Fatalf("ListOffsets read_uncommitted latest %d, want 4", got)
	}

	if code := c.writeMarker("txn", 1, 0, false, next()); code != 0 { // abort at 4
		t.Fatalf("abort marker: error %d", code)
	}
	f = c.fetchIsolated("txn", 0, 1, next())
	if f.LastStableOffset != 2 {
		t.Fatalf("after producer 1's abort: lso %d, want 2 (producer 2 still open)", f.LastStableOffset)
	}
	if hs := batchesIn(t, f.RecordBatches); len(hs) != 1 || hs[0].ProducerID != 1 {
		t.Fatalf("read_committed returned %+v, want producer 1's batch", hs)
	}
	if len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].ProducerID != 1 || f.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("aborted transactions %+v, want producer 1 from 0", f.AbortedTransactions)
	}

	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = "txn", []int32{0}
	dreq.Topics = append(dreq.Topics, dt)
	dresp := c.roundTrip(dreq, next()).(*kmsg.DescribeProducersResponse)
	starts := map[int64]int64{}
	for _, ap := range dresp.Topics[0].Partitions[0].ActiveProducers {
		starts[ap.ProducerID] = ap.CurrentTxnStartOffset
	}
	if starts[1] != -1 || starts[2] != 2 {
		t.Fatalf("current_txn_start_offset by producer %v, want 1:-1 2:2", starts)
	}

	if code := c.writeMarker("txn", 2, 0, true, next()); code != 0 { // commit at 5
		t.Fatalf("commit marker: error %d", code)
	}
	f = c.fetchIsolated("txn", 2, 1, next())
	if f.LastStableOffset != 6 || f.HighWatermark != 6 {
		t.Fatalf("after both markers: lso %d hw %d, want 6", f.LastStableOffset, f.HighWatermark)
	}
	if hs := batchesIn(t, f.RecordBatches); len(hs) != 4 || !hs[2].Control() || !hs[3].Control() {
		t.Fatalf("read_committed from 2: %+v, want producer 2, plain and two markers", hs)
	}
	// Producer 1's abort marker (4) lies in the range: still listed.
	if len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].ProducerID != 1 {
		t.Fatalf("aborted transactions from 2: %+v", f.AbortedTransactions)
	}
	if f := c.fetchIsolated("txn", 5, 1, next()); len(f.AbortedTransactions) != 0 {
		t.Fatalf("aborted transactions past the abort marker: %+v", f.AbortedTransactions)
	}
	if got := c.listLatest("txn", 1, next()); got != 6 {
		t.Fatalf("ListOffsets read_committed latest %d, want 6", got)
	}
	if code := c.writeMarker("txn", 2, -1, true, next()); code != kerr.InvalidRecord.Code {
		t.Fatalf("marker without an epoch: error %d, want INVALID_RECORD", code)
	}
	// A bumped epoch fences the old one's markers.
	if code := c.writeMarker("txn", 2, 1, false, next()); code != 0 {
		t.Fatalf("marker with a bumped epoch: error %d", code)
	}
	if code := c.writeMarker("txn", 2, 0, false, next()); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker from the old epoch: error %d, want INVALID_PRODUCER_EPOCH", code)
	}
}

// TestTransactionVerification (KIP-890): a transaction's first batch on a
// partition the coordinator was not told of is refused with
// INVALID_TXN_STATE; once the producer adds the partition it is accepted,
// and after the coordinator ends the transaction a late batch is refused
// again.
func TestTransactionVerification(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("verify", 1, nil)
	l := tb.partitionLog("verify", 0)
	c := dial(t, tb.addr)
	corr := int32(1)
	next := func() int32 { corr++; return corr }

	id := "tx"
	pid, epoch := c.initTxnProducer(t, id, next())

	if rp := c.produceTxn("verify", pid, epoch, 0, next(), "early"); rp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("batch before AddPartitionsToTxn: error %d, want INVALID_TXN_STATE", rp.ErrorCode)
	}
	areq := kmsg.NewPtrAddPartitionsToTxnRequest()
	areq.SetVersion(3)
	areq.TransactionalID, areq.ProducerID, areq.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "verify", []int32{0}
	areq.Topics = append(areq.Topics, at)
	if ar := c.roundTrip(areq, next()).(*kmsg.AddPartitionsToTxnResponse); ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: error %d", ar.Topics[0].Partitions[0].ErrorCode)
	}
	for seq, v := range []string{"a", "b"} {
		if rp := c.produceTxn("verify", pid, epoch, int32(seq), next(), v); rp.ErrorCode != 0 {
			t.Fatalf("batch %d after AddPartitionsToTxn: error %d", seq, rp.ErrorCode)
		}
	}

	ereq := kmsg.NewPtrEndTxnRequest()
	ereq.SetVersion(3)
	ereq.TransactionalID, ereq.ProducerID, ereq.ProducerEpoch, ereq.Commit = id, pid, epoch, true
	if er := c.roundTrip(ereq, next()).(*kmsg.EndTxnResponse); er.ErrorCode != 0 {
		t.Fatalf("EndTxn: error %d", er.ErrorCode)
	}
	// The commit marker follows EndTxn's answer.
	waitfor.Until(t, 10*time.Second, "the commit marker", func() bool {
		_, ongoing, err := l.FirstUnstableOffset()
		return err == nil && !ongoing
	})
	if rp := c.produceTxn("verify", pid, epoch, 2, next(), "late"); rp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("batch after the commit: error %d, want INVALID_TXN_STATE", rp.ErrorCode)
	}
	if end := l.EndOffset(); end != 3 {
		t.Fatalf("log end %d, want 3 (two records and the commit marker)", end)
	}
}
