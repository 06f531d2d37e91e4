package e2e

// The registry against the Confluent clients of other languages:
// confluent-kafka-python (Debian's 1.7.0) and KafkaJS with
// @kafkajs/confluent-schema-registry (installed by `make deps` into
// .bin/node).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas/srclient"
)

// pythonRegistryScript exercises confluent-kafka-python's
// SchemaRegistryClient, then its legacy Avro producer and consumer: the
// newer AvroSerializer needs fastavro, which Debian does not package, and
// the legacy confluent_kafka.avro path needs python3-avro, which it does.
// It prints one JSON object of what it saw.
const pythonRegistryScript = `
import json, sys
from confluent_kafka.schema_registry import SchemaRegistryClient, Schema
from confluent_kafka import avro
from confluent_kafka.avro import AvroProducer, AvroConsumer

kafka, url, topic = sys.argv[1], sys.argv[2], sys.argv[3]
v1 = '{"type":"record","name":"Click","namespace":"py","fields":[{"name":"user","type":"string"},{"name":"n","type":"long"}]}'
v2 = '{"type":"record","name":"Click","namespace":"py","fields":[{"name":"user","type":"string"},{"name":"n","type":"long"},{"name":"page","type":"string","default":""}]}'
bad = '{"type":"record","name":"Click","namespace":"py","fields":[{"name":"user","type":"long"},{"name":"n","type":"long"}]}'
out = {}
c = SchemaRegistryClient({'url': url})
out['id1'] = c.register_schema('py-value', Schema(v1, 'AVRO'))
out['again'] = c.register_schema('py-value', Schema(v1, 'AVRO'))
out['id2'] = c.register_schema('py-value', Schema(v2, 'AVRO'))
out['get_schema_has_page'] = 'page' in c.get_schema(out['id2']).schema_str
latest = c.get_latest_version('py-value')
out['latest'] = [latest.schema_id, latest.version, latest.subject]
out['versions'] = c.get_versions('py-value')
found = c.lookup_schema('py-value', Schema(v1, 'AVRO'))
out['lookup'] = [found.schema_id, found.version]
out['compatible_v2'] = c.test_compatibility('py-value', Schema(v2, 'AVRO'))
out['compatible_bad'] = c.test_compatibility('py-value', Schema(bad, 'AVRO'))
out['set_compat'] = c.set_compatibility('py-value', 'NONE')['compatibility']
out['get_compat'] = c.get_compatibility('py-value')
out['id_bad'] = c.register_schema('py-value', Schema(bad, 'AVRO'))
c.register_schema('gone-value', Schema(v1, 'AVRO'))
out['deleted'] = c.delete_subject('gone-value')

p = AvroProducer({'bootstrap.servers': kafka, 'schema.registry.url': url}, default_value_schema=avro.loads(v2))
for i in range(5):
    p.produce(topic=topic, value={'user': 'u%d' % i, 'n': i, 'page': '/p%d' % i})
p.flush(30)
cons = AvroConsumer({'bootstrap.servers': kafka, 'schema.registry.url': url, 'group.id': 'py-avro',
                     'auto.offset.reset': 'earliest', 'enable.auto.commit': False})
cons.subscribe([topic])
got = []
for _ in range(300):
    if len(got) == 5:
        break
    m = cons.poll(0.1)
    if m is None:
        continue
    if m.error():
        raise SystemExit('consume: %s' % m.error())
    got.append(m.value())
cons.close()
out['consumed'] = got
out['subjects'] = sorted(c.get_subjects())
out['producer_id'] = c.get_latest_version(topic + '-value').schema_id
print(json.dumps(out))
`

