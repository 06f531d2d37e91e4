package broker

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/broker/cluster"
	"millrace/broker/group"
	"millrace/broker/kafka"
	"millrace/broker/log"
	"millrace/broker/tier"
	"millrace/internal/settings"
)

// Config is a whole broker's configuration. Set accepts Kafka's broker
// config names (Settings), so a server.properties file carries over.
type Config struct {
	// DataDir (log.dirs) holds the partition logs (DataDir/logs) and the
	// embedded coordination store (DataDir/coord). Required.
	DataDir string
	// Kafka is the wire server's configuration (listeners, broker.id, ...).
	Kafka kafka.Config
	// Log is the default topic configuration, set with Kafka's broker-level
	// names (log.segment.bytes, log.retention.hours, ...).
	Log log.Config
	// Group is the group coordinator's configuration.
	Group group.Config
	// Metrics, when set, receives the broker's Prometheus metrics. It is not
	// a setting of the properties file: the process that runs the broker
	// decides where metrics are served.
	Metrics prometheus.Registerer
	// HoldUnsyncedWrites is for power-cut tests only, and not a setting of
	// the properties file: the logs keep writes that are not fsynced yet in
	// the process's memory (log.OpenManagerHoldingUnsynced), so killing the
	// process loses what a power cut would. Default false.
	HoldUnsyncedWrites bool
	// RetentionCheckInterval (log.retention.check.interval.ms, default 5
	// minutes) is how often retention is enforced. flush.ms has a timer per
	// log (broker/log/flush.go); this check only backs it up.
	RetentionCheckInterval time.Duration
	// MaxOpenLogFiles (millrace.log.max.open.files, default
	// log.DefaultMaxOpenFiles, 2048) bounds the segment files (.log, .index,
	// .timeindex) of all partitions held open at once: segment files are
	// opened on first use and the least recently used closed beyond it, so a
	// broker of 10,000 partitions needs no more descriptors than this plus
	// its connections. 0 means no bound (Kafka's behaviour: the ulimit must
	// then cover every file).
	MaxOpenLogFiles int
	// RecoveryThreads (Kafka's num.recovery.threads.per.data.dir; default
	// log.DefaultRecoveryThreads, 8, where Kafka's is 1) is how many
	// partition logs are opened, recovered after a crash, and closed at
	// once. Must be at least 1.
	RecoveryThreads int
	// Cleaner is the log cleaner's configuration (log.cleaner.*), which
	// compacts topics whose cleanup.policy includes compact.
	Cleaner log.CleanerConfig

	// ZooKeeper (zookeeper.connect) is "host:port[,host:port...][/chroot]".
	// When set, coordination is that ZooKeeper ensemble instead of the
	// embedded store, and the broker runs in multi-broker mode: it takes
	// part in controller elections and replicates partitions. Default empty.
	ZooKeeper string
	// Cluster holds the multi-broker settings (cluster.Settings). The
	// broker ID and topic defaults come from Kafka.
	Cluster cluster.Config
	// SchemaRegistry is the schema registry the broker hosts
	// (schema.registry.*); off by default.
	SchemaRegistry SchemaRegistryConfig
	// Tier is tiered storage (remote.log.storage.system.enable,
	// millrace.remote.storage.*; broker/tier); off by default.
	Tier tier.Config
}

// DefaultConfig returns Kafka's defaults, listening on 127.0.0.1:9092.
func DefaultConfig() Config {
	k := kafka.DefaultConfig()
	k.Listener = "127.0.0.1:9092"
	return Config{
		Kafka:                  k,
		Log:                    log.DefaultConfig(),
		Group:                  group.DefaultConfig(),
		RetentionCheckInterval: 5 * time.Minute,
		MaxOpenLogFiles:        log.DefaultMaxOpenFiles,
		RecoveryThreads:        log.DefaultRecoveryThreads,
		Cleaner:                log.DefaultCleanerConfig(),
		Cluster:                cluster.DefaultConfig(),
		SchemaRegistry:         SchemaRegistryConfig{AuthenticationMethod: SchemaRegistryAuthNone},
		Tier:                   tier.DefaultConfig(),
	}
}

