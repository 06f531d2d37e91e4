package e2e

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// quotaFillRecords is how many quotaRecord-byte records the consumers'
// topic holds: a first burst of 11 MiB (the bucket's 11 windows), a
// second or two until a slow consumer is throttled, 30 MiB over the
// window, and some margin: about 50 MiB.
const quotaFillRecords = 5_200

// consumedOffset is the next offset a consumer is to read, safe for
// concurrent use.
type consumedOffset struct{ next atomic.Int64 }

// saw records that offset o was read.
func (c *consumedOffset) saw(o int64) {
	for {
		cur := c.next.Load()
		if o+1 <= cur || c.next.CompareAndSwap(cur, o+1) {
			return
		}
	}
}

// franzQuotaConsumer reads topic's partition 0 from the start as clientID
// with franz-go, reporting throttles through kgo.HookBrokerThrottle.
func franzQuotaConsumer(t *testing.T, b *broker, topic, clientID string, read *consumedOffset) (throttled func() bool, stop func() (float64, string)) {
	var throttle maxThrottle
	cl := b.client(t, kgo.ClientID(clientID), kgo.WithHooks(&throttle),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { read.saw(r.Offset) })
		}
	}()
	stop = func() (float64, string) {
		cancel()
		<-done
		return throttle.get(), ""
	}
	t.Cleanup(func() { stop() })
	return func() bool { return throttle.get() > 0 }, stop
}

// kcatQuotaConsumer reads topic's partition 0 from the start as clientID
// with kcat, printing each offset; librdkafka's local queue is held to
// 1 MiB so that what kcat prints is what the broker sent, give or take
// that.
func kcatQuotaConsumer(t *testing.T, b *broker, topic, clientID string, read *consumedOffset) (throttled func() bool, stop func() (float64, string)) {
	var throttle maxThrottle
	p := startClientProcess(t, func(line string) {
		if o, err := strconv.ParseInt(line, 10, 64); err == nil {
			read.saw(o)
			return
		}
		throttle.add(kcatThrottle(line))
	}, "kcat", "-b", b.addr, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-u", "-f", "%o\n",
		"-X", "client.id="+clientID, "-X", "queued.max.messages.kbytes=1024")
	return func() bool { return throttle.get() > 0 }, func() (float64, string) {
		p.cmd.Process.Kill()
		<-p.done
		return throttle.get(), p.output()
	}
}

// TestQuotaConsumerClients: franz-go, kcat and kafka-python consumers,
// each with a consumer_byte_rate of 1 MiB/s on its client ID, read one
// filled topic from the start at once; each is held within 10% of it over
// 30 s and reports throttle time, and an unquota'd franz-go consumer's
// latency (from a record's produce to its fetch) stays as it was.
func TestQuotaConsumerClients(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := b.admin(t)
	const topic = "quota-filled"
	b.createTopic(t, topic, 1, nil)
	b.createTopic(t, "unquotaed", 1, nil)
	names := []string{"franz-go", "kcat", "kafka-python"}
	for _, name := range names {
		setByteQuota(t, b, "consumer_byte_rate", "quota-"+name)
	}

	// Filled fast, unquota'd; the log's bytes per record turn a
	// consumer's offsets into the bytes the broker sent it.
	filler := b.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, quotaRecord)
	for range quotaFillRecords {
		filler.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("fill %s: %v", topic, err)
			}
		})
	}
	if err := filler.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	perRecord := float64(logBytes(t, adm, topic)) / quotaFillRecords

	// The unquota'd consumer reads what another unquota'd client
	// produces every 10 ms: its latency is from the record's timestamp,
	// set when it was produced, to its fetch.
	lat := &latencies{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	producer := b.client(t, kgo.DefaultProduceTopic("unquotaed"), kgo.ProducerLinger(0))
	consumer := b.client(t, kgo.ClientID("unquotaed"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"unquotaed": {0: kgo.NewOffset().AtStart()}}))
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			producer.Produce(ctx, &kgo.Record{Value: value[:probeRecord]}, nil)
		}
	}()
	go func() {
		for ctx.Err() == nil {
			consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { lat.add(r.Timestamp, time.Since(r.Timestamp)) })
		}
	}()
	baseline := time.Now()
	waitfor.Until(t, time.Minute, "300 records read by the unquota'd consumer alone", func() bool {
		return lat.count(baseline, time.Now()) >= 300
	})
	alone := time.Now()

	var clients []quotaClient
	for _, name := range names {
		read := &consumedOffset{}
		var throttled func() bool
		var stop func() (float64, string)
		switch name {
		case "franz-go":
			throttled, stop = franzQuotaConsumer(t, b, topic, "quota-"+name, read)
		case "kcat":
			throttled, stop = kcatQuotaConsumer(t, b, topic, "quota-"+name, read)
		case "kafka-python":
			throttled, stop = startPythonQuotaClient(t, b, "consume", topic, "quota-"+name, read.saw)
		}
		clients = append(clients, quotaClient{
			name:      name,
			throttled: throttled,
			progress:  func() int64 { return int64(float64(read.next.Load()) * perRecord) },
			stop:      stop,
		})
	}
	if windows := measureQuotas(t, clients); windows != nil {
		checkUnquotaedLatency(t, "the unquota'd consumer's latency", lat, baseline, alone, windows)
	}
}