// TestSchemaRegistryConfluentPython runs confluent-kafka-python's registry
// client and its Avro producer and consumer against a broker's registry.
func TestSchemaRegistryConfluentPython(t *testing.T) {
	t.Parallel()
	b := startRegistryBroker(t)
	const topic = "py-clicks"
	b.createTopic(t, topic, 1, nil)
	raw := run(t, 2*time.Minute, "", "/usr/bin/python3", "-c", pythonRegistryScript, b.addr, b.url, topic)
	var out struct {
		ID1, Again, ID2  int
		IDBad            int    `json:"id_bad"`
		ProducerID       int    `json:"producer_id"`
		GetSchemaHasPage bool   `json:"get_schema_has_page"`
		Latest           []any  `json:"latest"`
		Versions         []int  `json:"versions"`
		Lookup           []int  `json:"lookup"`
		CompatibleV2     bool   `json:"compatible_v2"`
		CompatibleBad    bool   `json:"compatible_bad"`
		SetCompat        string `json:"set_compat"`
		GetCompat        string `json:"get_compat"`
		Deleted          []int  `json:"deleted"`
		Subjects         []string
		Consumed         []map[string]any
	}
	if err := json.Unmarshal([]byte(lastLine(raw)), &out); err != nil {
		t.Fatalf("the script's output is not its JSON: %v\n%s", err, raw)
	}
	if out.ID1 <= 0 || out.Again != out.ID1 || out.ID2 == out.ID1 || !out.GetSchemaHasPage {
		t.Errorf("register/get_schema: id1 %d, again %d, id2 %d, v2 text has page: %v", out.ID1, out.Again, out.ID2, out.GetSchemaHasPage)
	}
	if len(out.Latest) != 3 || out.Latest[0] != float64(out.ID2) || out.Latest[1] != float64(2) || out.Latest[2] != "py-value" {
		t.Errorf("get_latest_version = %v; want [%d 2 py-value]", out.Latest, out.ID2)
	}
	if len(out.Versions) != 2 || len(out.Lookup) != 2 || out.Lookup[0] != out.ID1 || out.Lookup[1] != 1 {
		t.Errorf("get_versions = %v, lookup_schema = %v", out.Versions, out.Lookup)
	}
	if !out.CompatibleV2 || out.CompatibleBad {
		t.Errorf("test_compatibility: v2 %v (want true), a changed field type %v (want false)", out.CompatibleV2, out.CompatibleBad)
	}
	// Under NONE the incompatible schema registers as a third version.
	if out.SetCompat != "NONE" || out.GetCompat != "NONE" || out.IDBad <= out.ID2 {
		t.Errorf("set_compatibility %q, get_compatibility %q, then registered as ID %d", out.SetCompat, out.GetCompat, out.IDBad)
	}
	if len(out.Deleted) != 1 || out.Deleted[0] != 1 || strings.Join(out.Subjects, ",") != "py-clicks-value,py-value" {
		t.Errorf("delete_subject = %v, subjects after = %v; want [1] and the Avro producer's and py-value", out.Deleted, out.Subjects)
	}
	if len(out.Consumed) != 5 {
		t.Fatalf("the AvroConsumer decoded %d records: %v", len(out.Consumed), out.Consumed)
	}
	for i, r := range out.Consumed {
		if r["user"] != "u"+strconv.Itoa(i) || r["n"] != float64(i) || r["page"] != "/p"+strconv.Itoa(i) {
			t.Errorf("record %d decoded as %v", i, r)
		}
	}
	// The producer registered its schema under the topic's value subject
	// and framed the records with the ID it was given: v2's, although
	// python-avro prints v2 back with its keys in another order (the
	// registry compares Avro schemas in a fixed key order, as Confluent's
	// compares Java's reprint).
	if out.ProducerID != out.ID2 {
		t.Fatalf("py-clicks-value's latest ID is %d, want v2's %d", out.ProducerID, out.ID2)
	}
	checkFramed(t, b, topic, 5, out.ProducerID)
}

// kafkaJSRegistryScript registers an Avro, a Protobuf and a JSON schema
// with @kafkajs/confluent-schema-registry, encodes one record of each,
// produces them with KafkaJS, consumes them and decodes them. It prints
// one JSON object: the IDs and the decoded records.
const kafkaJSRegistryScript = `
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
const [kafka, url, topic] = process.argv.slice(2);

async function main() {
  const registry = new SchemaRegistry({ host: url });
  const avro = await registry.register({ type: SchemaType.AVRO,
    schema: '{"type":"record","name":"Click","namespace":"js","fields":[{"name":"user","type":"string"},{"name":"n","type":"long"}]}' },
    { subject: 'js-avro' });
  const proto = await registry.register({ type: SchemaType.PROTOBUF,
    schema: 'syntax = "proto3";\npackage js;\nmessage Click {\n  string user = 1;\n  int64 n = 2;\n}\n' },
    { subject: 'js-proto' });
  const jsonSchema = await registry.register({ type: SchemaType.JSON,
    schema: '{"type":"object","properties":{"user":{"type":"string"},"n":{"type":"integer"}},"required":["user","n"]}' },
    { subject: 'js-json' });
  const values = [
    await registry.encode(avro.id, { user: 'avro', n: 1 }),
    await registry.encode(proto.id, { user: 'proto', n: 2 }),
    await registry.encode(jsonSchema.id, { user: 'json', n: 3 }),
  ];
  const k = new Kafka({ clientId: 'e2e-js', brokers: [kafka], logLevel: logLevel.NOTHING });
  const producer = k.producer();
  await producer.connect();
  await producer.send({ topic, messages: values.map(value => ({ value })) });
  await producer.disconnect();

  const consumer = k.consumer({ groupId: 'e2e-js' });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const decoded = [];
  await new Promise((resolve, reject) => {
    consumer.run({ eachMessage: async ({ message }) => {
      try {
        const v = await registry.decode(message.value);
        decoded.push({ user: v.user, n: Number(v.n) });
        if (decoded.length === values.length) resolve();
      } catch (e) { reject(e); }
    } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ ids: [avro.id, proto.id, jsonSchema.id], decoded }));
}
main().catch(e => { console.error(e); process.exit(1); });
`