// Validate rejects impossible settings with a sentence that says why.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return fmt.Errorf("broker: a data directory (--data or log.dirs) is required")
	}
	if c.RetentionCheckInterval <= 0 {
		return fmt.Errorf("broker: log.retention.check.interval.ms must be positive, not %v", c.RetentionCheckInterval)
	}
	if c.MaxOpenLogFiles < 0 {
		return fmt.Errorf("broker: millrace.log.max.open.files must be 0 (no bound) or positive, not %d", c.MaxOpenLogFiles)
	}
	if c.RecoveryThreads < 1 {
		return fmt.Errorf("broker: num.recovery.threads.per.data.dir must be at least 1, not %d", c.RecoveryThreads)
	}
	if err := c.Kafka.Validate(); err != nil {
		return err
	}
	if err := c.clusterConfig().Validate(); err != nil {
		return err
	}
	if err := c.Group.Validate(); err != nil {
		return err
	}
	if err := c.Cleaner.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if err := c.SchemaRegistry.validate(c.Kafka.SSLKeystoreLocation); err != nil {
		return err
	}
	if err := c.Tier.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return c.Log.Validate()
}

// Settings are every broker setting, by Kafka's broker config names: the
// broker's own, the cleaner's, the metadata layer's, the coordinator's, the
// broker-wide topic defaults and the wire server's, each defined once in its
// package. Set, Names, Values and docs/settings.md come from it.
var Settings = settings.Join(
	wrapped(settings.NewList[Config](nil,
		settings.Str("log.dirs", settings.String, "the data directory (`--data`)", func(c *Config) *string { return &c.DataDir }),
		settings.Str("log.dir", settings.String, "the same as log.dirs", func(c *Config) *string { return &c.DataDir }),
		settings.Str("zookeeper.connect", settings.String, "`host:port[,...][/chroot]` of a ZooKeeper ensemble; empty: the embedded store", func(c *Config) *string { return &c.ZooKeeper }),
		settings.Ms("log.retention.check.interval.ms", "how often retention runs", func(c *Config) *time.Duration { return &c.RetentionCheckInterval }),
		settings.Integer("millrace.log.max.open.files", settings.Int, 0, "segment files held open at once; 0: no bound", func(c *Config) *int { return &c.MaxOpenLogFiles }),
		settings.Integer("num.recovery.threads.per.data.dir", settings.Int, 0, "partition logs opened, recovered and closed at once", func(c *Config) *int { return &c.RecoveryThreads }),
	)),
	wrapped(settings.Lift(log.CleanerSettings, func(c *Config) *log.CleanerConfig { return &c.Cleaner })),
	wrapped(settings.Lift(cluster.Settings, func(c *Config) *cluster.Config { return &c.Cluster })),
	wrapped(settings.Lift(group.Settings, func(c *Config) *group.Config { return &c.Group })),
	wrapped(schemaRegistrySettings),
	wrapped(settings.Lift(tier.Settings, func(c *Config) *tier.Config { return &c.Tier })),
	topicDefaultSettings(),
	settings.Lift(kafka.Settings, func(c *Config) *kafka.Config { return &c.Kafka }),
)

// wrapped gives a component's settings the broker's error messages.
func wrapped(l settings.List[Config]) settings.List[Config] {
	return settings.NewList(func(name, _ string, err error) error {
		return fmt.Errorf("broker: %s %w", name, err)
	}, l.All()...)
}

