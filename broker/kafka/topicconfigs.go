package kafka

import (
	"strings"

	"millrace/broker/cluster"
)

// Kafka's config sources (DescribeConfigs v1+, CreateTopics v5+).
const (
	sourceTopicConfig        int8 = 1 // DYNAMIC_TOPIC_CONFIG: a per-topic override
	sourceStaticBrokerConfig int8 = 4 // STATIC_BROKER_CONFIG: from the broker's config file
	sourceDefaultConfig      int8 = 5 // DEFAULT_CONFIG: the built-in default
)

// Kafka's config types (DescribeConfigs v3+).
const (
	configTypeUnknown int8 = 0
	configTypeBoolean int8 = 1
	configTypeString  int8 = 2
	configTypeInt     int8 = 3
	configTypeShort   int8 = 4
	configTypeLong    int8 = 5
	configTypeList    int8 = 7
)

// configTypes gives the type Kafka declares for each config we describe.
var configTypes = map[string]int8{
	// Topic configs.
	"cleanup.policy":                  configTypeList,
	"compression.type":                configTypeString,
	"file.delete.delay.ms":            configTypeLong,
	"flush.messages":                  configTypeLong,
	"flush.ms":                        configTypeLong,
	"index.interval.bytes":            configTypeInt,
	"max.message.bytes":               configTypeInt,
	"message.timestamp.after.max.ms":  configTypeLong,
	"message.timestamp.before.max.ms": configTypeLong,
	"message.timestamp.type":          configTypeString,
	"millrace.flush.on.ack":           configTypeBoolean,
	"millrace.max.decompressed.bytes": configTypeLong,
	"min.insync.replicas":             configTypeInt,
	"retention.bytes":                 configTypeLong,
	"retention.ms":                    configTypeLong,
	"segment.bytes":                   configTypeInt,
	"segment.index.bytes":             configTypeInt,
	"segment.ms":                      configTypeLong,
	"unclean.leader.election.enable":  configTypeBoolean,
	// Broker configs.
	"advertised.listeners":            configTypeString,
	"auto.create.topics.enable":       configTypeBoolean,
	"broker.id":                       configTypeInt,
	"broker.rack":                     configTypeString,
	"connections.max.idle.ms":         configTypeLong,
	"default.replication.factor":      configTypeInt,
	"listeners":                       configTypeString,
	"millrace.max.pipelined.requests": configTypeInt,
	"num.partitions":                  configTypeInt,
	"socket.request.max.bytes":        configTypeInt,
}

func configType(name string) int8 {
	if t, ok := configTypes[name]; ok {
		return t
	}
	return configTypeUnknown
}

// topicConfigEntry is one described topic config.
type topicConfigEntry struct {
	name   string
	value  string
	source int8
}

// topicConfigEntries lists a topic's effective configs, sorted by name, each
// marked as an override or a default.
func topicConfigEntries(values, overrides map[string]string) []topicConfigEntry {
	out := make([]topicConfigEntry, 0, len(values))
	for _, name := range cluster.TopicConfigNames() {
		value, ok := values[name]
		if !ok {
			continue
		}
		source := sourceDefaultConfig
		if _, over := overrides[name]; over {
			source = sourceTopicConfig
		}
		out = append(out, topicConfigEntry{name: name, value: value, source: source})
	}
	return out
}

// plannedTopicValues is the effective config of a topic not created yet
// (CreateTopics with validate_only): the defaults with its overrides.
func plannedTopicValues(b *Broker, overrides map[string]string) map[string]string {
	values := b.cluster.DefaultTopicConfigValues()
	for name, v := range overrides {
		values[name] = v
	}
	return values
}

// splitList splits a comma-separated list config value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
