package kafka

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fillPartition appends n batches of one record of size bytes each.
func fillPartition(t *testing.T, c *rawClient, topic string, partition int32, n, size int, firstTimestamp int64) {
	t.Helper()
	for i := range n {
		spec := plainBatch(strings.Repeat("r", size))
		if firstTimestamp >= 0 {
			spec.timestamp = firstTimestamp + int64(i)*1000
		}
		if rp := c.produceRaw(9, topic, partition, 1, makeBatch(t, spec), int32(1000+i)); rp.ErrorCode != 0 {
			t.Fatalf("produce: error %d", rp.ErrorCode)
		}
	}
}

// TestFetchLongPoll: a waiting fetch wakes promptly on an append, and one
// with nothing to read returns after about its max wait.
func TestFetchLongPoll(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("poll", 2, nil)
	c := dial(t, tb.addr)

	start := time.Now()
	resp := c.roundTrip(fetchRequest(11, 400*time.Millisecond, 1, 1<<20, fetchPart{"poll", 0, 0, 1 << 20}), 1).(*kmsg.FetchResponse)
	waited := time.Since(start)
	if waited < 350*time.Millisecond {
		t.Fatalf("an empty fetch with max wait 400ms returned after %v", waited)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("empty fetch: %+v", p)
	}

	// Wait on both partitions; produce to the second after a while. The
	// fetch would wait 30 s (FetchMaxWait caps the minute asked), the test
	// connection reads for 10 s: an answer at all is one the append woke.
	c.send(frame(fetchRequest(11, time.Minute, 1, 1<<20, fetchPart{"poll", 0, 0, 1 << 20}, fetchPart{"poll", 1, 0, 1 << 20}), 2))
	producer := dial(t, tb.addr)
	time.Sleep(200 * time.Millisecond)
	producer.produceRaw(9, "poll", 1, 1, makeBatch(t, plainBatch("wake up")), 1)
	resp = c.readResponse(fetchRequest(11, 0, 0, 0), 2).(*kmsg.FetchResponse)
	p := resp.Topics[0].Partitions[1]
	if p.ErrorCode != 0 || p.HighWatermark != 1 || len(batchesIn(t, p.RecordBatches)) != 1 {
		t.Fatalf("woken fetch: %+v", p)
	}
}

// TestFetchMaxBytes checks the partition and response byte limits and that
// the first batch is always returned whole.
func TestFetchMaxBytes(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("bytes", 2, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "bytes", 0, 3, 1000, -1)
	fillPartition(t, c, "bytes", 1, 3, 1000, -1)
	batchSize := len(makeBatch(t, plainBatch(strings.Repeat("r", 1000))))

	count := func(resp *kmsg.FetchResponse) []int {
		var out []int
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
			out = append(out, len(batchesIn(t, p.RecordBatches)))
		}
		return out
	}
	cases := []struct {
		name             string
		maxBytes, partMB int32
		want             []int
	}{
		{"no limits", 1 << 20, 1 << 20, []int{3, 3}},
		{"response limit below one batch", 10, 1 << 20, []int{1, 0}},
		{"partition limit below one batch", 1 << 20, 10, []int{1, 0}},
		{"partition limit of two batches", 1 << 20, int32(2 * batchSize), []int{2, 2}},
		{"response limit of four batches", int32(4 * batchSize), 1 << 20, []int{3, 1}},
	}
	for i, tc := range cases {
		resp := c.roundTrip(fetchRequest(11, 0, 1, tc.maxBytes, fetchPart{"bytes", 0, 0, tc.partMB}, fetchPart{"bytes", 1, 0, tc.partMB}), int32(i+1)).(*kmsg.FetchResponse)
		got := count(resp)
		if len(got) != 2 || got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("%s: batches %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFetchErrors covers OFFSET_OUT_OF_RANGE, unknown partitions, leader
// epochs and fetch sessions.
func TestFetchErrors(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("ferr", 1, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "ferr", 0, 2, 10, -1)

	part := func(req *kmsg.FetchRequest, corr int32) kmsg.FetchResponseTopicPartition {
		resp := c.roundTrip(req, corr).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || resp.SessionID != 0 {
			t.Fatalf("top-level error %d, session %d", resp.ErrorCode, resp.SessionID)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := part(fetchRequest(11, 5*time.Second, 1, 1<<20, fetchPart{"ferr", 0, 5, 1 << 20}), 1); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 2 || p.LogStartOffset != 0 {
		t.Fatalf("offset past the end: %+v", p)
	}
	if p := part(fetchRequest(11, 5*time.Second, 1, 1<<20, fetchPart{"ferr", 3, 0, 1 << 20}), 2); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: error %d", p.ErrorCode)
	}
	req := fetchRequest(11, 0, 1, 1<<20, fetchPart{"ferr", 0, 0, 1 << 20})
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	if p := part(req, 3); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer leader epoch: error %d", p.ErrorCode)
	}

	// After DeleteRecords, offset 0 is out of range.
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.SetVersion(2)
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "ferr"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Offset = 1
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	if p := c.roundTrip(dr, 4).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 1 {
		t.Fatalf("DeleteRecords: %+v", p)
	}
	if p := part(fetchRequest(11, 0, 1, 1<<20, fetchPart{"ferr", 0, 0, 1 << 20}), 5); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 1 {
		t.Fatalf("offset below the start: %+v", p)
	}
	dr.Topics[0].Partitions[0].Offset = 3
	if p := c.roundTrip(dr, 6).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("DeleteRecords past the high watermark: error %d", p.ErrorCode)
	}
	dr.Topics[0].Partitions[0].Offset = -1
	if p := c.roundTrip(dr, 7).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LowWatermark != 2 {
		t.Fatalf("DeleteRecords to the high watermark: %+v", p)
	}

	// A session ID the broker does not know.
	req = fetchRequest(11, 0, 1, 1<<20, fetchPart{"ferr", 0, 2, 1 << 20})
	req.SessionID, req.SessionEpoch = 42, 1
	if resp := c.roundTrip(req, 8).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("session 42: error %d", resp.ErrorCode)
	}
}

