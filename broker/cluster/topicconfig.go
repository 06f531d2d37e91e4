package cluster

import (
	"fmt"
	"maps"
	"strconv"

	"millrace/broker/log"
)

// Topic configs that are not about the log's storage: replication and
// policies enforced above the log. They are validated here; broker/log
// validates the rest. Only values millrace honours are accepted, so a client
// gets INVALID_CONFIG instead of a setting that silently does nothing.
// cleanup.policy and compression.type are log settings
// (log.Config.CleanupPolicy, CompressionType): the log's retention and
// cleaner obey the one, its produce path the other.
var brokerTopicConfigs = map[string]struct {
	def   string
	check func(string) error
}{
	// Checked by acks=all produce against the ISR size (docs/architecture.md §5).
	"min.insync.replicas": {"1", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("must be an integer of at least 1")
		}
		return nil
	}},
	// Lets a controller elect an out-of-sync leader (docs/architecture.md §5).
	"unclean.leader.election.enable": {"false", func(v string) error {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("must be true or false")
		}
		return nil
	}},
}

// ListTopicConfigs are the topic configs whose values are comma-separated
// lists (IncrementalAlterConfigs APPEND and SUBTRACT apply to them).
var ListTopicConfigs = map[string]bool{"cleanup.policy": true}

// TopicConfigNames lists every topic config name a topic may override.
func TopicConfigNames() []string {
	names := log.ConfigNames()
	for name := range brokerTopicConfigs {
		names = append(names, name)
	}
	return sortedNames(setOf(names))
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// DefaultTopicConfigValues returns every topic config's default value: the
// broker-wide value a topic without an override has.
func (c *Cluster) DefaultTopicConfigValues() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	values := map[string]string{}
	for _, name := range TopicConfigNames() {
		values[name] = c.brokerLayersLocked(name)[0].Value
	}
	return values
}

// DefaultTopicConfigSources returns every topic config's broker-wide
// default with the layer it comes from, by topic config name.
func (c *Cluster) DefaultTopicConfigSources() map[string]ConfigSynonym {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]ConfigSynonym{}
	for _, name := range TopicConfigNames() {
		out[name] = c.brokerLayersLocked(name)[0]
	}
	return out
}

// TopicConfigValues returns a topic's effective values of every topic config
// and, separately, its overrides (a subset).
func (c *Cluster) TopicConfigValues(name string) (values, overrides map[string]string, err error) {
	t, ok := c.Topic(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	cfg, err := c.effectiveConfig(t.Config)
	if err != nil {
		return nil, nil, err
	}
	values = cfg.Values()
	for name := range brokerTopicConfigs {
		values[name] = c.TopicSetting(t, name)
	}
	return values, maps.Clone(t.Config), nil
}

// topicDefaults returns the built-in and the static (properties file)
// default of every topic config, by topic config name.
func topicDefaults(static log.Config, staticAbove map[string]string) (builtin, configured map[string]string) {
	builtin, configured = log.DefaultConfig().Values(), static.Values()
	for name, bc := range brokerTopicConfigs {
		builtin[name] = bc.def
		configured[name] = bc.def
		if v, ok := staticAbove[name]; ok {
			configured[name] = v
		}
	}
	return builtin, configured
}

// effectiveConfig applies the dynamic broker defaults and then overrides to
// the static defaults: log settings through log.Config.Set (where their
// names and values are validated), the others through brokerTopicConfigs.
func (c *Cluster) effectiveConfig(overrides map[string]string) (log.Config, error) {
	cfg := c.defaults
	c.mu.RLock()
	dynamic := c.dynamicTopicDefaultsLocked()
	c.mu.RUnlock()
	for _, name := range sortedNames(dynamic) {
		if _, ok := brokerTopicConfigs[name]; ok {
			continue
		}
		if err := cfg.Set(name, dynamic[name]); err != nil {
			return log.Config{}, fmt.Errorf("%w: broker default %s=%q: %v", ErrInvalidConfig, name, dynamic[name], err)
		}
	}
	for _, name := range sortedNames(overrides) {
		value := overrides[name]
		if bc, ok := brokerTopicConfigs[name]; ok {
			if err := bc.check(value); err != nil {
				return log.Config{}, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, value, err)
			}
			continue
		}
		if err := cfg.Set(name, value); err != nil {
			return log.Config{}, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, value, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return log.Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return cfg, nil
}
