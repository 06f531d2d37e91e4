package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Hostile and careless clients, each sent by a test client against one real
// broker: every request gets its Kafka error or a closed connection, and
// afterwards the broker is still small, still serves a normal producer and
// consumer, and still answers /metrics with text Prometheus can parse.
func TestHostileClients(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBroker(t,
		"--metrics-listen", metricsAddr,
		// Small enough that the test reaches them quickly; the defaults
		// are in docs/limits.md.
		"--set", "millrace.max.groups=2000",
		"--set", "max.connections.per.ip=500",
		"--set", "millrace.request.read.timeout.ms=3000",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b.createTopic(t, "steady", 1, nil)
	cl := b.client(t)
	// Requests that must reach this broker as written, at versions that
	// name topics (Produce v9, not v13's topic IDs).
	direct := b.client(t, kgo.MaxVersions(kversion.V3_0_0())).Broker(1)

	t.Run("huge partition counts", func(t *testing.T) {
		for _, validateOnly := range []bool{true, false} {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.ValidateOnly = validateOnly
			topic := kmsg.NewCreateTopicsRequestTopic()
			topic.Topic = fmt.Sprintf("huge-%v", validateOnly)
			topic.NumPartitions = math.MaxInt32
			topic.ReplicationFactor = 1
			req.Topics = append(req.Topics, topic)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Topics[0].ErrorCode; got != kerr.InvalidPartitions.Code {
				t.Errorf("CreateTopics with 2^31-1 partitions (validate_only=%v): error %v, want INVALID_PARTITIONS", validateOnly, kerr.ErrorForCode(got))
			}
		}
		b.createTopic(t, "grow", 1, nil)
		req := kmsg.NewPtrCreatePartitionsRequest()
		topic := kmsg.NewCreatePartitionsRequestTopic()
		topic.Topic, topic.Count = "grow", math.MaxInt32
		req.Topics = append(req.Topics, topic)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].ErrorCode; got != kerr.InvalidPartitions.Code {
			t.Errorf("CreatePartitions to 2^31-1: error %v, want INVALID_PARTITIONS", kerr.ErrorForCode(got))
		}
	})

	t.Run("bad batches", func(t *testing.T) {
		junk := make([]byte, 200)
		rand.Read(junk)
		now := time.Now().UnixMilli()
		cases := []struct {
			name  string
			batch []byte
			want  []int16
		}{
			{"junk zstd payload", forgedBatch(4, 0, 1, now, junk), []int16{kerr.CorruptMessage.Code}},
			{"junk lz4 payload", forgedBatch(3, 0, 1, now, junk), []int16{kerr.CorruptMessage.Code}},
			{"2^31-1 records claimed, one sent", forgedBatch(0, math.MaxInt32-1, math.MaxInt32, now, oneRecord), []int16{kerr.CorruptMessage.Code, kerr.InvalidRecord.Code}},
			{"year 9999", forgedBatch(0, 0, 1, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), oneRecord), []int16{kerr.InvalidTimestamp.Code}},
		}
		before := endOffset(ctx, t, cl, "steady")
		for _, c := range cases {
			if got := produceRaw(ctx, t, direct, "steady", c.batch); !slices.Contains(c.want, got) {
				t.Errorf("%s: produce answered %v, want one of %v", c.name, kerr.ErrorForCode(got), c.want)
			}
		}
		if after := endOffset(ctx, t, cl, "steady"); after != before {
			t.Errorf("refused batches moved the log end offset from %d to %d", before, after)
		}
	})

	t.Run("array count bombs", func(t *testing.T) {
		// Metadata v4 whose topic array claims millions of empty names:
		// 2 bytes each on the wire, many times that once decoded. One
		// frame far over millrace.control.request.max.bytes, one just
		// within it.
		for _, size := range []int{20 << 20, 1<<20 - 64} {
			header := requestHeader(3, 4, "bomb")
			n := (size - len(header) - 5) / 2
			body := binary.BigEndian.AppendUint32(header, uint32(n))
			body = append(body, make([]byte, 2*n)...)
			body = append(body, 0) // allow_auto_topic_creation
			rssBefore := rssKiB(t, b)
			nc := dialBroker(t, b)
			// Either an answer or a closed connection, which may come
			// while the frame is still being written; never a broker
			// that swells.
			if _, err := nc.Write(frame(body)); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
				t.Fatalf("sending a %d-byte frame: %v", size, err)
			}
			nc.SetReadDeadline(time.Now().Add(20 * time.Second))
			var answerSize [4]byte
			if _, err := io.ReadFull(nc, answerSize[:]); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%d-byte frame: broker neither answered nor closed the connection", size)
			}
			if grew := rssKiB(t, b) - rssBefore; grew > 64<<10 {
				t.Errorf("broker RSS grew by %d MiB decoding one %d-byte frame", grew>>10, size)
			}
		}
	})

	t.Run("stalled connections", func(t *testing.T) {
		// 2,000 connections that send a size prefix and nothing more: the
		// broker refuses those over max.connections.per.ip and closes the
		// rest once a frame has taken longer than its read timeout.
		const conns = 2000
		var wg sync.WaitGroup
		var mu sync.Mutex
		var open, dialFailed int
		start := time.Now()
		for i := 0; i < conns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nc, err := net.DialTimeout("tcp", b.addr, 10*time.Second)
				if err != nil {
					mu.Lock()
					dialFailed++
					mu.Unlock()
					return
				}
				defer nc.Close()
				nc.Write([]byte{0, 0, 0x10, 0})
				nc.SetReadDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.Copy(io.Discard, nc); errors.Is(err, os.ErrDeadlineExceeded) {
					mu.Lock()
					open++
					mu.Unlock()
				}
			}()
		}
		// Meanwhile a normal client is served.
		produceOne(ctx, t, cl, "steady", "during stalled connections")
		wg.Wait()
		if open > 0 {
			t.Errorf("%d of %d stalled connections were still open after 30 s", open, conns)
		}
		t.Logf("%d stalled connections closed in %v (%d dials refused)", conns-dialFailed, time.Since(start).Round(time.Millisecond), dialFailed)
		if rss := rssKiB(t, b); rss > 256<<10 {
			t.Errorf("broker RSS %d MiB after the stalled connections", rss>>10)
		}
	})

	t.Run("fresh group ids", func(t *testing.T) {
		// 10,000 simple commits, each to a new group: the broker keeps at
		// most millrace.max.groups of them and refuses the rest.
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[int16]int{}
		work := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					code := commitOffset(ctx, t, direct, fmt.Sprintf("fresh-%05d", i))
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			}()
		}
		for i := 0; i < 10000; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		if codes[0] > 2000 || codes[0] == 0 {
			t.Errorf("commits to fresh groups: %v (code: count); want at most 2000 accepted and the rest refused", codes)
		}
		listed, err := kadm.NewClient(cl).ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) > 2000 {
			t.Errorf("broker lists %d groups, want at most 2000", len(listed))
		}
		if got := commitOffset(ctx, t, direct, strings.Repeat("g", 100_000)); got != kerr.InvalidGroupID.Code {
			t.Errorf("commit with a 100 KB group id: %v, want INVALID_GROUP_ID", kerr.ErrorForCode(got))
		}
	})

	t.Run("InitProducerId naming another producer", func(t *testing.T) {
		owner := b.client(t, kgo.DefaultProduceTopic("steady"))
		produceOne(ctx, t, owner, "steady", "owner's first")
		described, err := kadm.NewClient(cl).DescribeProducers(ctx, kadm.TopicsSet{"steady": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		var id int64 = -1
		var epoch int16
		described.EachProducer(func(p kadm.DescribedProducer) { id, epoch = p.ProducerID, p.ProducerEpoch })
		if id < 0 {
			t.Fatalf("no producer described: %+v", described)
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		req.ProducerID, req.ProducerEpoch = id, epoch
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == 0 && resp.ProducerID == id {
			t.Errorf("InitProducerId naming producer %d (epoch %d) got that id back with epoch %d; want a fresh id", id, epoch, resp.ProducerEpoch)
		}
		// The owner is not fenced.
		produceOne(ctx, t, owner, "steady", "owner's second")
	})

	t.Run("old client metric labels", func(t *testing.T) {
		// Produce v6: the topic name is read from the recycled request frame.
		old := b.client(t, kgo.MaxVersions(kversion.V2_0_0()), kgo.AllowAutoTopicCreation())
		for _, topic := range []string{"label-one", "label-two", "label-three"} {
			b.createTopic(t, topic, 1, nil)
			for i := 0; i < 20; i++ {
				produceOne(ctx, t, old, topic, strings.Repeat("v", i))
			}
		}
	})

	// Afterwards: small, serving and measurable.
	if rss := rssKiB(t, b); rss > 256<<10 {
		t.Errorf("broker RSS %d MiB after the hostile clients, want < 256", rss>>10)
	}
	produceOne(ctx, t, cl, "steady", "after")
	consumer := b.client(t, kgo.ConsumeTopics("steady"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for !slices.Contains(got, "after") && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consuming after the hostile clients: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	checkMetrics(t, "http://"+metricsAddr+"/metrics", "label-one", "label-two", "label-three")
}

// oneRecord is a v2 record body: offset delta 0, no key, value "x".
var oneRecord = []byte{14, 0, 0, 0, 1, 2, 'x', 0}

// forgedBatch encodes a v2 record batch with a valid CRC-32C around payload,
// whatever it holds, so that only the broker's own validation can refuse it.
func forgedBatch(codec int16, lastOffsetDelta, count int32, timestamp int64, payload []byte) []byte {
	const headerSize = 61
	b := make([]byte, headerSize, headerSize+len(payload))
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(headerSize-12+len(payload)))
	be.PutUint32(b[12:], math.MaxUint32) // partition leader epoch -1
	b[16] = 2                            // magic
	be.PutUint16(b[21:], uint16(codec))
	be.PutUint32(b[23:], uint32(lastOffsetDelta))
	be.PutUint64(b[27:], uint64(timestamp))
	be.PutUint64(b[35:], uint64(timestamp))
	be.PutUint64(b[43:], math.MaxUint64) // producer id -1
	be.PutUint16(b[51:], math.MaxUint16) // producer epoch -1
	be.PutUint32(b[53:], math.MaxUint32) // base sequence -1
	be.PutUint32(b[57:], uint32(count))
	b = append(b, payload...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceRaw sends one batch to partition 0 of topic with acks=1 and returns
// the partition's error code.
func produceRaw(ctx context.Context, t *testing.T, broker *kgo.Broker, topic string, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = 1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := broker.Request(ctx, req)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return kresp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// commitOffset commits offset 0 of "steady" for group as a simple
// (generation -1) commit and returns the partition's error code.
func commitOffset(ctx context.Context, t *testing.T, broker *kgo.Broker, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 2
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "steady"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := broker.Request(ctx, req)
	if err != nil {
		t.Errorf("offset commit for a group of %d bytes: %v", len(group), err)
		return -1
	}
	return kresp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

// endOffset returns the log end offset of partition 0 of topic.
func endOffset(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// produceOne produces one record synchronously or fails the test.
func produceOne(ctx context.Context, t *testing.T, cl *kgo.Client, topic, value string) {
	t.Helper()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("producing %q to %s: %v", value, topic, err)
	}
}

// requestHeader is a v1 request header (non-flexible APIs).
func requestHeader(key, version int16, clientID string) []byte {
	h := binary.BigEndian.AppendUint16(nil, uint16(key))
	h = binary.BigEndian.AppendUint16(h, uint16(version))
	h = binary.BigEndian.AppendUint32(h, 1)
	h = binary.BigEndian.AppendUint16(h, uint16(len(clientID)))
	return append(h, clientID...)
}

// frame prefixes body with its size.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func dialBroker(t *testing.T, b *broker) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// checkMetrics fetches url, which must answer 200 with text Prometheus
// parses, and whose topic labels include each of topics exactly.
func checkMetrics(t *testing.T, url string, topics ...string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics answered %s:\n%s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not parseable: %v", err)
	}
	labels := map[string]bool{}
	for _, family := range families {
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "topic" {
					labels[l.GetValue()] = true
				}
			}
		}
	}
	for _, topic := range topics {
		if !labels[topic] {
			t.Errorf("/metrics has no series labelled topic=%q (labels: %v)", topic, labels)
		}
	}
}
