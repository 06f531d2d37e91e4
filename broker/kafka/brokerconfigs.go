package kafka

// Broker resources of AlterConfigs and IncrementalAlterConfigs: the
// broker-wide topic defaults (Kafka's dynamic broker configs, KIP-226),
// stored by the cluster layer at /config/brokers/<default> or
// /config/brokers/<id> and applied by every broker without a restart.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/internal/settings"
)

// brokerConfigValues returns a broker resource's effective values of the
// runtime-changeable configs (what APPEND and SUBTRACT start from) and its
// current dynamic configs (what SET and DELETE change), by broker name. The
// caller has checked that the resource is this broker's.
func (b *Broker) brokerConfigValues(resource string) (values, dynamic map[string]string, err error) {
	if dynamic, err = b.cluster.DynamicBrokerConfig(resource); err != nil {
		return nil, nil, err
	}
	// The effective values are this broker's: for "" they start from the
	// cluster-wide layer down, which is what this broker uses without a
	// per-broker value.
	id := resource
	if id == "" {
		id = strconv.Itoa(int(b.cfg.BrokerID))
	}
	entries, err := b.cluster.BrokerConfigSources(id)
	if err != nil {
		return nil, nil, err
	}
	values = make(map[string]string, len(entries))
	for _, e := range entries {
		values[e.Name] = e.Value
		if resource == "" {
			for _, s := range e.Synonyms {
				if s.Source != cluster.SourceDynamicBroker {
					values[e.Name] = s.Value
					break
				}
			}
		}
	}
	return values, dynamic, nil
}

// storeBrokerConfig replaces a broker resource's dynamic configs (or only
// validates them).
func (b *Broker) storeBrokerConfig(resource string, configs map[string]string, validateOnly bool) (int16, *string) {
	if code, msg := b.checkBrokerResource(resource); code != 0 {
		return code, msg
	}
	if err := b.cluster.SetBrokerConfig(resource, configs, validateOnly); err != nil {
		if !isClientError(err) {
			b.logger.Error("altering a broker config", "resource", resource, "err", err)
		}
		return clusterErrorCode(err)
	}
	return 0, nil
}

// isListConfig reports whether a config's value is a comma-separated list
// (IncrementalAlterConfigs APPEND and SUBTRACT apply to it): by topic name
// for topics, by broker name for brokers.
func isListConfig(kind kmsg.ConfigResourceType, name string) bool {
	if kind == kmsg.ConfigResourceTypeBroker {
		topic, ok := cluster.TopicConfigOfBroker(name)
		if !ok {
			return false
		}
		name = topic
	}
	s, ok := cluster.TopicConfigInfo(name)
	return ok && s.Type == settings.ListType
}
