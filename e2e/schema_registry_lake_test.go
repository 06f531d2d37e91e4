package e2e

// A registry-typed topic landed in the lake: KafkaJS writes Avro records
// with @kafkajs/confluent-schema-registry, `millrace sink --schema
// registry` lands them as an Iceberg table with one typed column per field,
// and DuckDB reads the table's snapshot.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/sinks/iceberg"
)

// kafkaJSOrdersScript registers an Order schema under orders-value with
// @kafkajs/confluent-schema-registry and produces records [from, to)
// encoded with it through KafkaJS. Version "v1" is the first schema;
// "v2" adds an optional coupon (null by default, so BACKWARD accepts it)
// and sets it on every record. Record i is the order o-i of sku x (even
// i) or y, qty i+1, price i+0.25, coupon c-i. It prints the schema's ID.
const kafkaJSOrdersScript = `
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
const [kafka, url, topic, version, from, to] = process.argv.slice(2);

const fields = [
  { name: 'order_id', type: 'string' },
  { name: 'sku', type: 'string' },
  { name: 'qty', type: 'long' },
  { name: 'price', type: 'double' },
];
if (version === 'v2') fields.push({ name: 'coupon', type: ['null', 'string'], default: null });

async function main() {
  const registry = new SchemaRegistry({ host: url });
  const { id } = await registry.register({ type: SchemaType.AVRO,
    schema: JSON.stringify({ type: 'record', name: 'Order', namespace: 'shop', fields }) },
    { subject: topic + '-value' });
  const messages = [];
  for (let i = Number(from); i < Number(to); i++) {
    const order = { order_id: 'o-' + i, sku: i % 2 === 0 ? 'x' : 'y', qty: i + 1, price: i + 0.25 };
    if (version === 'v2') order.coupon = 'c-' + i;
    messages.push({ key: order.order_id, value: await registry.encode(id, order) });
  }
  const producer = new Kafka({ clientId: 'e2e-orders', brokers: [kafka], logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  await producer.send({ topic, messages });
  await producer.disconnect();
  console.log(JSON.stringify({ id }));
}
main().catch(e => { console.error(e); process.exit(1); });
`

