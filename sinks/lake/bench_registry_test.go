package lake

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas/format"
	"millrace/schemas/srclient"
	"millrace/schemas/srclient/srtest"
	"millrace/store"
)

// Sizes of BenchmarkSinkRegistry: 100,000 clicks over five hours of ts, in
// rolls of 20,000 (five rolls, four of them the steady state), which lands
// in a few seconds here.
const benchRegistryRows, benchRegistryRoll = 100_000, 20_000

// The click as a registry schema, in each language: the same twelve
// columns of the same kinds (strings, n an int64, ts and received_at
// timestamps), none nullable. The Avro fields are in name order because a
// JSON Schema's columns are (jsonschema Columns), so both tables are
// alike column for column.
const (
	benchAvroClick = `{"type":"record","name":"Click","namespace":"shop","fields":[
		{"name":"anonymous_id","type":"string"},{"name":"event_id","type":"string"},{"name":"ip","type":"string"},
		{"name":"n","type":"long"},
		{"name":"received_at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"referrer","type":"string"},{"name":"session_id","type":"string"},{"name":"title","type":"string"},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"type","type":"string"},{"name":"url","type":"string"},{"name":"user_agent","type":"string"}]}`
	benchJSONClick = `{"type":"object","properties":{
		"anonymous_id":{"type":"string"},"event_id":{"type":"string"},"ip":{"type":"string"},
		"n":{"type":"integer"},
		"received_at":{"type":"string","format":"date-time"},
		"referrer":{"type":"string"},"session_id":{"type":"string"},"title":{"type":"string"},
		"ts":{"type":"string","format":"date-time"},
		"type":{"type":"string"},"url":{"type":"string"},"user_agent":{"type":"string"}},
		"required":["anonymous_id","event_id","ip","n","received_at","referrer","session_id","title","ts","type","url","user_agent"]}`
)

// BenchmarkSinkRegistry lands the same clicks end to end from a
// registry-typed topic (schema: registry) once framed with an Avro schema
// (avro) and once framed with a JSON Schema of the same columns (json),
// both registered in an in-process registry (srtest) that the worker's own
// registry client reads, as BenchmarkSinkFormats lands the built-in click
// schema: a worker joins its group on an in-process broker, fetches, lands
// the topic in rolls of benchRegistryRoll rows (hive) and commits each.
//
// JSON goes through the registry too, rather than as the built-in click
// schema, so that the two differ in the value's encoding alone: the same
// columns, the same ID look-up per record, the same rows built from the
// decoded map (Row.SetColumns). The built-in click schema has other
// columns (a catch-all properties, a schema of its own), and its figures
// are BenchmarkSinkFormats'.
//
// It reports rows/s and rows/cpu-s over the steady state, as
// BenchmarkSinkFormats does, and value-bytes, the mean size of a value.
// Run avro and json alternately, one invocation each (docs/benchmarks.md,
// "Schema registry").
func BenchmarkSinkRegistry(b *testing.B) {
	ctx := context.Background()
	addr, _ := startBroker(b, b.TempDir())
	reg := srtest.Start(b)
	rc, err := srclient.New(srclient.Config{URLs: []string{reg.URL}})
	if err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	for _, c := range []struct{ topic, typ, text string }{
		{"avro", format.Avro, benchAvroClick},
		{"json", format.JSON, benchJSONClick},
	} {
		valueBytes := 0 // the topic is produced on the first call only
		b.Run(c.topic, func(b *testing.B) {
			if valueBytes == 0 {
				sub, err := rc.Register(ctx, c.topic+"-value", srclient.Registration{Text: c.text, Type: c.typ})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, c.topic); err != nil {
					b.Fatal(err)
				}
				valueBytes = produceRegistryClicks(b, cl, c.topic, sub)
				b.ResetTimer()
			}
			benchSinkRegistry(b, addr, reg.URL, c.topic)
			b.ReportMetric(float64(valueBytes)/benchRegistryRows, "value-bytes")
		})
	}
}

