package e2e

// Fetch sessions (KIP-227) with real clients: franz-go's consumer opens a
// session and then fetches incrementally over many partitions, kcat
// (librdkafka, sessionless) reads the same partitions, and kafka-go's
// Client.Fetch (session ID -1, epoch -1: a sessionless full fetch) reads
// what it produced.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestFetchSessionsClients(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBroker(t, "--metrics-listen", metricsAddr)
	metrics := "http://" + metricsAddr + "/metrics"
	const topic, partitions, perPartition = "sessions", 64, 2
	b.createTopic(t, topic, partitions, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// want[p] is what partition p holds, in order.
	want := make([][]string, partitions)
	produce := func(round int) {
		t.Helper()
		var records []*kgo.Record
		for p := range partitions {
			v := fmt.Sprintf("%d-%d", p, round)
			want[p] = append(want[p], v)
			records = append(records, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(v)})
		}
		if err := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	for round := range perPartition {
		produce(round)
	}

	// franz-go: everything in order per partition, then an append read
	// by an incremental fetch of the same session.
	created0 := scrapeCounter(t, metrics, "millrace_broker_fetch_sessions_created_total")
	incremental0 := scrapeCounter(t, metrics, "millrace_broker_incremental_fetches_total")
	consumer := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := make([][]string, partitions)
	consume := func(n int) {
		t.Helper()
		for read := 0; read < n; {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("franz-go poll: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got[r.Partition] = append(got[r.Partition], string(r.Value))
				read++
			})
		}
	}
	consume(partitions * perPartition)
	produce(perPartition)
	consume(partitions)
	for p := range partitions {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("franz-go read partition %d as %v, want %v", p, got[p], want[p])
		}
	}
	created := scrapeCounter(t, metrics, "millrace_broker_fetch_sessions_created_total") - created0
	incremental := scrapeCounter(t, metrics, "millrace_broker_incremental_fetches_total") - incremental0
	if created < 1 || incremental < 2 {
		t.Fatalf("franz-go: %v sessions created and %v incremental fetches, want a session and incremental fetches", created, incremental)
	}
	if n := scrapeCounter(t, metrics, "millrace_broker_fetch_session_partitions"); n < partitions {
		t.Fatalf("sessions hold %v partitions, want at least the consumer's %d", n, partitions)
	}
	t.Logf("franz-go: %v sessions, %v incremental fetches", created, incremental)
	consumer.Close()

	// kcat (librdkafka) reads every partition to its end. librdkafka 2.0
	// sends session ID 0, epoch -1 (it keeps no sessions), so it is served
	// full fetches; the log line shows whether a newer one does.
	created0 = scrapeCounter(t, metrics, "millrace_broker_fetch_sessions_created_total")
	incremental0 = scrapeCounter(t, metrics, "millrace_broker_incremental_fetches_total")
	lines := outputLines(run(t, 60*time.Second, "", "kcat", "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%p %s\n"))
	byPartition := make([][]string, partitions)
	for _, line := range lines {
		ps, v, _ := strings.Cut(line, " ")
		p, err := strconv.Atoi(ps)
		if err != nil || p < 0 || p >= partitions {
			t.Fatalf("kcat line %q", line)
		}
		byPartition[p] = append(byPartition[p], v)
	}
	for p := range partitions {
		if !slices.Equal(byPartition[p], want[p]) {
			t.Fatalf("kcat read partition %d as %v, want %v", p, byPartition[p], want[p])
		}
	}
	t.Logf("kcat: %v sessions, %v incremental fetches", scrapeCounter(t, metrics, "millrace_broker_fetch_sessions_created_total")-created0, scrapeCounter(t, metrics, "millrace_broker_incremental_fetches_total")-incremental0)

	// kafka-go's Client: Produce, then Fetch (session ID -1, epoch -1).
	kg := &kafkago.Client{Addr: kafkago.TCP(b.addr), Timeout: 10 * time.Second}
	pr, err := kg.Produce(ctx, &kafkago.ProduceRequest{
		Topic: topic, Partition: 3, RequiredAcks: kafkago.RequireAll,
		Records: kafkago.NewRecordReader(kafkago.Record{Value: kafkago.NewBytes([]byte("from kafka-go"))}),
	})
	if err == nil {
		err = pr.Error
	}
	if err != nil {
		t.Fatalf("kafka-go Produce: %v", err)
	}
	fr, err := kg.Fetch(ctx, &kafkago.FetchRequest{Topic: topic, Partition: 3, Offset: pr.BaseOffset, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: time.Second})
	if err == nil {
		err = fr.Error
	}
	if err != nil {
		t.Fatalf("kafka-go Fetch: %v", err)
	}
	r, err := fr.Records.ReadRecord()
	if err != nil {
		t.Fatalf("kafka-go Fetch: reading the record: %v", err)
	}
	v, err := io.ReadAll(r.Value)
	if err != nil || r.Offset != pr.BaseOffset || string(v) != "from kafka-go" {
		t.Fatalf("kafka-go Fetch at %d: offset %d value %q (%v)", pr.BaseOffset, r.Offset, v, err)
	}
}
