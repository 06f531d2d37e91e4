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
// asking for broker-side recompression gets INVALID_CONFIG
// instead of a setting that silently does nothing. cleanup.policy is a log
// setting (log.Config.CleanupPolicy): the log's retention and cleaner obey it.
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
	"compression.type": {"producer", func(v string) error {
		if v != "producer" {
			return fmt.Errorf("only \"producer\" is supported; batches are stored as the producer compressed them")
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

// DefaultTopicConfigValues returns every topic config's default value.
func (c *Cluster) DefaultTopicConfigValues() map[string]string {
	values := c.defaults.Values()
	for name, bc := range brokerTopicConfigs {
		values[name] = bc.def
	}
	return values
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
	for name, bc := range brokerTopicConfigs {
		values[name] = bc.def
		if v, ok := t.Config[name]; ok {
			values[name] = v
		}
	}
	return values, maps.Clone(t.Config), nil
}

// effectiveConfig applies overrides to the defaults: log settings through
// log.Config.Set (where their names and values are validated), the others
// through brokerTopicConfigs.
func (c *Cluster) effectiveConfig(overrides map[string]string) (log.Config, error) {
	cfg := c.defaults
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
