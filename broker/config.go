package broker

import (
	"bufio"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"millrace/broker/cluster"
	"millrace/broker/group"
	"millrace/broker/kafka"
	"millrace/broker/log"
)

// Config is a whole broker's configuration. Set accepts Kafka's broker
// config names, so a server.properties file carries over.
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
	// Cleaner is the log cleaner's configuration (log.cleaner.enable,
	// log.cleaner.threads, log.cleaner.io.max.bytes.per.second,
	// log.cleaner.dedupe.buffer.size, log.cleaner.backoff.ms; defaults in
	// log.DefaultCleanerConfig), which compacts topics whose cleanup.policy
	// includes compact.
	Cleaner log.CleanerConfig

	// ZooKeeper (zookeeper.connect) is "host:port[,host:port...][/chroot]".
	// When set, coordination is that ZooKeeper ensemble instead of the
	// embedded store, and the broker runs in multi-broker mode: it takes
	// part in controller elections and replicates partitions. Default empty.
	ZooKeeper string
	// Cluster holds the multi-broker settings: the session timeout
	// (zookeeper.session.timeout.ms, default 18 s), replica.lag.time.max.ms
	// (30 s), auto.leader.rebalance.enable (true),
	// leader.imbalance.check.interval.seconds (300) and request.timeout.ms
	// (30 s, the longest an acks=all produce waits for the ISR). The
	// broker ID and topic defaults come from Kafka.
	Cluster cluster.Config
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
	return c.Log.Validate()
}

// Kafka's broker-wide topic defaults (log.segment.bytes, log.retention.ms,
// log.cleanup.policy, min.insync.replicas, unclean.leader.election.enable,
// compression.type, message.max.bytes, millrace.log.flush.on.ack, ...) are
// the broker synonyms of the topic configs, listed once in broker/cluster
// (cluster.TopicConfigOfBroker). Set gives the log settings to Log and the
// others to Cluster.TopicDefaults; they are also the broker configs an admin
// client can change at runtime (IncrementalAlterConfigs on a broker
// resource), which override these values.

// scaledLogNames are broker names given in coarser units than ms.
var scaledLogNames = map[string]struct {
	name string
	unit time.Duration
}{
	"log.roll.hours":        {"segment.ms", time.Hour},
	"log.retention.hours":   {"retention.ms", time.Hour},
	"log.retention.minutes": {"retention.ms", time.Minute},
}

// Set applies one setting by its Kafka broker config name.
func (c *Config) Set(name, value string) error {
	value = strings.TrimSpace(value)
	if ok, err := c.setCleaner(name, value); ok {
		return err
	}
	if topicName, ok := cluster.TopicConfigOfBroker(name); ok {
		if !cluster.KeptAboveLog(topicName) {
			if err := c.Log.Set(topicName, value); err != nil {
				return fmt.Errorf("broker: %s: %w", name, err)
			}
			return nil
		}
		if err := cluster.ValidateTopicDefaults(map[string]string{topicName: value}); err != nil {
			return err
		}
		defaults := maps.Clone(c.Cluster.TopicDefaults)
		if defaults == nil {
			defaults = map[string]string{}
		}
		defaults[topicName] = value
		c.Cluster.TopicDefaults = defaults
		return nil
	}
	if scaled, ok := scaledLogNames[name]; ok {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer: %w", name, err)
		}
		return c.Log.Set(scaled.name, strconv.FormatInt(n*scaled.unit.Milliseconds(), 10))
	}
	ms := func(dst *time.Duration) error {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer number of milliseconds: %w", name, err)
		}
		*dst = time.Duration(n) * time.Millisecond
		return nil
	}
	switch name {
	case "log.dirs", "log.dir":
		c.DataDir = value
		return nil
	case "zookeeper.connect":
		c.ZooKeeper = value
		return nil
	case "zookeeper.session.timeout.ms":
		return ms(&c.Cluster.SessionTimeout)
	case "replica.lag.time.max.ms":
		return ms(&c.Cluster.ReplicaLagTimeMax)
	case "request.timeout.ms":
		return ms(&c.Cluster.ProduceAckTimeout)
	case "leader.imbalance.check.interval.seconds":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer number of seconds: %w", name, err)
		}
		c.Cluster.LeaderImbalanceCheckInterval = time.Duration(n) * time.Second
		return nil
	case "auto.leader.rebalance.enable":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("broker: %s must be true or false: %w", name, err)
		}
		c.Cluster.AutoLeaderRebalance = b
		return nil
	case "log.retention.check.interval.ms":
		return ms(&c.RetentionCheckInterval)
	case "group.min.session.timeout.ms":
		return ms(&c.Group.MinSessionTimeout)
	case "group.max.session.timeout.ms":
		return ms(&c.Group.MaxSessionTimeout)
	case "group.initial.rebalance.delay.ms":
		return ms(&c.Group.InitialRebalanceDelay)
	case "offsets.retention.minutes":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer number of minutes: %w", name, err)
		}
		c.Group.OffsetsRetention = time.Duration(n) * time.Minute
		return nil
	case "offsets.retention.check.interval.ms":
		return ms(&c.Group.OffsetsRetentionCheckInterval)
	case "millrace.group.id.max.bytes", "millrace.max.groups":
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer: %w", name, err)
		}
		if name == "millrace.max.groups" {
			c.Group.MaxGroups = n
		} else {
			c.Group.MaxGroupIDBytes = n
		}
		return nil
	case "millrace.max.partitions.per.topic", "millrace.max.partitions.per.request", "millrace.max.partitions":
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer below 2^31: %w", name, err)
		}
		switch name {
		case "millrace.max.partitions.per.topic":
			c.Cluster.MaxPartitionsPerTopic = int32(n)
		case "millrace.max.partitions.per.request":
			c.Cluster.MaxPartitionsPerRequest = int32(n)
		default:
			c.Cluster.MaxPartitions = int32(n)
		}
		return nil
	case "millrace.log.max.open.files", "num.recovery.threads.per.data.dir":
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer: %w", name, err)
		}
		if name == "num.recovery.threads.per.data.dir" {
			c.RecoveryThreads = n
		} else {
			c.MaxOpenLogFiles = n
		}
		return nil
	case "offset.metadata.max.bytes":
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("broker: %s must be an integer: %w", name, err)
		}
		c.Group.MaxMetadataBytes = n
		return nil
	}
	return c.Kafka.Set(name, value)
}

// Names lists every name Set accepts, sorted.
func Names() []string {
	names := []string{"log.dirs", "log.dir", "log.retention.check.interval.ms", "group.min.session.timeout.ms",
		"zookeeper.connect", "zookeeper.session.timeout.ms", "replica.lag.time.max.ms", "request.timeout.ms",
		"leader.imbalance.check.interval.seconds", "auto.leader.rebalance.enable",
		"group.max.session.timeout.ms", "group.initial.rebalance.delay.ms", "offset.metadata.max.bytes",
		"offsets.retention.minutes", "offsets.retention.check.interval.ms", "millrace.group.id.max.bytes", "millrace.max.groups",
		"millrace.max.partitions.per.topic", "millrace.max.partitions.per.request", "millrace.max.partitions", "millrace.log.max.open.files", "num.recovery.threads.per.data.dir"}
	names = append(names, cluster.DynamicBrokerConfigNames()...)
	for n := range scaledLogNames {
		names = append(names, n)
	}
	names = append(names, kafka.ConfigNames()...)
	sort.Strings(names)
	return names
}

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
	return cc
}
