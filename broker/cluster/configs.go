package cluster

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"millrace/broker/coord"
	"millrace/broker/log"
	"millrace/internal/settings"
)

// Settings are the metadata layer's broker settings, by Kafka's names. The
// broker ID and topic defaults come from the wire server's settings and the
// topic configs' broker synonyms (TopicSettings).
var Settings = settings.NewList[Config](nil,
	settings.Ms("zookeeper.session.timeout.ms", "ZooKeeper session timeout; a broker silent this long is gone", func(c *Config) *time.Duration { return &c.SessionTimeout }),
	settings.Ms("replica.lag.time.max.ms", "a follower behind this long leaves the ISR", func(c *Config) *time.Duration { return &c.ReplicaLagTimeMax }),
	settings.Ms("request.timeout.ms", "the longest an acks=all produce waits for the ISR", func(c *Config) *time.Duration { return &c.ProduceAckTimeout }),
	settings.Duration("leader.imbalance.check.interval.seconds", time.Second, "how often the controller restores preferred leaders", func(err error) error {
		return fmt.Errorf("must be an integer number of seconds: %w", err)
	}, func(c *Config) *time.Duration { return &c.LeaderImbalanceCheckInterval }),
	settings.TrueFalse("auto.leader.rebalance.enable", "restore preferred leaders", func(c *Config) *bool { return &c.AutoLeaderRebalance }),
	partitions("millrace.max.partitions.per.topic", "most partitions of one topic", func(c *Config) *int32 { return &c.MaxPartitionsPerTopic }),
	partitions("millrace.max.partitions.per.request", "most partitions one CreateTopics or CreatePartitions request adds", func(c *Config) *int32 { return &c.MaxPartitionsPerRequest }),
	partitions("millrace.max.partitions", "most partitions in the cluster", func(c *Config) *int32 { return &c.MaxPartitions }),
)

func partitions(name, doc string, dst func(*Config) *int32) settings.Setting[Config] {
	s := settings.Integer(name, settings.Int, 32, doc, dst)
	parse := s.Parse
	s.Parse = func(c *Config, v string) error {
		if err := parse(c, v); err != nil {
			return fmt.Errorf("must be an integer below 2^31: %w", errors.Unwrap(err))
		}
		return nil
	}
	return s
}

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
	if err == nil {
		err = c.checkRemoteStorage(cfg)
	}
	if err == nil {
		err = c.checkRemoteStorageKept(entry.topic.Config, cfg)
	}
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

// checkRemoteStorageKept refuses turning remote.storage.enable off on a
// topic that has it: its remote data would stay in the store with nothing
// to read or expire it. Kafka refuses it too, unless
// remote.log.delete.on.disable=true comes with it (KIP-950), which
// millrace does not have.
func (c *Cluster) checkRemoteStorageKept(old map[string]string, next log.Config) error {
	before, err := c.effectiveConfig(old)
	if err != nil || !before.RemoteStorageEnable || next.RemoteStorageEnable {
		return nil
	}
	return fmt.Errorf("%w: remote.storage.enable cannot be turned off on a tiered topic: its remote data would be left in the store; to drop the remote data, delete the topic", ErrInvalidConfig)
}

// checkRemoteStorage refuses remote.storage.enable=true on a broker
// without remote.log.storage.system.enable, as Kafka's
// validateRemoteStorageOnlyIfSystemEnabled does at creation and alteration.
func (c *Cluster) checkRemoteStorage(cfg log.Config) error {
	if cfg.RemoteStorageEnable && !c.cfg.RemoteStorageSystemEnabled {
		return fmt.Errorf("%w: remote.storage.enable=true needs tiered storage on the broker (remote.log.storage.system.enable=true and millrace.remote.storage.url)", ErrInvalidConfig)
	}
	return nil
}