// topicDefaultSettings are the broker-wide topic defaults: each topic
// config under its broker name (cluster.TopicSettings' synonyms), which an
// admin client can also change at runtime (IncrementalAlterConfigs on a
// broker resource), and Kafka's coarser retention and roll names. Log
// settings go to Log, the ones kept above the log to Cluster.TopicDefaults.
func topicDefaultSettings() settings.List[Config] {
	var list []settings.Setting[Config]
	for _, t := range cluster.TopicSettings() {
		if t.Synonym == "" {
			continue // a topic config with no broker default, as Kafka's *.replication.throttled.replicas
		}
		s := settings.Setting[Config]{Name: t.Synonym, Type: t.Type, Doc: t.Doc, Synonym: t.Name, Dynamic: t.Dynamic}
		if cluster.KeptAboveLog(t.Name) {
			s.Parse = func(c *Config, v string) error {
				if err := cluster.ValidateTopicDefaults(map[string]string{t.Name: v}); err != nil {
					return err
				}
				c.Cluster.TopicDefaults = maps.Clone(c.Cluster.TopicDefaults)
				if c.Cluster.TopicDefaults == nil {
					c.Cluster.TopicDefaults = map[string]string{}
				}
				c.Cluster.TopicDefaults[t.Name] = v
				return nil
			}
			s.Format = func(c Config) string {
				if v, ok := c.Cluster.TopicDefaults[t.Name]; ok {
					return v
				}
				return t.Default
			}
		} else {
			logSetting, _ := log.Settings.Lookup(t.Name)
			s.Parse = func(c *Config, v string) error {
				if err := logSetting.Parse(&c.Log, v); err != nil {
					return fmt.Errorf("broker: %s: %w", t.Synonym, err)
				}
				return nil
			}
			s.Format = func(c Config) string { return logSetting.Format(c.Log) }
		}
		list = append(list, s)
	}
	for _, scaled := range []struct {
		name, topic string
		unit        time.Duration
	}{{"log.roll.hours", "segment.ms", time.Hour}, {"log.retention.hours", "retention.ms", time.Hour}, {"log.retention.minutes", "retention.ms", time.Minute}} {
		logSetting, _ := log.Settings.Lookup(scaled.topic)
		list = append(list, settings.Setting[Config]{Name: scaled.name, Type: settings.Int, Synonym: scaled.topic,
			Doc: "`" + scaled.topic + "` in " + map[time.Duration]string{time.Hour: "hours", time.Minute: "minutes"}[scaled.unit],
			Parse: func(c *Config, v string) error {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("broker: %s must be an integer: %w", scaled.name, err)
				}
				return logSetting.Parse(&c.Log, strconv.FormatInt(n*scaled.unit.Milliseconds(), 10))
			},
			Format: func(c Config) string {
				ms, _ := strconv.ParseInt(logSetting.Format(c.Log), 10, 64)
				return strconv.FormatInt(max(ms/scaled.unit.Milliseconds(), -1), 10)
			},
		})
	}
	return settings.NewList(nil, list...)
}

// Set applies one setting by its Kafka broker config name.
func (c *Config) Set(name, value string) error {
	if ok, err := Settings.Set(c, name, strings.TrimSpace(value)); ok {
		return err
	}
	return c.Kafka.Set(name, value) // the wire server's "unknown broker config"
}

// Names lists every name Set accepts, sorted.
func Names() []string { return Settings.Names() }

// Values returns every setting by its Kafka broker config name.
func (c Config) Values() map[string]string { return Settings.Values(c) }

// LoadProperties applies a Kafka server.properties-style file: one
// name=value per line, '#' or '!' comments, blank lines ignored. Errors name
// the line.
func (c *Config) LoadProperties(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		if !ok {
			return fmt.Errorf("line %d: %q is not name=value", line, text)
		}
		if err := c.Set(strings.TrimSpace(name), value); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	return sc.Err()
}

// clusterConfig is the metadata layer's configuration: the cluster settings
// with the broker ID and topic defaults from the Kafka settings, replicated
// when a ZooKeeper ensemble is configured.
func (c Config) clusterConfig() cluster.Config {
	cc := c.Cluster
	cc.BrokerID = c.Kafka.BrokerID
	cc.DefaultPartitions = c.Kafka.NumPartitions
	cc.DefaultReplicationFactor = c.Kafka.DefaultReplicationFactor
	cc.Replicated = c.ZooKeeper != ""
	cc.RemoteStorageSystemEnabled = c.Tier.Enable
	return cc
}
