package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFormatConfigs: compression.type and message.format.version through
// the admin API as Kafka 3.x serves them. A topic takes any of Kafka's
// codecs and a message.format.version (librdkafka's test 0092 sets
// 0.10.0.0), described with its value, source and, for the deprecated
// one, documentation marked [DEPRECATED]; a bad value is INVALID_CONFIG;
// the broker-wide compression.type, changed at runtime, makes a topic
// without an override store an uncompressed producer's batches with its
// codec.
func TestFormatConfigs(t *testing.T) {
	tb := startBroker(t)
	adm, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)
	created, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"compression.type":       kadm.StringPtr("zstd"),
		"message.format.version": kadm.StringPtr("0.10.0.0"),
	}, "fmt")
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %+v", err, created)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "plain"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]*string{
		{"compression.type": kadm.StringPtr("brotli")},
		{"message.format.version": kadm.StringPtr("latest")},
	} {
		resp, err := adm.CreateTopic(ctx, 1, 1, bad, "refused")
		if !errors.Is(err, kerr.InvalidConfig) || !errors.Is(resp.Err, kerr.InvalidConfig) {
			t.Errorf("create with %v: %v %v, want INVALID_CONFIG", bad, err, resp.Err)
		}
	}

	describeResource := func(kind kmsg.ConfigResourceType, name string, configs ...string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.ConfigNames = kind, name, configs
		req.Resources = append(req.Resources, res)
		req.IncludeDocumentation = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("describe %s: %v %+v", name, err, resp)
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	describe := func(topic string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		return describeResource(kmsg.ConfigResourceTypeTopic, topic, "compression.type", "message.format.version")
	}
	value := func(c kmsg.DescribeConfigsResponseResourceConfig) string {
		if c.Value == nil {
			return "<null>"
		}
		return *c.Value
	}
	deprecated := func(c kmsg.DescribeConfigsResponseResourceConfig) bool {
		return c.Documentation != nil && strings.HasPrefix(*c.Documentation, "[DEPRECATED]")
	}

	got := describe("fmt")
	if c := got["compression.type"]; value(c) != "zstd" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.Documentation != nil {
		t.Errorf("fmt compression.type: %q source %v doc %v", value(c), c.Source, c.Documentation)
	}
	if c := got["message.format.version"]; value(c) != "0.10.0.0" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || !deprecated(c) {
		t.Errorf("fmt message.format.version: %q source %v, deprecated %v", value(c), c.Source, deprecated(c))
	}
	got = describe("plain")
	if c := got["compression.type"]; value(c) != "producer" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("plain compression.type: %q source %v", value(c), c.Source)
	}
	if c := got["message.format.version"]; value(c) != "3.0-IV1" || c.Source != kmsg.ConfigSourceDefaultConfig || !deprecated(c) {
		t.Errorf("plain message.format.version: %q source %v, deprecated %v", value(c), c.Source, deprecated(c))
	}
	broker := describeResource(kmsg.ConfigResourceTypeBroker, "0", "log.message.format.version", "compression.type")
	if c := broker["log.message.format.version"]; value(c) != "3.0-IV1" || c.Source != kmsg.ConfigSourceDefaultConfig || !c.ReadOnly || !deprecated(c) {
		t.Errorf("log.message.format.version: %q source %v read-only %v deprecated %v, want 3.0-IV1 by default, read-only, deprecated", value(c), c.Source, c.ReadOnly, deprecated(c))
	}
	if c := broker["compression.type"]; value(c) != "producer" || c.ReadOnly {
		t.Errorf("broker compression.type: %q read-only %v", value(c), c.ReadOnly)
	}
	// As in Kafka, only the properties file sets it.
	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.message.format.version", Value: kadm.StringPtr("2.8")}})
	if err != nil || len(resp) != 1 || !errors.Is(resp[0].Err, kerr.InvalidRequest) {
		t.Errorf("alter log.message.format.version: %v %+v, want INVALID_REQUEST", err, resp)
	}

	// The broker-wide codec, set at runtime, applies to "plain".
	resp, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: kadm.StringPtr("lz4")}})
	if err != nil || len(resp) != 1 || resp[0].Err != nil {
		t.Fatalf("alter broker compression.type: %v %+v", err, resp)
	}
	if c := describe("plain")["compression.type"]; value(c) != "lz4" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("plain compression.type after the broker change: %q source %v", value(c), c.Source)
	}
	resp, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: kadm.StringPtr("brotli")}})
	if err != nil || len(resp) != 1 || resp[0].Err == nil {
		t.Errorf("alter broker compression.type=brotli: %v %+v, want refused", err, resp)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	for _, topic := range []string{"fmt", "plain"} {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("stored compressed")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	for topic, want := range map[string]int{"fmt": 4, "plain": 3} {
		l, ok := tb.logs.Get(topic, 0)
		if !ok {
			t.Fatalf("no log for %s", topic)
		}
		s, err := l.Read(0, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.ReadAll()
		s.Close()
		if err != nil || len(b) < 23 {
			t.Fatalf("read %s: %v (%d bytes)", topic, err, len(b))
		}
		if codec := int(b[22] & 0x07); codec != want { // attributes, low byte
			t.Errorf("%s stores codec %d, want %d", topic, codec, want)
		}
	}
}
