package e2e

// Topic settings about the stored batch format, as clients use them:
// compression.type makes the broker store an uncompressed producer's
// batches compressed (librdkafka's test 0081), and message.format.version
// is accepted and described as Kafka 3.x does (its test 0092).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// segmentCodecs returns the compression codec of every batch in the
// segment files of topic's partition 0 under data, in log order.
func segmentCodecs(t *testing.T, data, topic string) []int {
	t.Helper()
	var segments []string
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == topic+"-0" && strings.HasSuffix(path, ".log") {
			segments = append(segments, path)
		}
		return err
	})
	if err != nil || len(segments) == 0 {
		t.Fatalf("no segment of %s-0 under %s: %v", topic, data, err)
	}
	var codecs []int
	for _, segment := range segments { // WalkDir lists them in base-offset order
		b, err := os.ReadFile(segment)
		if err != nil {
			t.Fatal(err)
		}
		// A batch: baseOffset int64, length int32 (bytes after it), ...,
		// attributes int16 at byte 21, whose bits 0-2 are the codec.
		for pos := 0; pos+23 <= len(b); {
			length := int(binary.BigEndian.Uint32(b[pos+8:]))
			if length == 0 {
				break // preallocated tail
			}
			codecs = append(codecs, int(binary.BigEndian.Uint16(b[pos+21:])&0x07))
			pos += 12 + length
		}
	}
	return codecs
}

// TestCompressionTypeZstd: on a topic with compression.type=zstd, the
// batches of uncompressed producers (franz-go, kcat, kafka-python) and of
// an lz4 one are stored as zstd, and franz-go, kcat and kafka-python read
// every record back.
func TestCompressionTypeZstd(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	topic := "zstd-stored"
	b.createTopic(t, topic, 1, map[string]*string{"compression.type": kadm.StringPtr("zstd")})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var want []string
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.Lz4Compression()} {
		cl := b.client(t, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(0))
		var records []*kgo.Record
		for i := 0; i < 5; i++ {
			// Compressible, or franz-go sends the batch uncompressed.
			v := fmt.Sprintf("franz-%d-%d-%s", len(want)/5, i, strings.Repeat("r", 100))
			records = append(records, &kgo.Record{Topic: topic, Value: []byte(v)})
			want = append(want, v)
		}
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	kcatLines := []string{"kcat-0", "kcat-1", "kcat-2"}
	run(t, 30*time.Second, strings.Join(kcatLines, "\n")+"\n", "kcat", "-b", b.addr, "-P", "-t", topic, "-z", "none")
	want = append(want, kcatLines...)
	run(t, time.Minute, "", "/usr/bin/python3", "-c", `
import sys
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], compression_type=None, acks='all')
for i in range(3):
    p.send(sys.argv[2], value=b'python-%d' % i)
p.flush()
p.close()
`, b.addr, topic)
	want = append(want, "python-0", "python-1", "python-2")

	codecs := segmentCodecs(t, b.data, topic)
	t.Logf("stored codecs: %v", codecs)
	if len(codecs) < 4 {
		t.Fatalf("%d batches stored, want at least one per producer", len(codecs))
	}
	for i, codec := range codecs {
		if codec != 4 {
			t.Errorf("batch %d of %d is stored with codec %d, want 4 (zstd)", i, len(codecs), codec)
		}
	}

	consumer := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var franz []string
	for len(franz) < len(want) && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) { franz = append(franz, string(r.Value)) })
	}
	kcat := outputLines(run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"))
	python := outputLines(run(t, time.Minute, "", "/usr/bin/python3", "-c", `
import sys
from kafka import KafkaConsumer
c = KafkaConsumer(sys.argv[2], bootstrap_servers=sys.argv[1], auto_offset_reset='earliest',
                  enable_auto_commit=False, consumer_timeout_ms=10000)
n = int(sys.argv[3])
seen = []
for m in c:
    seen.append(m.value.decode())
    if len(seen) == n:
        break
c.close()
print('\n'.join(seen))
`, b.addr, topic, fmt.Sprint(len(want))))
	for reader, got := range map[string][]string{"franz-go": franz, "kcat": kcat, "kafka-python": python} {
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s read %v, want %v", reader, got, want)
		}
	}
}