// TestFetchByTopicID fetches with v13+ topic IDs.
func TestFetchByTopicID(t *testing.T) {
	tb := startBroker(t)
	topic := tb.createTopic("ids", 1, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "ids", 0, 2, 10, -1)
	for i, version := range []int16{13, 16, 18} {
		req := fetchRequest(version, 0, 1, 1<<20, fetchPart{"", 0, 0, 1 << 20})
		req.Topics[0].TopicID = topic.ID
		unknown := kmsg.NewFetchRequestTopic()
		unknown.TopicID = [16]byte{1, 2, 3}
		unknown.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
		req.Topics = append(req.Topics, unknown)
		resp := c.roundTrip(req, int32(i+1)).(*kmsg.FetchResponse)
		if len(resp.Topics) != 2 || resp.Topics[0].TopicID != topic.ID {
			t.Fatalf("v%d: topics %+v", version, resp.Topics)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(batchesIn(t, p.RecordBatches)) != 2 {
			t.Fatalf("v%d: %+v", version, p)
		}
		if p := resp.Topics[1].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("v%d unknown ID: error %d", version, p.ErrorCode)
		}
	}
}

// TestFetchSendfileMatchesEncoding compares the streamed response bytes
// read off a real TCP connection with kmsg's own encoding of the decoded
// response, in non-flexible and flexible versions, with several partitions
// carrying records and one carrying an error.
func TestFetchSendfileMatchesEncoding(t *testing.T) {
	tb := startBroker(t)
	topic := tb.createTopic("sf", 3, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "sf", 0, 3, 300, -1)
	fillPartition(t, c, "sf", 2, 200, 1000, -1) // > 127 bytes of uvarint length
	for i, version := range []int16{4, 11, 12, 15, 18} {
		req := fetchRequest(version, 0, 1, 1<<20,
			fetchPart{"sf", 0, 0, 1 << 20}, fetchPart{"sf", 1, 0, 1 << 20}, fetchPart{"sf", 2, 0, 1 << 20}, fetchPart{"sf", 9, 0, 1 << 20})
		req.Topics[0].TopicID = topic.ID // v13+
		corr := int32(100 + i)
		streamedBefore := tb.broker.metrics.streamedRecordBytes.Load()
		c.send(frame(req, corr))
		id, body, err := c.readFrame()
		if err != nil || id != corr {
			t.Fatalf("v%d: reading: id %d, %v", version, id, err)
		}
		if req.IsFlexible() {
			body = body[1:]
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: decoding the streamed response: %v", version, err)
		}
		parts := resp.Topics[0].Partitions
		if len(batchesIn(t, parts[0].RecordBatches)) != 3 || len(parts[1].RecordBatches) != 0 || len(parts[2].RecordBatches) < 100*1000 || parts[3].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("v%d: unexpected contents", version)
		}
		want := encodeResponse(&request{key: 1, correlationID: corr}, resp)
		got := append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4+boolInt(req.IsFlexible()))), binary.BigEndian.AppendUint32(nil, uint32(corr))...)
		if req.IsFlexible() {
			got = append(got, 0)
		}
		got = append(got, body...)
		if streamed := tb.broker.metrics.streamedRecordBytes.Load() - streamedBefore; streamed != int64(len(parts[0].RecordBatches)+len(parts[2].RecordBatches)) {
			t.Fatalf("v%d: %d record bytes went through the streamed path", version, streamed)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: streamed response differs from kmsg's encoding (%d vs %d bytes)", version, len(got), len(want))
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLocateRecordFieldsRejectsSurprises checks the fallback trigger: any
// difference other than whole null/empty length fields is refused.
func TestLocateRecordFieldsRejectsSurprises(t *testing.T) {
	a := []byte{1, 0xff, 0xff, 0xff, 0xff, 2, 0xff, 0xff, 0xff, 0xff}
	b := []byte{1, 0, 0, 0, 0, 2, 0, 0, 0, 0}
	if pos, ok := locateRecordFields(a, b, false, 2); !ok || pos[0] != 1 || pos[1] != 6 {
		t.Fatalf("positions %v %v", pos, ok)
	}
	if _, ok := locateRecordFields(a, b, false, 3); ok {
		t.Fatal("wrong count accepted")
	}
	b[2] = 0xff
	if _, ok := locateRecordFields(a, b, false, 2); ok {
		t.Fatal("partial field difference accepted")
	}
	if _, ok := locateRecordFields([]byte{0, 5, 0}, []byte{1, 5, 1}, true, 2); !ok {
		t.Fatal("flexible fields refused")
	}
	if _, ok := locateRecordFields([]byte{0, 0}, []byte{1, 1}, true, 2); ok {
		t.Fatal("adjacent flexible fields accepted")
	}
}

// TestListOffsets covers earliest, latest, by timestamp, max timestamp and v0.
func TestListOffsets(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("lo", 1, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "lo", 0, 3, 10, 10_000) // timestamps 10000, 11000, 12000

	list := func(version int16, ts int64, corr int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(version)
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.MaxNumOffsets = ts, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req, corr).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	cases := []struct {
		ts            int64
		offset, found int64
	}{
		{-2, 0, -1}, {-1, 3, -1}, {-3, 2, 12_000}, {10_500, 1, 11_000}, {10_000, 0, 10_000}, {12_000, 2, 12_000}, {12_001, -1, -1}, {-4, 0, -1}, {-5, -1, -1},
	}
	for i, tc := range cases {
		p := list(11, tc.ts, int32(i+1))
		if p.ErrorCode != 0 || p.Offset != tc.offset || p.Timestamp != tc.found {
			t.Errorf("timestamp %d: %+v, want offset %d timestamp %d", tc.ts, p, tc.offset, tc.found)
		}
		if tc.offset >= 0 && p.LeaderEpoch != 0 {
			t.Errorf("timestamp %d: leader epoch %d", tc.ts, p.LeaderEpoch)
		}
	}
	if p := list(0, -1, 50); p.ErrorCode != 0 || len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 3 {
		t.Fatalf("v0 latest: %+v", p)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(5)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "missing"
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{kmsg.NewListOffsetsRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	if p := c.roundTrip(req, 60).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: error %d", p.ErrorCode)
	}
}

// TestOffsetForLeaderEpoch checks end offsets per epoch and the
// current-leader-epoch checks.
func TestOffsetForLeaderEpoch(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("ole", 1, nil)
	c := dial(t, tb.addr)
	fillPartition(t, c, "ole", 0, 2, 10, -1)
	ask := func(current, epoch int32, corr int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(4)
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "ole"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req, corr).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	if p := ask(-1, 0, 1); p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 2 {
		t.Fatalf("epoch 0: %+v", p)
	}
	if p := ask(0, 7, 2); p.ErrorCode != 0 || p.LeaderEpoch != -1 || p.EndOffset != -1 {
		t.Fatalf("unknown epoch: %+v", p)
	}
	if p := ask(3, 0, 3); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer current epoch: error %d", p.ErrorCode)
	}
}
