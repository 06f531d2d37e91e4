package broker

import (
	"testing"
	"time"
)

// TestLimitSettings checks that the limit settings reach the component
// configs by their names and that Validate refuses impossible values.
func TestLimitSettings(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	for name, value := range map[string]string{
		"millrace.max.partitions.per.topic":       "50",
		"millrace.max.partitions.per.request":     "60",
		"millrace.max.partitions":                 "70",
		"millrace.group.id.max.bytes":             "100",
		"millrace.max.groups":                     "200",
		"offsets.retention.minutes":               "1440",
		"offsets.retention.check.interval.ms":     "60000",
		"producer.id.expiration.ms":               "3600000",
		"millrace.max.producer.ids.per.partition": "300",
	} {
		if err := c.Set(name, value); err != nil {
			t.Fatalf("%s=%s: %v", name, value, err)
		}
	}
	if c.Cluster.MaxPartitionsPerTopic != 50 || c.Cluster.MaxPartitionsPerRequest != 60 || c.Cluster.MaxPartitions != 70 {
		t.Errorf("partition limits not set: %+v", c.Cluster)
	}
	if c.Group.MaxGroupIDBytes != 100 || c.Group.MaxGroups != 200 || c.Group.OffsetsRetention != 24*time.Hour || c.Group.OffsetsRetentionCheckInterval != time.Minute {
		t.Errorf("group limits not set: %+v", c.Group)
	}
	if c.Kafka.ProducerIDExpiration != time.Hour || c.Kafka.MaxProducerIDsPerPartition != 300 {
		t.Errorf("producer limits not set: %+v", c.Kafka)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{
		"num.partitions":                          "51", // above millrace.max.partitions.per.topic
		"millrace.max.partitions":                 "-1",
		"millrace.max.groups":                     "-5",
		"offsets.retention.minutes":               "-1",
		"millrace.max.producer.ids.per.partition": "0",
	} {
		bad := c
		if err := bad.Set(name, value); err != nil {
			t.Fatalf("%s=%s: %v", name, value, err)
		}
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate accepted %s=%s", name, value)
		}
	}
	if err := c.Set("millrace.max.partitions", "3000000000"); err == nil {
		t.Error("a partition limit above 2^31-1 was accepted")
	}
}
