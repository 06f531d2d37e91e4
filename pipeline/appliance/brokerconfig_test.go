package appliance

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"millrace/broker"
)

func TestEmbeddedBrokerDoesNotAutoCreateTopics(t *testing.T) {
	data, err := os.ReadFile("../../deployments/demo/millrace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var demo Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&demo); err != nil {
		t.Fatal(err)
	}
	demo = demo.withDefaults()
	bc, err := demo.brokerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if bc.Kafka.AutoCreateTopics {
		t.Error("the demo's embedded broker creates topics on Metadata requests")
	}
	if bc.Kafka.NumPartitions != 3 {
		t.Errorf("broker.settings not applied: num.partitions %d", bc.Kafka.NumPartitions)
	}
	// Every topic the demo's parts write to is created at start: the ones
	// it lists, and the beacon's metrics dead-letter topic and the OTLP
	// receiver's topics it does not.
	var used []string
	for _, tc := range demo.usedTopics() {
		used = append(used, tc.Name)
		if tc.Partitions != -1 || tc.ReplicationFactor != -1 {
			t.Errorf("%s: %+v, want the broker's defaults (-1)", tc.Name, tc)
		}
	}
	if want := []string{"ops.metrics.dlq", "otlp_logs", "otlp_metrics", "otlp_spans"}; !slices.Equal(used, want) {
		t.Errorf("topics created beyond the listed ones: %v, want %v", used, want)
	}

	// The user's settings turn auto-creation back on.
	demo.Broker.Settings["auto.create.topics.enable"] = "true"
	if bc, err := demo.brokerConfig(); err != nil || !bc.Kafka.AutoCreateTopics {
		t.Errorf("auto.create.topics.enable=true in broker.settings: %v, err %v", bc.Kafka.AutoCreateTopics, err)
	}
	// `millrace broker` keeps Kafka's default.
	if !broker.DefaultConfig().Kafka.AutoCreateTopics {
		t.Error("the standalone broker's default changed")
	}
}
