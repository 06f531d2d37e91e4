package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// rdkafkaProducer is a producer written against librdkafka's C API (Debian's
// librdkafka-dev, 2.0), as applications under kcat, confluent-kafka and the
// other librdkafka bindings produce. It sends N records to partition 0 of a
// topic and prints what the delivery reports said:
//
//	notimestamp  every record with timestamp -1 (NO_TIMESTAMP); librdkafka
//	             then writes the batch's maxTimestamp as 0
//	keyless      every 10th record without a key, one record per batch
//	             (batch.num.messages=1)
const rdkafkaProducer = `
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int delivered, invalid_record, other_failed;
static char first_error[256];

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
	if (!m->err)
		delivered++;
	else if (m->err == RD_KAFKA_RESP_ERR_INVALID_RECORD)
		invalid_record++;
	else
		other_failed++;
	if (m->err && !first_error[0])
		snprintf(first_error, sizeof first_error, "%s", rd_kafka_err2name(m->err));
}

int main(int argc, char **argv) {
	char err[512], value[64], key[64];
	if (argc != 5) {
		fprintf(stderr, "usage: %s BROKERS TOPIC notimestamp|keyless N\n", argv[0]);
		return 2;
	}
	const char *topic = argv[2], *mode = argv[3];
	int n = atoi(argv[4]), keyless = strcmp(mode, "keyless") == 0;
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err) ||
	    rd_kafka_conf_set(conf, "linger.ms", "5", err, sizeof err) ||
	    (keyless && rd_kafka_conf_set(conf, "batch.num.messages", "1", err, sizeof err))) {
		fprintf(stderr, "config: %s\n", err);
		return 1;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "producer: %s\n", err);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		snprintf(value, sizeof value, "%s-%03d", mode, i);
		snprintf(key, sizeof key, "key-%03d", i);
		int withKey = !(keyless && i % 10 == 0);
		/* A variable: RD_KAFKA_V_TIMESTAMP casts its argument unparenthesised. */
		int64_t timestamp = keyless ? 0 : -1;
		rd_kafka_resp_err_t e;
		do {
			e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
			                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			                      RD_KAFKA_V_VALUE(value, strlen(value)),
			                      RD_KAFKA_V_KEY(withKey ? key : NULL, withKey ? strlen(key) : 0),
			                      RD_KAFKA_V_TIMESTAMP(timestamp), RD_KAFKA_V_END);
			if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
				rd_kafka_poll(rk, 100);
		} while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
		if (e) {
			fprintf(stderr, "produce: %s\n", rd_kafka_err2str(e));
			return 1;
		}
	}
	if (rd_kafka_flush(rk, 30000)) {
		fprintf(stderr, "flush timed out\n");
		return 1;
	}
	printf("delivered=%d invalid_record=%d other_failed=%d first_error=%s\n",
	       delivered, invalid_record, other_failed, first_error[0] ? first_error : "none");
	rd_kafka_destroy(rk);
	return 0;
}
`

// buildRdkafkaProducer compiles rdkafkaProducer with gcc and returns the
// binary's path.
func buildRdkafkaProducer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "producer.c")
	if err := os.WriteFile(src, []byte(rdkafkaProducer), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "producer")
	run(t, time.Minute, "", "gcc", "-O1", "-Wall", "-Werror", "-o", bin, src, "-lrdkafka")
	return bin
}

// deliveryCounts runs the compiled producer and parses its report.
func deliveryCounts(t *testing.T, bin string, args ...string) map[string]string {
	t.Helper()
	out := strings.TrimSpace(run(t, time.Minute, "", bin, args...))
	counts := map[string]string{}
	for _, field := range strings.Fields(out) {
		name, value, _ := strings.Cut(field, "=")
		counts[name] = value
	}
	return counts
}

