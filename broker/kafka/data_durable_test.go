package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFlushOnAck checks millrace.flush.on.ack on a single broker: every
// acknowledgement comes after the fsync, and consumers see nothing that is
// not fsynced; without it the default (acknowledge from the page cache)
// stands.
func TestFlushOnAck(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("durable", 1, map[string]string{"millrace.flush.on.ack": "true"})
	tb.createTopic("cached", 1, nil)
	durable, cached := tb.partitionLog("durable", 0), tb.partitionLog("cached", 0)
	c := dial(t, tb.addr)

	fetchHighWatermark := func(topic string, corr int32) int64 {
		t.Helper()
		resp := c.roundTrip(fetchRequest(11, 0, 0, 1<<20, fetchPart{topic: topic, offset: 0, maxBytes: 1 << 20}), corr).(*kmsg.FetchResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			t.Fatalf("fetch %s: error %d", topic, sp.ErrorCode)
		}
		return sp.HighWatermark
	}

	// acks=0, 1 and all: fsynced by the time the broker answers (for
	// acks=0, the next request on the connection).
	c.produceRaw(9, "durable", 0, 0, makeBatch(t, plainBatch("zero")), 1)
	c.apiVersionsOK(2)
	if durable.DurableOffset() != 1 {
		t.Fatalf("acks=0: durable offset %d, want 1", durable.DurableOffset())
	}
	for i, acks := range []int16{1, -1} {
		rp := c.produceRaw(9, "durable", 0, acks, makeBatch(t, plainBatch("x", "y")), int32(10+i))
		if rp.ErrorCode != 0 {
			t.Fatalf("acks=%d: error %d", acks, rp.ErrorCode)
		}
		if end := rp.BaseOffset + 2; durable.DurableOffset() < end {
			t.Fatalf("acks=%d answered with durable offset %d below %d", acks, durable.DurableOffset(), end)
		}
	}
	if hw := fetchHighWatermark("durable", 20); hw != 5 {
		t.Fatalf("high watermark %d, want 5", hw)
	}

	// Records written but not fsynced stay invisible: appended here behind
	// the handlers' back, as a produce is between its append and its fsync.
	state, _, _ := tb.cluster.Partition("durable", 0)
	if _, err := durable.Append(makeBatch(t, plainBatch("unsynced")), state.LeaderEpoch); err != nil {
		t.Fatal(err)
	}
	if durable.EndOffset() != 6 || durable.DurableOffset() != 5 {
		t.Fatalf("end %d, durable offset %d; want 6 and 5", durable.EndOffset(), durable.DurableOffset())
	}
	if hw := fetchHighWatermark("durable", 21); hw != 5 {
		t.Fatalf("high watermark %d above the fsynced offset 5", hw)
	}
	list := kmsg.NewPtrListOffsetsRequest()
	list.SetVersion(4)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "durable"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1 // latest
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)
	if got := c.roundTrip(list, 22).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].Offset; got != 5 {
		t.Fatalf("latest offset %d, want the fsynced 5", got)
	}
	// A fetch waiting for the hidden record is answered once the next
	// produce's fsync covers it.
	waiting := make(chan int64, 1)
	fc := dial(t, tb.addr)
	go func() {
		resp := fc.roundTrip(fetchRequest(11, 10*time.Second, 1, 1<<20, fetchPart{topic: "durable", offset: 5, maxBytes: 1 << 20}), 1).(*kmsg.FetchResponse)
		waiting <- resp.Topics[0].Partitions[0].HighWatermark
	}()
	if rp := c.produceRaw(9, "durable", 0, 1, makeBatch(t, plainBatch("z")), 23); rp.ErrorCode != 0 || rp.BaseOffset != 6 {
		t.Fatalf("produce after the hidden record: %+v", rp)
	}
	if hw := <-waiting; hw != 7 {
		t.Fatalf("waiting fetch saw high watermark %d, want 7", hw)
	}

	// The default: acknowledged from the page cache, visible at once.
	if rp := c.produceRaw(9, "cached", 0, -1, makeBatch(t, plainBatch("a", "b")), 30); rp.ErrorCode != 0 {
		t.Fatalf("acks=all to the default topic: error %d", rp.ErrorCode)
	}
	if cached.DurableOffset() != 0 {
		t.Fatalf("default topic fsynced on ack: durable offset %d", cached.DurableOffset())
	}
	if hw := fetchHighWatermark("cached", 31); hw != 2 {
		t.Fatalf("default topic high watermark %d, want 2", hw)
	}

	// Described as a boolean, an override on one topic, the default on
	// the other.
	adm, _ := newAdmin(t, tb.addr)
	rcs, err := adm.DescribeTopicConfigs(testContext(t), "durable", "cached")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]struct {
		value  string
		source kmsg.ConfigSource
	}{"durable": {"true", kmsg.ConfigSourceDynamicTopicConfig}, "cached": {"false", kmsg.ConfigSourceDefaultConfig}} {
		rc, err := rcs.On(topic, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
		}
		if c := configOf(t, rc, "millrace.flush.on.ack"); c.MaybeValue() != want.value || c.Source != want.source {
			t.Errorf("%s: millrace.flush.on.ack = %q from %v, want %q from %v", topic, c.MaybeValue(), c.Source, want.value, want.source)
		}
	}
}