// TestSchemaRegistryTypedLake: KafkaJS produces orders framed with an
// Avro schema v1 of the broker's registry, and one plain JSON value; a
// `millrace sink --schema registry --format iceberg` started on v1 lands
// them, then KafkaJS registers v2 (a new optional coupon) and produces
// orders that carry it. The orders table has typed columns (qty BIGINT,
// price DOUBLE) that DuckDB sums over the snapshot's files, and the coupon
// column the sink added mid-stream, set on the v2 orders and NULL on the
// v1 ones. The JSON value is a row of orders~dlq whose reason says it is
// not framed.
func TestSchemaRegistryTypedLake(t *testing.T) {
	t.Parallel()
	modules, err := filepath.Abs("../.bin/node/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "@kafkajs", "confluent-schema-registry")); err != nil {
		t.Fatalf("@kafkajs/confluent-schema-registry is not installed (make deps installs it into .bin/node): %v", err)
	}
	const (
		topic, group = "orders", "lake-orders"
		v1Orders     = 6 // orders [0, 6) on v1
		total        = 10
	)
	b := startRegistryBroker(t)
	b.createTopic(t, topic, 1, nil)
	script := filepath.Join(t.TempDir(), "orders.js")
	if err := os.WriteFile(script, []byte(kafkaJSOrdersScript), 0o644); err != nil {
		t.Fatal(err)
	}
	produceOrders := func(version string, from, to int) int {
		raw := run(t, 2*time.Minute, "", "/usr/bin/env", "NODE_PATH="+modules, "node", script,
			b.addr, b.url, topic, version, strconv.Itoa(from), strconv.Itoa(to))
		var out struct{ ID int }
		if err := json.Unmarshal([]byte(lastLine(raw)), &out); err != nil || out.ID <= 0 {
			t.Fatalf("the %s script's output is not its JSON with an ID: %v\n%s", version, err, raw)
		}
		return out.ID
	}

	// Offsets [0, 6) are v1 orders, 6 the unframed value, [7, 11) v2 orders.
	v1ID := produceOrders("v1", 0, v1Orders)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unframed := []byte(`{"order_id":"plain","sku":"x","qty":100,"price":1}`)
	if err := b.client(t, kgo.DefaultProduceTopic(topic)).ProduceSync(ctx, &kgo.Record{Value: unframed}).FirstErr(); err != nil {
		t.Fatalf("produce the unframed value: %v", err)
	}
	root := t.TempDir()
	sink := startProcess(t, "sink", "sink", "-b", b.addr, "--group", group, "--topic", topic,
		"--schema", "registry", "--registry", b.url, "--out", "file://"+root, "--format", "iceberg",
		"--roll-rows", "5", "--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn")
	waitLanded(t, b, group, topic, time.Minute, sink)
	if v2ID := produceOrders("v2", v1Orders, total); v2ID == v1ID {
		t.Fatalf("v2 got v1's ID %d", v1ID)
	}
	waitLanded(t, b, group, topic, time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Fatalf("sink: status %d after SIGTERM", sink.exitCode())
	}

	cat := openIcebergDirCatalog(ctx, t, root)
	tbl := loadIcebergTable(t, cat, topic)
	for name, want := range map[string]iceberggo.Type{
		"qty": iceberggo.PrimitiveTypes.Int64, "price": iceberggo.PrimitiveTypes.Float64, "coupon": iceberggo.PrimitiveTypes.String,
	} {
		if f, ok := tbl.Schema().FindFieldByName(name); !ok || f.Required || !f.Type.Equals(want) {
			t.Errorf("the table's %s column is %+v (found %v); want an optional %s", name, f, ok, want)
		}
	}
	if f, _ := tbl.Schema().FindFieldByName("coupon"); f.ID != tbl.Metadata().LastColumnID() {
		t.Errorf("coupon has field ID %d; want the table's last, %d (added after the v1 columns)", f.ID, tbl.Metadata().LastColumnID())
	}

	files := icebergDataFiles(t, tbl)
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = "'" + localFilePath(i, f) + "'"
	}
	db := openDuck(t)
	view := fmt.Sprintf("CREATE VIEW orders AS SELECT * FROM read_parquet([%s], union_by_name = true)", strings.Join(quoted, ", "))
	if _, err := db.Exec(view); err != nil {
		t.Fatal(err)
	}
	checkDuckTypes(t, db, map[string]string{"order_id": "VARCHAR", "sku": "VARCHAR", "qty": "BIGINT", "price": "DOUBLE", "coupon": "VARCHAR"})

	// sku x is the even orders 0, 2, ..., 8: qty i+1, price i+0.25.
	var rows, sumQty int64
	var maxPrice float64
	if err := db.QueryRow(`SELECT count(*), sum(qty), max(price) FROM orders WHERE sku = 'x'`).Scan(&rows, &sumQty, &maxPrice); err != nil {
		t.Fatal(err)
	}
	if rows != 5 || sumQty != 1+3+5+7+9 || maxPrice != 8.25 {
		t.Errorf("sku x: %d rows, sum(qty) %d, max(price) %v; want 5, 25, 8.25", rows, sumQty, maxPrice)
	}
	coupons := map[string]string{}
	res, err := db.Query(`SELECT order_id, coalesce(coupon, 'NULL') FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	for res.Next() {
		var id, coupon string
		if err := res.Scan(&id, &coupon); err != nil {
			t.Fatal(err)
		}
		if _, dup := coupons[id]; dup {
			t.Errorf("order %s is in the table twice", id)
		}
		coupons[id] = coupon
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if len(coupons) != total {
		t.Errorf("DuckDB over the snapshot's %d files reads %d orders; want %d: %v", len(files), len(coupons), total, coupons)
	}
	for i := range total {
		want := "NULL"
		if i >= v1Orders {
			want = fmt.Sprintf("c-%d", i)
		}
		if id := fmt.Sprintf("o-%d", i); coupons[id] != want {
			t.Errorf("order %s: coupon %s; want %s", id, coupons[id], want)
		}
	}

	letters := icebergDeadLetters(t, loadIcebergTable(t, cat, topic+iceberg.DeadLetterSuffix))
	l, ok := letters[v1Orders]
	if len(letters) != 1 || !ok || string(l.raw) != string(unframed) || !strings.Contains(l.reason, "not Confluent-framed") {
		t.Errorf("dead letters %+v; want one, at offset %d, of the raw JSON, its reason saying it is not Confluent-framed", letters, v1Orders)
	}
}

// checkDuckTypes fails the test unless DuckDB's DESCRIBE of the orders
// view gives each column in want its type.
func checkDuckTypes(t *testing.T, db *sql.DB, want map[string]string) {
	t.Helper()
	rows, err := db.Query(`SELECT column_name, column_type FROM (DESCRIBE orders)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		got[name] = typ
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("DESCRIBE orders: %s is %q; want %s (all: %v)", name, got[name], typ, got)
		}
	}
}

