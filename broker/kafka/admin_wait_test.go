package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
)

// metadataTopicsOf finds topic in a Metadata answer.
func metadataTopicsOf(resp *kmsg.MetadataResponse, topic string) (kmsg.MetadataResponseTopic, bool) {
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			return mt, true
		}
	}
	return kmsg.MetadataResponseTopic{}, false
}

// TestAdminAnswersOnceMetadataShowsIt pipelines CreateTopics and an
// all-topics Metadata on one connection, as Kafka's per-connection order
// allows: the Metadata lists the new topic with every partition led, and
// after a pipelined DeleteTopics it lists neither the topic nor its
// partitions; so after a pipelined CreatePartitions with the new ones.
func TestAdminAnswersOnceMetadataShowsIt(t *testing.T) {
	tb := startBroker(t)
	c := dial(t, tb.addr)
	const partitions = 4

	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 4
	create.TimeoutMillis = 5000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "waited", partitions, 1
	create.Topics = append(create.Topics, ct)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 7
	c.send(append(frame(create, 1), frame(meta, 2)...))
	if resp := c.readResponse(create, 1).(*kmsg.CreateTopicsResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %+v", resp.Topics)
	}
	mt, ok := metadataTopicsOf(c.readResponse(meta, 2).(*kmsg.MetadataResponse), "waited")
	if !ok || mt.ErrorCode != 0 || len(mt.Partitions) != partitions {
		t.Fatalf("Metadata right after CreateTopics: listed %v, %+v", ok, mt)
	}
	for _, p := range mt.Partitions {
		if p.ErrorCode != 0 || p.Leader != tb.broker.cfg.BrokerID {
			t.Fatalf("partition %d: error %d, leader %d", p.Partition, p.ErrorCode, p.Leader)
		}
	}

	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.Version = 1
	grow.TimeoutMillis = 5000
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "waited", partitions+2
	grow.Topics = append(grow.Topics, gt)
	c.send(append(frame(grow, 5), frame(meta, 6)...))
	if resp := c.readResponse(grow, 5).(*kmsg.CreatePartitionsResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreatePartitions: %+v", resp.Topics)
	}
	mt, ok = metadataTopicsOf(c.readResponse(meta, 6).(*kmsg.MetadataResponse), "waited")
	if !ok || len(mt.Partitions) != partitions+2 {
		t.Fatalf("Metadata right after CreatePartitions: listed %v, %+v", ok, mt)
	}
	for _, p := range mt.Partitions {
		if p.ErrorCode != 0 || p.Leader != tb.broker.cfg.BrokerID {
			t.Fatalf("partition %d after CreatePartitions: error %d, leader %d", p.Partition, p.ErrorCode, p.Leader)
		}
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 4
	del.TimeoutMillis = 5000
	del.TopicNames = []string{"waited"}
	c.send(append(frame(del, 3), frame(meta, 4)...))
	if resp := c.readResponse(del, 3).(*kmsg.DeleteTopicsResponse); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics: %+v", resp.Topics)
	}
	if mt, ok := metadataTopicsOf(c.readResponse(meta, 4).(*kmsg.MetadataResponse), "waited"); ok {
		t.Fatalf("Metadata right after DeleteTopics lists the topic: %+v", mt)
	}
}

// TestMetadataLeavesOutTopicsWithoutPartitions: a topic whose assignment
// (written by another tool) names no partitions is not listed, and named it
// is unknown rather than shown empty.
func TestMetadataLeavesOutTopicsWithoutPartitions(t *testing.T) {
	dir := t.TempDir()
	tb := startBroker(t, withDir(dir))
	if _, err := tb.store.Create("/brokers/topics/empty", []byte(`{"version":2,"partitions":{},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ"}`), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	tb.stop()
	tb = startBroker(t, withDir(dir))
	if _, ok := tb.cluster.Topic("empty"); !ok {
		t.Fatal("the model did not load the topic; the test proves nothing")
	}
	c := dial(t, tb.addr)
	all := kmsg.NewPtrMetadataRequest()
	all.Version = 7
	if mt, ok := metadataTopicsOf(c.roundTrip(all, 1).(*kmsg.MetadataResponse), "empty"); ok {
		t.Fatalf("all-topics Metadata lists a topic without partitions: %+v", mt)
	}
	named := kmsg.NewPtrMetadataRequest()
	named.Version = 7
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("empty")
	named.Topics = append(named.Topics, rt)
	mt, ok := metadataTopicsOf(c.roundTrip(named, 2).(*kmsg.MetadataResponse), "empty")
	if !ok || mt.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(mt.Partitions) != 0 {
		t.Fatalf("named: listed %v, %+v; want UNKNOWN_TOPIC_OR_PARTITION", ok, mt)
	}
}