// TestMessageFormatVersionLibrdkafka: librdkafka's admin client creates a
// topic with message.format.version=0.10.0.0 (as its test 0092 does),
// describes it with the value and source Kafka 3.x reports, the broker
// warns that it is ignored, and the topic takes and serves records (kcat)
// in the v2 format all the same.
func TestMessageFormatVersionLibrdkafka(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	out := run(t, time.Minute, "", "/usr/bin/python3", "-c", `
import json, sys
from confluent_kafka.admin import AdminClient, NewTopic, ConfigResource
a = AdminClient({'bootstrap.servers': sys.argv[1]})
for f in a.create_topics([NewTopic('mfv', 1, 1, config={'message.format.version': '0.10.0.0'})]).values():
    f.result(30)
out = {}
for topic in ('mfv',):
    for f in a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values():
        e = f.result(30)['message.format.version']
        out[topic] = {'value': e.value, 'source': e.source, 'default': e.is_default}
try:
    for f in a.create_topics([NewTopic('mfv-bad', 1, 1, config={'message.format.version': 'latest'})]).values():
        f.result(30)
    out['bad'] = 'created'
except Exception as e:
    out['bad'] = e.args[0].name()
print(json.dumps(out))
`, b.addr)
	var seen struct {
		Topic struct {
			Value   string `json:"value"`
			Source  int    `json:"source"`
			Default bool   `json:"default"`
		} `json:"mfv"`
		Bad string `json:"bad"`
	}
	if err := json.Unmarshal([]byte(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:]), &seen); err != nil {
		t.Fatalf("confluent-kafka output: %v\n%s", err, out)
	}
	if seen.Topic.Value != "0.10.0.0" || seen.Topic.Source != 1 || seen.Topic.Default { // DYNAMIC_TOPIC_CONFIG
		t.Errorf("message.format.version described as %+v, want 0.10.0.0 from the topic (source 1)", seen.Topic)
	}
	if seen.Bad != "INVALID_CONFIG" {
		t.Errorf("message.format.version=latest: %s, want INVALID_CONFIG", seen.Bad)
	}
	// As Kafka 3.x, the broker warns that a pre-v2 format is ignored.
	b.waitLog("topic config message.format.version is ignored", 1, 10*time.Second)
	run(t, 30*time.Second, "v2-0\nv2-1\n", "kcat", "-b", b.addr, "-P", "-t", "mfv")
	if got := outputLines(run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-C", "-t", "mfv", "-o", "beginning", "-e", "-q", "-f", "%s\n")); strings.Join(got, ",") != "v2-0,v2-1" {
		t.Errorf("kcat read %v from the topic", got)
	}
}

// TestCompressionTypeCodecs: the other codecs compression.type takes
// (gzip, snappy, lz4, and uncompressed for an lz4 producer) store their
// batches with the topic's codec, and kcat reads them, kafka-python too
// where Debian's kafka-python has the codec without extra modules.
func TestCompressionTypeCodecs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		topicCodec string
		stored     int
		producer   kgo.CompressionCodec
		python     bool
	}{
		{"gzip", 1, kgo.NoCompression(), true},
		{"snappy", 2, kgo.NoCompression(), false},
		{"lz4", 3, kgo.NoCompression(), false},
		{"uncompressed", 0, kgo.Lz4Compression(), true},
	} {
		topic := "stored-" + c.topicCodec
		b.createTopic(t, topic, 1, map[string]*string{"compression.type": kadm.StringPtr(c.topicCodec)})
		var want []string
		var records []*kgo.Record
		for i := 0; i < 3; i++ {
			v := fmt.Sprintf("%s-%d-%s", topic, i, strings.Repeat("r", 100)) // compressible, so lz4 is sent as lz4
			want = append(want, v)
			records = append(records, &kgo.Record{Topic: topic, Value: []byte(v)})
		}
		if err := b.client(t, kgo.ProducerBatchCompression(c.producer), kgo.ProducerLinger(0)).ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for i, codec := range segmentCodecs(t, b.data, topic) {
			if codec != c.stored {
				t.Errorf("%s: batch %d stored with codec %d, want %d", topic, i, codec, c.stored)
			}
		}
		readers := map[string][]string{
			"kcat": outputLines(run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")),
		}
		if c.python {
			readers["kafka-python"] = outputLines(run(t, time.Minute, "", "/usr/bin/python3", "-c", `
import sys
from kafka import KafkaConsumer
c = KafkaConsumer(sys.argv[2], bootstrap_servers=sys.argv[1], auto_offset_reset='earliest',
                  enable_auto_commit=False, consumer_timeout_ms=10000)
seen = []
for m in c:
    seen.append(m.value.decode())
    if len(seen) == 3:
        break
c.close()
print('\n'.join(seen))
`, b.addr, topic))
		}
		for reader, got := range readers {
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("%s: %s read %v, want %v", topic, reader, got, want)
			}
		}
	}
}