// kafkaJSProtoJSONScript registers a Protobuf schema under
// <protoTopic>-value and a JSON Schema under <jsonTopic>-value with
// @kafkajs/confluent-schema-registry, and produces three records framed
// with each (item i: name n-i, units i+1) through KafkaJS.
const kafkaJSProtoJSONScript = `
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');
const [kafka, url, protoTopic, jsonTopic] = process.argv.slice(2);

async function main() {
  const registry = new SchemaRegistry({ host: url });
  const proto = await registry.register({ type: SchemaType.PROTOBUF,
    schema: 'syntax = "proto3";\npackage shop;\nmessage Item {\n  string name = 1;\n  int64 units = 2;\n}\n' },
    { subject: protoTopic + '-value' });
  const json = await registry.register({ type: SchemaType.JSON,
    schema: JSON.stringify({ type: 'object', properties: { name: { type: 'string' }, units: { type: 'integer' } }, required: ['name', 'units'] }) },
    { subject: jsonTopic + '-value' });
  const producer = new Kafka({ clientId: 'e2e-items', brokers: [kafka], logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  for (const [topic, id] of [[protoTopic, proto.id], [jsonTopic, json.id]]) {
    const messages = [];
    for (let i = 0; i < 3; i++) messages.push({ value: await registry.encode(id, { name: 'n-' + i, units: i + 1 }) });
    await producer.send({ topic, messages });
  }
  await producer.disconnect();
  console.log(JSON.stringify({ proto: proto.id, json: json.id }));
}
main().catch(e => { console.error(e); process.exit(1); });
`

// TestSchemaRegistryTypedLakeProtobufJSON: Protobuf and JSON Schema
// records written by KafkaJS (whose Protobuf framing has no message
// indexes) land through `millrace sink --schema registry` as typed rows,
// one Iceberg table per topic, none dead-lettered.
func TestSchemaRegistryTypedLakeProtobufJSON(t *testing.T) {
	t.Parallel()
	modules, err := filepath.Abs("../.bin/node/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	b := startRegistryBroker(t)
	topics := []string{"items-proto", "items-json"}
	for _, topic := range topics {
		b.createTopic(t, topic, 1, nil)
	}
	script := filepath.Join(t.TempDir(), "items.js")
	if err := os.WriteFile(script, []byte(kafkaJSProtoJSONScript), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, 2*time.Minute, "", "/usr/bin/env", "NODE_PATH="+modules, "node", script, b.addr, b.url, topics[0], topics[1])

	root := t.TempDir()
	for _, topic := range topics {
		sink := startProcess(t, "sink-"+topic, "sink", "-b", b.addr, "--group", "lake-"+topic, "--topic", topic,
			"--schema", "registry", "--registry", b.url, "--out", "file://"+root, "--format", "iceberg",
			"--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn")
		waitLanded(t, b, "lake-"+topic, topic, time.Minute, sink)
		if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
			t.Fatalf("sink of %s: status %d after SIGTERM", topic, sink.exitCode())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat := openIcebergDirCatalog(ctx, t, root)
	db := openDuck(t)
	for _, topic := range topics {
		tbl := loadIcebergTable(t, cat, topic)
		files := icebergDataFiles(t, tbl)
		quoted := make([]string, len(files))
		for i, f := range files {
			quoted[i] = "'" + localFilePath(i, f) + "'"
		}
		var got string
		q := fmt.Sprintf(`SELECT string_agg(name || ':' || units, ',' ORDER BY name) FROM read_parquet([%s], union_by_name = true)`, strings.Join(quoted, ", "))
		if err := db.QueryRow(q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		if got != "n-0:1,n-1:2,n-2:3" {
			t.Errorf("%s landed %q; want n-0:1,n-1:2,n-2:3", topic, got)
		}
		if exists, err := cat.Catalog().CheckTableExists(ctx, cat.Identifier(topic+iceberg.DeadLetterSuffix)); err != nil || exists {
			t.Errorf("%s has a dead-letter table (%v): a record did not land", topic, err)
		}
	}
}