// produceRegistryClicks produces benchRegistryRows clicks to topic, each
// encoded with sub's schema and framed with its ID, and returns the bytes
// of every value together. The clicks are benchClicks' fields, in the
// shape encoding/json decodes (a timestamp-millis a number of
// milliseconds, a date-time a string).
func produceRegistryClicks(b *testing.B, cl *kgo.Client, topic string, sub srclient.Subject) int {
	b.Helper()
	total := 0
	batch := make([]*kgo.Record, 0, 10_000)
	for i := range benchRegistryRows {
		ts := base.Add(time.Duration(i%5)*time.Hour + time.Duration(i%3600)*time.Second + time.Duration(i%1000)*time.Millisecond)
		v := map[string]any{"event_id": fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", i), "type": [...]string{"page_view", "click", "add_to_cart"}[i%3],
			"url": fmt.Sprintf("https://shop.example/p/%d", i%500), "referrer": "https://search.example/", "title": fmt.Sprintf("Product %d", i%500),
			"anonymous_id": fmt.Sprintf("anon-%d", i%20000), "session_id": fmt.Sprintf("s-%d", i%50000), "ip": "203.0.113.0",
			"user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36", "n": float64(i)}
		if sub.Schema.Type().Name() == format.Avro {
			v["ts"], v["received_at"] = float64(ts.UnixMilli()), float64(ts.Add(150*time.Millisecond).UnixMilli())
		} else {
			v["ts"], v["received_at"] = ts.Format(time.RFC3339Nano), ts.Add(150*time.Millisecond).Format(time.RFC3339Nano)
		}
		value, err := srclient.EncodeWith(sub.ID, sub.Schema, v)
		if err != nil {
			b.Fatal(err)
		}
		total += len(value)
		batch = append(batch, &kgo.Record{Topic: topic, Value: value, Timestamp: base.Add(5*time.Hour + time.Duration(i)*50*time.Microsecond)})
		if len(batch) == cap(batch) || i == benchRegistryRows-1 {
			if err := cl.ProduceSync(context.Background(), batch...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return total
}

func benchSinkRegistry(b *testing.B, addr, registryURL, topic string) {
	var steady, steadyCPU time.Duration
	var steadyRows int64
	for range b.N {
		var run rollTimes
		landed := make(chan struct{})
		st, err := store.NewFile(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{Brokers: []string{addr}, Group: fmt.Sprintf("bench-registry-%s-%d", topic, benchGroups.Add(1)), Topics: []string{topic},
			Schema: SchemaRegistry, Registry: RegistryConfig{Config: srclient.Config{URLs: []string{registryURL}}}, TimestampField: "ts",
			RollRows: benchRegistryRoll, IdleTimeout: time.Second, AuditTopic: "off",
			AfterCommit: func(_ string, _ int32, next int64, _ time.Duration) {
				run.mu.Lock()
				run.ended = append(run.ended, time.Now())
				run.cpu = append(run.cpu, cpuTime())
				run.mu.Unlock()
				if next == benchRegistryRows {
					close(landed)
				}
			}}
		w, err := New(cfg, st, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		select {
		case <-landed:
		case <-w.Done():
			b.Fatalf("the worker stopped: %v", w.Err())
		case <-time.After(5 * time.Minute):
			b.Fatal("the clicks were not landed in 5 minutes")
		}
		if err := w.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		var rows dto.Metric
		if err := w.metrics.rows.WithLabelValues(topic).Write(&rows); err != nil {
			b.Fatal(err)
		}
		if n := rows.GetCounter().GetValue(); n != benchRegistryRows {
			b.Fatalf("%v rows landed, want %d (the rest are dead letters)", n, benchRegistryRows)
		}
		run.mu.Lock()
		if len(run.ended) < 2 {
			b.Fatalf("%d rolls, want at least 2", len(run.ended))
		}
		steady += run.ended[len(run.ended)-1].Sub(run.ended[0])
		steadyCPU += run.cpu[len(run.cpu)-1] - run.cpu[0]
		steadyRows += benchRegistryRows - benchRegistryRoll
		run.mu.Unlock()
	}
	b.ReportMetric(float64(steadyRows)/steady.Seconds(), "rows/s")
	b.ReportMetric(float64(steadyRows)/steadyCPU.Seconds(), "rows/cpu-s")
}