// Records a librdkafka application produces with timestamp -1 are
// delivered and read back, on a CreateTime topic (timestamp -1, as sent)
// and on a LogAppendTime one (the broker's time), though librdkafka writes
// the batch's maxTimestamp as 0 under them.
func TestLibrdkafkaNoTimestampRecords(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	appendTime := "LogAppendTime"
	b.createTopic(t, "nots-create", 1, nil)
	b.createTopic(t, "nots-append", 1, map[string]*string{"message.timestamp.type": &appendTime})
	bin := buildRdkafkaProducer(t)
	const n = 20
	for _, topic := range []string{"nots-create", "nots-append"} {
		got := deliveryCounts(t, bin, b.addr, topic, "notimestamp", strconv.Itoa(n))
		if got["delivered"] != strconv.Itoa(n) || got["invalid_record"] != "0" || got["other_failed"] != "0" {
			t.Fatalf("%s: delivery reports %v, want all %d delivered", topic, got, n)
		}
		// kcat (librdkafka too) reads them back, and franz-go tells their
		// timestamps exactly (kcat 1.7 prints -1 as an unsigned 32-bit number).
		lines := outputLines(run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"))
		if len(lines) != n {
			t.Fatalf("%s: kcat read %d records, want %d: %q", topic, len(lines), n, lines)
		}
		consumer := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var records []*kgo.Record
		for len(records) < n && ctx.Err() == nil {
			records = append(records, consumer.PollFetches(ctx).Records()...)
		}
		cancel()
		if len(records) != n {
			t.Fatalf("%s: franz-go read %d records, want %d", topic, len(records), n)
		}
		for i, r := range records {
			want := fmt.Sprintf("notimestamp-%03d", i)
			if lines[i] != want || string(r.Value) != want {
				t.Fatalf("%s: record %d is %q (kcat) and %q (franz-go), want %q", topic, i, lines[i], r.Value, want)
			}
			ms := r.Timestamp.UnixMilli()
			if topic == "nots-create" && ms != -1 {
				t.Fatalf("%s: record %d has timestamp %d, want -1 as produced", topic, i, ms)
			}
			if topic == "nots-append" && time.Since(r.Timestamp).Abs() > time.Hour {
				t.Fatalf("%s: record %d has timestamp %v, want the broker's append time", topic, i, r.Timestamp)
			}
		}
	}
}

// A batch with keyless records on a compacted topic: librdkafka 2.0
// (Produce v7, from before per-record errors) sending one record per batch
// gets exactly the 10 keyless ones refused with INVALID_RECORD and the 90
// others delivered; a client on Produce v8+ sending all 100 in one batch
// is told which 10 records were refused (KIP-467's record_errors, as
// Kafka answers: librdkafka 2.4+ and the Java client fail those and not
// the rest for their own fault), and sends the other 90 again. Each refusal
// is in the broker's log and in millrace_broker_produce_refused_total.
func TestProduceRecordErrorsOnCompactedTopic(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBroker(t, "--metrics-listen", metricsAddr)
	compact := "compact"
	b.createTopic(t, "keyed-rd", 1, map[string]*string{"cleanup.policy": &compact})
	b.createTopic(t, "keyed-v9", 1, map[string]*string{"cleanup.policy": &compact})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(t, kgo.MaxVersions(kversion.V3_0_0())) // Produce v9

	got := deliveryCounts(t, buildRdkafkaProducer(t), b.addr, "keyed-rd", "keyless", "100")
	if got["delivered"] != "90" || got["invalid_record"] != "10" || got["other_failed"] != "0" {
		t.Fatalf("librdkafka delivery reports %v, want 90 delivered and 10 INVALID_RECORD", got)
	}
	if end := endOffset(ctx, t, cl, "keyed-rd"); end != 90 {
		t.Fatalf("keyed-rd holds %d records, want the 90 keyed ones", end)
	}

	// One batch of 100, records 0, 10, ..., 90 without a key.
	var payload []byte
	var keyed [][]byte
	for i := range 100 {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(fmt.Sprintf("v%03d", i))}
		if i%10 != 0 {
			r.Key = []byte(fmt.Sprintf("k%03d", i))
			keyed = append(keyed, r.Value)
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // AppendTo counts Length's own byte
		payload = r.AppendTo(payload)
	}
	broker := cl.Broker(1)
	sp := produceV9(ctx, t, broker, "keyed-v9", forgedBatch(0, 99, 100, time.Now().UnixMilli(), payload))
	if sp.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("error %d, want INVALID_RECORD", sp.ErrorCode)
	}
	if len(sp.ErrorRecords) != 10 {
		t.Fatalf("%d record errors, want the 10 keyless records: %+v", len(sp.ErrorRecords), sp.ErrorRecords)
	}
	for i, r := range sp.ErrorRecords {
		if r.RelativeOffset != int32(10*i) || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "no key") {
			t.Fatalf("record error %d: index %d, message %v; want index %d and why", i, r.RelativeOffset, r.ErrorMessage, 10*i)
		}
	}
	if sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "10 record(s) refused") {
		t.Fatalf("error message %v", sp.ErrorMessage)
	}
	// The client sends the 90 records that were not at fault again.
	payload = payload[:0]
	for i, v := range keyed {
		r := kmsg.Record{OffsetDelta: int32(i), Key: append([]byte("k"), v...), Value: v}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		payload = r.AppendTo(payload)
	}
	if sp := produceV9(ctx, t, broker, "keyed-v9", forgedBatch(0, 89, 90, time.Now().UnixMilli(), payload)); sp.ErrorCode != 0 {
		t.Fatalf("the 90 keyed records again: error %d %v", sp.ErrorCode, sp.ErrorMessage)
	}
	if end := endOffset(ctx, t, cl, "keyed-v9"); end != 90 {
		t.Fatalf("keyed-v9 holds %d records, want 90", end)
	}

	// librdkafka's default client ID is "rdkafka"; the log line is
	// rate-limited per reason, so the first refusal is the one logged.
	b.waitLog(`msg="produce refused"`, 1, 10*time.Second)
	line := ""
	for l := range strings.Lines(b.log()) {
		if strings.Contains(l, `msg="produce refused"`) {
			line = l
			break
		}
	}
	for _, want := range []string{"client_id=rdkafka", "topic=keyed-rd", "partition=0", "reason=INVALID_RECORD", "remote=127.0.0.1:", "no key"} {
		if !strings.Contains(line, want) {
			t.Errorf("refusal log line lacks %q: %s", want, line)
		}
	}
	if n := gauge(t, "http://"+metricsAddr, `millrace_broker_produce_refused_total{reason="INVALID_RECORD"}`); n != "11" {
		t.Errorf("produce refusals counted %q, want 11 (10 batches of librdkafka's, 1 of 100 records)", n)
	}
}

// produceV9 sends one batch to partition 0 of topic with acks=1 at the
// client's Produce version (v9 under kversion.V3_0_0) and returns the
// partition's response.
func produceV9(ctx context.Context, t *testing.T, broker *kgo.Broker, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 10000
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
	resp := kresp.(*kmsg.ProduceResponse)
	if resp.Version < 8 {
		t.Fatalf("produce went out at v%d, want v8+ (per-record errors)", resp.Version)
	}
	return resp.Topics[0].Partitions[0]
}