// TestSchemaRegistryKafkaJS registers and round-trips Avro, Protobuf and
// JSON Schema records with KafkaJS's registry client, and checks in Go
// that each record is framed with magic byte 0 and the ID it was given,
// and decodes it.
func TestSchemaRegistryKafkaJS(t *testing.T) {
	t.Parallel()
	modules, err := filepath.Abs("../.bin/node/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "@kafkajs", "confluent-schema-registry")); err != nil {
		t.Fatalf("@kafkajs/confluent-schema-registry is not installed (make deps installs it into .bin/node): %v", err)
	}
	b := startRegistryBroker(t)
	const topic = "js-clicks"
	b.createTopic(t, topic, 1, nil)
	script := filepath.Join(t.TempDir(), "registry.js")
	if err := os.WriteFile(script, []byte(kafkaJSRegistryScript), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := run(t, 2*time.Minute, "", "/usr/bin/env", "NODE_PATH="+modules, "node", script, b.addr, b.url, topic)
	var out struct {
		IDs     []int `json:"ids"`
		Decoded []struct {
			User string
			N    int
		}
	}
	if err := json.Unmarshal([]byte(lastLine(raw)), &out); err != nil {
		t.Fatalf("the script's output is not its JSON: %v\n%s", err, raw)
	}
	if len(out.IDs) != 3 || out.IDs[0] == out.IDs[1] || out.IDs[1] == out.IDs[2] || out.IDs[0] == out.IDs[2] {
		t.Fatalf("registered IDs %v; want three distinct", out.IDs)
	}
	want := []string{"avro", "proto", "json"}
	if len(out.Decoded) != 3 {
		t.Fatalf("node decoded %d records: %+v", len(out.Decoded), out.Decoded)
	}
	for i, d := range out.Decoded {
		if d.User != want[i] || d.N != i+1 {
			t.Errorf("record %d decoded in node as %+v; want %s %d", i, d, want[i], i+1)
		}
	}
	records := checkFramed(t, b, topic, 3, out.IDs...)
	decodeKafkaJSInGo(t, b, records)
}

// decodeKafkaJSInGo decodes the KafkaJS records with millrace's registry
// client (schemas/srclient), as the sink and `millrace consume --decode`
// read them. @kafkajs/confluent-schema-registry 4.1.0 frames Protobuf
// values without Confluent's message indexes; millrace reads both
// framings (schemas/format/protobuf, decodeWithoutIndexes).
func decodeKafkaJSInGo(t *testing.T, b *registryBroker, records []*kgo.Record) {
	t.Helper()
	cl, err := srclient.New(srclient.Config{URLs: []string{b.url}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []map[string]any{
		{"user": "avro", "n": int64(1)},
		{"user": "proto", "n": int64(2)},
		{"user": "json", "n": int64(3)},
	} {
		_, _, got, err := cl.Decode(ctx, records[i].Value)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("record %d (% x...) decoded by millrace as %#v, %v; want %#v", i, records[i].Value[:min(8, len(records[i].Value))], got, err, want)
		}
	}
}

// checkFramed consumes n records of topic and checks each is in
// Confluent's wire format: magic byte 0, then the big-endian schema ID,
// ids[i] for record i (ids[0] for all when one is given). It returns the
// records.
func checkFramed(t *testing.T, b *registryBroker, topic string, n int, ids ...int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming %s after %d records: %v", topic, len(got), err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		want := ids[0]
		if len(ids) > 1 {
			want = ids[i]
		}
		if len(r.Value) < 5 || r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != want {
			t.Fatalf("record %d of %s starts % x; want magic byte 0 and schema ID %d", i, topic, r.Value[:min(5, len(r.Value))], want)
		}
	}
	return got
}

// lastLine is the last non-empty line of a script's output.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
