package kafka

import (
	"strings"

	"millrace/broker/cluster"
	"millrace/broker/log"
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
	configTypeClass   int8 = 8
)

// configTypes gives the type Kafka declares for each config we describe.
var configTypes = map[string]int8{
	// Topic configs.
	"cleanup.policy":                   configTypeList,
	"compression.type":                 configTypeString,
	"file.delete.delay.ms":             configTypeLong,
	"flush.messages":                   configTypeLong,
	"flush.ms":                         configTypeLong,
	"index.interval.bytes":             configTypeInt,
	"max.message.bytes":                configTypeInt,
	"message.format.version":           configTypeString,
	"message.timestamp.after.max.ms":   configTypeLong,
	"message.timestamp.before.max.ms":  configTypeLong,
	"message.timestamp.type":           configTypeString,
	"millrace.compacted.max.key.bytes": configTypeLong,
	"millrace.flush.on.ack":            configTypeBoolean,
	"millrace.max.decompressed.bytes":  configTypeLong,
	"min.insync.replicas":              configTypeInt,
	"retention.bytes":                  configTypeLong,
	"retention.ms":                     configTypeLong,
	"segment.bytes":                    configTypeInt,
	"segment.index.bytes":              configTypeInt,
	"segment.ms":                       configTypeLong,
	"unclean.leader.election.enable":   configTypeBoolean,
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
	"replica.selector.class":          configTypeClass,
	"socket.request.max.bytes":        configTypeInt,
}

// configDocs are the documentation strings DescribeConfigs v3+ returns
// when asked; only deprecated settings have one, marked "[DEPRECATED]"
// first as Kafka marks them, which is how a client learns it.
var configDocs = map[string]string{
	"message.format.version": "[DEPRECATED] The record format version the broker writes to the log. " +
		"Ignored, as by Kafka 3.x brokers whose inter-broker protocol is 3.0 or later: batches are always " +
		"stored in format v2. Accepted so that tools which still set it are not refused; Kafka 4.0 removed it.",
}

// configDoc is a config's documentation, nil for none; a broker-wide
// topic default (log.message.format.version) has its topic config's.
func configDoc(name string) *string {
	if topic, ok := cluster.TopicConfigOfBroker(name); ok {
		name = topic
	}
	if doc, ok := configDocs[name]; ok {
		return &doc
	}
	return nil
}

// warnIgnoredTopicConfigs logs, as Kafka 3.x does, a topic's
// message.format.version that names a format older than v2: the setting
// is ignored and the topic stores v2 batches, which consumers from before
// Kafka 0.11 cannot read.
func (b *Broker) warnIgnoredTopicConfigs(topic string, overrides map[string]string) {
	v, ok := overrides["message.format.version"]
	if !ok || !log.MessageFormatBeforeV2(v) {
		return
	}
	b.logger.Warn("topic config message.format.version is ignored: batches are stored in format v2, as Kafka 3.x stores them with inter-broker protocol 3.0 or later; the setting is deprecated",
		"topic", topic, "message.format.version", v)
}

// configType is a config's type; a broker-wide topic default
// (log.retention.ms) has its topic config's type.
func configType(name string) int8 {
	if t, ok := configTypes[name]; ok {
		return t
	}
	if topic, ok := cluster.TopicConfigOfBroker(name); ok {
		if t, ok := configTypes[topic]; ok {
			return t
		}
	}
	return configTypeUnknown
}

// topicConfigEntry is one described topic config.
type topicConfigEntry struct {
	name   string
	value  string
	source int8
}

// plannedTopicEntries lists the effective configs of a topic being created,
// sorted by name: each override, and the broker-wide default (with the layer
// it comes from) for the rest.
func plannedTopicEntries(b *Broker, overrides map[string]string) []topicConfigEntry {
	defaults := b.cluster.DefaultTopicConfigSources()
	out := make([]topicConfigEntry, 0, len(defaults))
	for _, name := range cluster.TopicConfigNames() {
		d, ok := defaults[name]
		if !ok {
			continue
		}
		e := topicConfigEntry{name: name, value: d.Value, source: int8(d.Source)}
		if v, over := overrides[name]; over {
			e.value, e.source = v, sourceTopicConfig
		}
		out = append(out, e)
	}
	return out
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
