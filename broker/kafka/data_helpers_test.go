package kafka

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/log"

	"millrace/internal/recordbatch"
)

// createTopic creates a topic through the cluster model.
func (tb *testBroker) createTopic(name string, partitions int32, config map[string]string) *cluster.Topic {
	tb.t.Helper()
	topic, err := tb.cluster.CreateTopic(cluster.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: 1, Config: config}, false)
	if err != nil {
		tb.t.Fatalf("creating topic %s: %v", name, err)
	}
	return topic
}

// partitionLog returns a partition's log.
func (tb *testBroker) partitionLog(topic string, partition int32) *log.Log {
	tb.t.Helper()
	_, l, ok := tb.cluster.Partition(topic, partition)
	if !ok || l == nil {
		tb.t.Fatalf("no log for %s/%d", topic, partition)
	}
	return l
}

// batchSpec describes a record batch built by makeBatch.
type batchSpec struct {
	values    []string
	keys      [][]byte // keys[i] is record i's key; past the end or nil, none
	codec     int16    // 0 none, 1 gzip, 2 snappy, 4 zstd
	producer  int64    // -1 for none
	epoch     int16
	sequence  int32
	timestamp int64 // first record's timestamp; records are 1 ms apart
	attrs     int16 // extra attribute bits
}

func plainBatch(values ...string) batchSpec {
	return batchSpec{values: values, producer: -1, epoch: -1, sequence: -1, timestamp: time.Now().UnixMilli()}
}

func idempotentBatch(producer int64, epoch int16, sequence int32, values ...string) batchSpec {
	return batchSpec{values: values, producer: producer, epoch: epoch, sequence: sequence, timestamp: time.Now().UnixMilli()}
}

// makeBatch encodes a v2 record batch as a producer would, with its length
// and CRC-32C filled in.
func makeBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	var records []byte
	for i, v := range s.values {
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Value: []byte(v)}
		if i < len(s.keys) {
			r.Key = s.keys[i]
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // AppendTo includes the 1-byte varint of Length 0
		records = r.AppendTo(records)
	}
	switch s.codec {
	case 0:
	case 1:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(records)
		w.Close()
		records = buf.Bytes()
	case 2:
		records = s2.EncodeSnappy(nil, records)
	case 4:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		records = enc.EncodeAll(records, nil)
		enc.Close()
	default:
		t.Fatalf("codec %d not built by makeBatch", s.codec)
	}
	n := len(s.values)
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: s.codec | s.attrs,
		LastOffsetDelta: int32(n - 1), FirstTimestamp: s.timestamp, MaxTimestamp: s.timestamp + int64(n-1),
		ProducerID: s.producer, ProducerEpoch: s.epoch, FirstSequence: s.sequence,
		NumRecords: int32(n), Records: records,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// produceRaw sends one batch to one partition and returns the partition's
// response (nil for acks=0).
func (c *rawClient) produceRaw(version int16, topic string, partition int32, acks int16, batch []byte, correlationID int32) *kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if acks == 0 {
		c.send(frame(req, correlationID))
		return nil
	}
	resp := c.roundTrip(req, correlationID).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("produce response shape: %+v", resp)
	}
	return &resp.Topics[0].Partitions[0]
}

// fetchPart is one partition of a fetch request built by fetchRequest.
type fetchPart struct {
	topic     string
	partition int32
	offset    int64
	maxBytes  int32
}

func fetchRequest(version int16, maxWait time.Duration, minBytes, maxBytes int32, parts ...fetchPart) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(maxWait/time.Millisecond), minBytes, maxBytes
	req.SessionEpoch = -1
	for _, p := range parts {
		if len(req.Topics) == 0 || req.Topics[len(req.Topics)-1].Topic != p.topic {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, p.maxBytes
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// batchesIn splits record bytes into batch headers.
func batchesIn(t testing.TB, records []byte) []log.BatchHeader {
	t.Helper()
	var out []log.BatchHeader
	for pos := 0; pos < len(records); {
		h, err := recordbatch.ParseHeader(records[pos:])
		if err != nil || pos+h.Size() > len(records) {
			t.Fatalf("record bytes do not hold whole batches at %d: %v", pos, err)
		}
		out = append(out, h)
		pos += h.Size()
	}
	return out
}

// newClient is a franz-go client for the broker.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// initProducerID asks for a producer ID (and epoch) over c.
func (c *rawClient) initProducerID(version int16, id int64, epoch int16, correlationID int32) *kmsg.InitProducerIDResponse {
	c.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(version)
	req.ProducerID, req.ProducerEpoch = id, epoch
	return c.roundTrip(req, correlationID).(*kmsg.InitProducerIDResponse)
}
