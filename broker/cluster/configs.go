package cluster

import (
	"errors"
	"fmt"
	"maps"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// DefaultLogConfig is the broker-wide log config that topic overrides apply to.
func (c *Cluster) DefaultLogConfig() log.Config { return c.defaults }

// TopicConfig is a topic's effective log config: the defaults plus its
// overrides.
func (c *Cluster) TopicConfig(name string) (log.Config, error) {
	t, ok := c.Topic(name)
	if !ok {
		return log.Config{}, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return c.effectiveConfig(t.Config)
}

// AlterConfig replaces a topic's config overrides with overrides (names not
// listed return to the default), stores them, and applies the new effective
// config to the topic's open logs. With validateOnly it only validates.
// Errors wrap ErrUnknownTopic or ErrInvalidConfig for bad requests.
func (c *Cluster) AlterConfig(name string, overrides map[string]string, validateOnly bool) error {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if err := c.checkOpen(); err != nil {
		return err
	}
	c.mu.RLock()
	entry, ok := c.topics[name]
	c.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	overrides = maps.Clone(overrides)
	if overrides == nil {
		overrides = map[string]string{}
	}
	cfg, err := c.effectiveConfig(overrides)
	if err != nil || validateOnly {
		return err
	}
	// Set, or Create when the topic was made by a tool that wrote no
	// config node.
	if _, err := c.store.Set(topicConfigPath(name), encodeConfig(overrides), coord.AnyVersion); errors.Is(err, coord.ErrNoNode) {
		_, err = c.store.Create(topicConfigPath(name), encodeConfig(overrides), coord.Persistent)
		if err != nil {
			return fmt.Errorf("cluster: writing topic %q config: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("cluster: writing topic %q config: %w", name, err)
	}
	t := *entry.topic
	t.Config = overrides
	next := &topicEntry{topic: &t, logs: entry.logs}
	c.mu.Lock()
	c.topics[name] = next
	c.byID[t.ID] = next
	c.signalModelLocked()
	c.mu.Unlock()
	for p, l := range entry.logs {
		if l == nil {
			continue
		}
		if err := l.SetConfig(cfg); err != nil {
			// The store holds the new config, so a restart applies it.
			c.logger.Error("applying a topic config to a partition log", "topic", name, "partition", p, "err", err)
		}
	}
	c.logger.Info("topic config changed", "topic", name, "overrides", len(overrides))
	return nil
}
