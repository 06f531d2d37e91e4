package kafka

import (
	"testing"

	"millrace/broker/cluster"
	"millrace/internal/settings"
)

// TestDescribedConfigTypes: DescribeConfigs gives every config it lists a
// Kafka type (once, most broker configs were UNKNOWN), Kafka's own for a
// sample, and a broker-wide topic default its topic config's.
func TestDescribedConfigTypes(t *testing.T) {
	names := append(append(ConfigNames(), cluster.TopicConfigNames()...), cluster.DynamicBrokerConfigNames()...)
	for _, name := range names {
		if configType(name) == settings.Unknown {
			t.Errorf("%s: DescribeConfigs type UNKNOWN", name)
		}
	}
	for name, want := range map[string]settings.Type{
		"max.connections": settings.Int, "queued.max.request.bytes": settings.Long, "sasl.enabled.mechanisms": settings.ListType,
		"transaction.max.timeout.ms": settings.Int, "connections.max.idle.ms": settings.Long, "default.replication.factor": settings.Int,
		"log.cleaner.min.cleanable.ratio": settings.Double, "min.cleanable.dirty.ratio": settings.Double, "log.cleanup.policy": settings.ListType,
		"super.users": settings.String, "allow.everyone.if.no.acl.found": settings.Boolean,
	} {
		if got := configType(name); got != want {
			t.Errorf("%s: type %d, want %d", name, got, want)
		}
	}
}
