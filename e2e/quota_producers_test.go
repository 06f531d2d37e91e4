package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// pythonQuotaClient produces to or consumes from a topic's partition 0
// flat out with kafka-python, until its stdin closes: a consumer prints
// each poll's last offset; both print "throttled" once their metrics show
// a throttle, and at the end the largest throttle time the metrics hold
// (kafka-python 2.0.2 records throttle_time_ms but does not back off by
// itself: the broker's mute holds it).
const pythonQuotaClient = `import os, sys, threading, time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
mode, addr, topic, cid, size = sys.argv[1:6]
stop = threading.Event()
def watch():
    sys.stdin.read()
    stop.set()
threading.Thread(target=watch, daemon=True).start()
value = b'x' * int(size)
if mode == 'produce':
    c = KafkaProducer(bootstrap_servers=addr, client_id=cid, linger_ms=5, batch_size=1 << 20,
                      max_request_size=2 << 20, buffer_memory=4 << 20, max_block_ms=120000,
                      request_timeout_ms=120000)
    group, metric = 'producer-metrics', 'produce-throttle-time-max'
    def step():
        c.send(topic, value, partition=0)
else:
    c = KafkaConsumer(bootstrap_servers=addr, client_id=cid, enable_auto_commit=False,
                      max_partition_fetch_bytes=1 << 20)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    group, metric = 'consumer-fetch-manager-metrics', 'fetch-throttle-time-max'
    def step():
        for records in c.poll(timeout_ms=100).values():
            print('offset', records[-1].offset, flush=True)
def throttle():
    return c.metrics().get(group, {}).get(metric, 0)
said, checked = False, time.monotonic()
while not stop.is_set():
    step()
    if not said and time.monotonic() - checked > 0.1:
        checked = time.monotonic()
        if throttle() > 0:
            print('throttled', flush=True)
            said = True
print('throttle-max', throttle(), flush=True)
os._exit(0)
`

// startPythonQuotaClient runs pythonQuotaClient in mode ("produce" or
// "consume") as clientID; onOffset, if not nil, gets each offset a
// consumer prints. Its stop closes stdin and reads the throttle the
// script's metrics report.
func startPythonQuotaClient(t *testing.T, b *broker, mode, topic, clientID string, onOffset func(int64)) (throttled func() bool, stop func() (float64, string)) {
	var said, reported maxThrottle
	p := startClientProcess(t, func(line string) {
		switch field := strings.Fields(line); {
		case len(field) == 2 && field[0] == "offset" && onOffset != nil:
			if o, err := strconv.ParseInt(field[1], 10, 64); err == nil {
				onOffset(o)
			}
		case line == "throttled":
			said.add(1)
		case len(field) == 2 && field[0] == "throttle-max":
			if ms, err := strconv.ParseFloat(field[1], 64); err == nil {
				reported.add(ms)
			}
		}
	}, "/usr/bin/python3", "-c", pythonQuotaClient, mode, b.addr, topic, clientID, strconv.Itoa(quotaRecord))
	return func() bool { return said.get() > 0 }, func() (float64, string) {
		p.stdin.Close()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Errorf("kafka-python did not stop within 30 s of its stdin closing")
		}
		return reported.get(), p.output()
	}
}

// franzQuotaProducer produces quotaRecord-byte records to topic as
// clientID with franz-go, flat out, and reports its throttles through
// kgo.HookBrokerThrottle.
func franzQuotaProducer(t *testing.T, b *broker, adm *kadm.Client, topic, clientID string) quotaClient {
	var throttle maxThrottle
	cl := b.client(t, kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic), kgo.WithHooks(&throttle), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		value := make([]byte, quotaRecord)
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
	}()
	stop := func() (float64, string) {
		cancel()
		<-done
		return throttle.get(), ""
	}
	t.Cleanup(func() { stop() })
	return quotaClient{
		name:      "franz-go",
		throttled: func() bool { return throttle.get() > 0 },
		progress:  func() int64 { return logBytes(t, adm, topic) },
		stop:      stop,
	}
}

// kcatQuotaProducer produces lines of quotaRecord bytes to topic as
// clientID with kcat, fed flat out; librdkafka reports each throttle
// through its throttle callback, which kcat prints. (Debian's kcat 1.7.1
// does not print librdkafka's statistics JSON, whose brokers[].throttle
// holds the same numbers.)
func kcatQuotaProducer(t *testing.T, b *broker, adm *kadm.Client, topic, clientID string) quotaClient {
	var throttle maxThrottle
	p := startClientProcess(t, func(line string) { throttle.add(kcatThrottle(line)) },
		"kcat", "-b", b.addr, "-P", "-t", topic, "-p", "0", "-X", "client.id="+clientID,
		"-X", "queue.buffering.max.messages=256")
	ctx, cancel := context.WithCancel(context.Background())
	go writeFlatOut(ctx, p.stdin)
	t.Cleanup(cancel)
	return quotaClient{
		name:      "kcat",
		throttled: func() bool { return throttle.get() > 0 },
		progress:  func() int64 { return logBytes(t, adm, topic) },
		stop: func() (float64, string) {
			cancel()
			p.cmd.Process.Kill()
			<-p.done
			return throttle.get(), p.output()
		},
	}
}

// TestQuotaProducerClients: franz-go, kcat and kafka-python producers,
// each with a producer_byte_rate of 1 MiB/s on its client ID, produce flat
// out at once; each is held within 10% of it over 30 s and reports throttle
// time, and an unquota'd franz-go producer's ack latency stays as it was.
func TestQuotaProducerClients(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	adm := b.admin(t)
	clients := map[string]func(t *testing.T, topic string) quotaClient{
		"franz-go": func(t *testing.T, topic string) quotaClient {
			return franzQuotaProducer(t, b, adm, topic, topic)
		},
		"kcat": func(t *testing.T, topic string) quotaClient {
			return kcatQuotaProducer(t, b, adm, topic, topic)
		},
		"kafka-python": func(t *testing.T, topic string) quotaClient {
			throttled, stop := startPythonQuotaClient(t, b, "produce", topic, topic, nil)
			return quotaClient{name: "kafka-python", throttled: throttled, progress: func() int64 { return logBytes(t, adm, topic) }, stop: stop}
		},
	}
	for name := range clients {
		b.createTopic(t, "quota-"+name, 1, nil)
		setByteQuota(t, b, "producer_byte_rate", "quota-"+name)
	}
	b.createTopic(t, "unquotaed", 1, nil)

	// The unquota'd producer sends a record every 10 ms and waits for
	// its ack.
	lat := &latencies{}
	free := b.client(t, kgo.ClientID("unquotaed"), kgo.DefaultProduceTopic("unquotaed"), kgo.ProducerLinger(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		value := make([]byte, probeRecord)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			if err := free.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				if ctx.Err() == nil {
					t.Errorf("the unquota'd producer: %v", err)
				}
				return
			}
			lat.add(start, time.Since(start))
		}
	}()
	baseline := time.Now()
	waitfor.Until(t, time.Minute, "300 acks of the unquota'd producer alone", func() bool {
		return lat.count(baseline, time.Now()) >= 300
	})
	alone := time.Now()

	var started []quotaClient
	for name, start := range clients {
		started = append(started, start(t, "quota-"+name))
	}
	if windows := measureQuotas(t, started); windows != nil {
		checkUnquotaedLatency(t, "the unquota'd producer's ack latency", lat, baseline, alone, windows)
	}
}
