package kafka

import (
	"strings"

	"millrace/broker/cluster"
	"millrace/broker/log"
	"millrace/internal/settings"
)

// configDoc is a config's documentation for DescribeConfigs, nil for none:
// only deprecated settings have one, marked "[DEPRECATED]" first as Kafka
// marks them, which is how a client learns it. A broker-wide topic default
// (log.message.format.version) has its topic config's.
func configDoc(name string) *string {
	if s, ok := describedSetting(name); ok && strings.HasPrefix(s.Doc, "[DEPRECATED]") {
		return &s.Doc
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
func configType(name string) settings.Type {
	s, _ := describedSetting(name)
	return s.Type
}

// describedSetting finds a wire server setting, or a topic config by its
// topic name or its broker synonym.
func describedSetting(name string) (settings.Info, bool) {
	if s, ok := Settings.Lookup(name); ok {
		return settings.Info{Name: s.Name, Type: s.Type, Doc: s.Doc}, true
	}
	if topic, ok := cluster.TopicConfigOfBroker(name); ok {
		name = topic
	}
	return cluster.TopicConfigInfo(name)
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
			e.value, e.source = v, int8(cluster.SourceTopic)
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
