// Package cluster is millrace's metadata model: topics, their partitions,
// replica assignments, leadership and per-topic config overrides, and the live
// brokers. It keeps the model in the coordination store at the seed's paths,
//
//	/brokers/ids/<id>                              ephemeral broker registration
//	/brokers/topics/<topic>                        replica assignment and topic ID
//	/brokers/topics/<topic>/partitions/<p>/state   leader, leader epoch, ISR
//	/config/topics/<topic>                         per-topic config overrides
//	/config/brokers/<default>, /config/brokers/<id> dynamic broker configs (brokerconfig.go)
//	/admin/delete_topics/<topic>                   a topic being deleted (delete.go)
//	/cluster/id                                    the cluster ID
//
// and opens, reconfigures and deletes the partition logs (broker/log) of the
// partitions this broker hosts.
//
// With one broker (Config.Replicated unset) this broker writes the model and
// leads every partition it hosts. With several brokers sharing a ZooKeeper
// ensemble (Replicated set), Start also keeps the model in step with the store
// through watches (sync.go), follows the coordination session so that a broker
// that lost it stops acting on what it knew (session.go), and takes part in
// the controller election (controller.go); the kafka package's replication
// manager reads the model and carries out each broker's part.
package cluster

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// Store paths.
const (
	brokersPath      = "/brokers"
	brokerIDsPath    = "/brokers/ids"
	topicsPath       = "/brokers/topics"
	configPath       = "/config"
	topicConfigsPath = "/config/topics"
	clusterPath      = "/cluster"
	clusterIDPath    = "/cluster/id"
)

func topicPath(topic string) string { return topicsPath + "/" + topic }
func partitionsPath(topic string) string {
	return topicPath(topic) + "/partitions"
}
func partitionPath(topic string, p int32) string {
	return fmt.Sprintf("%s/%d", partitionsPath(topic), p)
}
func partitionStatePath(topic string, p int32) string { return partitionPath(topic, p) + "/state" }
func topicConfigPath(topic string) string             { return topicConfigsPath + "/" + topic }
func brokerPath(id int32) string                      { return fmt.Sprintf("%s/%d", brokerIDsPath, id) }

// Config is what the metadata layer needs to know about this broker.
type Config struct {
	// BrokerID is this broker's ID (Kafka's broker.id). Default 0.
	BrokerID int32
	// DefaultPartitions is used when a creation asks for the default
	// partition count (Kafka's num.partitions). Default 1.
	DefaultPartitions int32
	// DefaultReplicationFactor is used when a creation asks for the default
	// replication factor (Kafka's default.replication.factor). Default 1.
	DefaultReplicationFactor int16
	// TopicDefaults are the broker-wide defaults, by topic config name, of
	// the topic configs kept above the log, from the properties file:
	// min.insync.replicas (default 1) and unclean.leader.election.enable
	// (false).
	// A name left out has its built-in default. The log settings' defaults
	// are the log.Config given to Open.
	TopicDefaults map[string]string

	// RemoteStorageSystemEnabled is remote.log.storage.system.enable
	// (broker/tier): without it a topic may not set
	// remote.storage.enable=true, as in Kafka. Default false.
	RemoteStorageSystemEnabled bool

	// Replicated turns on multi-broker mode (see the package doc): Start
	// watches the store, elects a controller and partitions are replicated.
	// Default false (a single broker with embedded coordination).
	Replicated bool
	// SessionTimeout is the coordination session timeout
	// (zookeeper.session.timeout.ms, default 18 s). A broker disconnected
	// from the store for this long stops leading: by then the ensemble may
	// have expired its session and elected other leaders.
	SessionTimeout time.Duration
	// ReplicaLagTimeMax is replica.lag.time.max.ms (default 30 s): a follower
	// that has not caught up for this long leaves the ISR.
	ReplicaLagTimeMax time.Duration
	// AutoLeaderRebalance is auto.leader.rebalance.enable (default true): the
	// controller moves leadership back to preferred replicas every
	// LeaderImbalanceCheckInterval (leader.imbalance.check.interval.seconds,
	// default 300 s) and whenever a broker registers.
	AutoLeaderRebalance          bool
	LeaderImbalanceCheckInterval time.Duration
	// ProduceAckTimeout bounds how long an acks=all produce waits for the ISR
	// (Kafka's request.timeout.ms, default 30 s) before REQUEST_TIMED_OUT.
	ProduceAckTimeout time.Duration
	// MaxPartitionsPerTopic (millrace.max.partitions.per.topic, default
	// 10000; 0 means the default) bounds the partition count of one topic,
	// at creation and when partitions are added; more gets
	// INVALID_PARTITIONS. Kafka has no such limit, but every partition
	// costs a log (three open files) on each replica and nodes in the
	// store, and the count comes straight off the wire: it is checked
	// before anything is sized from it. 10000 is well above what real
	// topics use.
	MaxPartitionsPerTopic int32
	// MaxPartitionsPerRequest (millrace.max.partitions.per.request, default
	// 10000; 0 means the default) bounds the partitions one CreateTopics or
	// CreatePartitions request adds over all its topics; the topics that
	// would go beyond it get POLICY_VIOLATION (the kafka package applies
	// it, in request order).
	MaxPartitionsPerRequest int32
	// MaxPartitions (millrace.max.partitions, default 100000; 0 means the
	// default) bounds the partitions of all topics together (replicas not
	// counted), the cluster-wide limit KIP-578 proposed as max.partitions;
	// a creation that would go beyond it gets POLICY_VIOLATION.
	MaxPartitions int32
	// ExpectedClusterID is the cluster the partition logs were written for
	// (the data directory's meta.properties); Open refuses a store of
	// another cluster, which would not know the logs' topics and so have
	// them deleted as strays. Default empty: any cluster.
	ExpectedClusterID string
}

// Defaults of the partition limits; a zero limit in Config means its
// default.
const (
	DefaultMaxPartitionsPerTopic   = 10000
	DefaultMaxPartitionsPerRequest = 10000
	DefaultMaxPartitions           = 100000
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{BrokerID: 0, DefaultPartitions: 1, DefaultReplicationFactor: 1,
		SessionTimeout: 18 * time.Second, ReplicaLagTimeMax: 30 * time.Second,
		AutoLeaderRebalance: true, LeaderImbalanceCheckInterval: 300 * time.Second,
		ProduceAckTimeout:     30 * time.Second,
		MaxPartitionsPerTopic: DefaultMaxPartitionsPerTopic, MaxPartitionsPerRequest: DefaultMaxPartitionsPerRequest,
		MaxPartitions: DefaultMaxPartitions}
}

// Validate rejects impossible settings.
func (c Config) Validate() error {
	switch {
	case c.BrokerID < 0:
		return fmt.Errorf("cluster: broker id %d is negative; broker IDs are 0 or more", c.BrokerID)
	case c.DefaultPartitions < 1:
		return fmt.Errorf("cluster: default partition count %d must be at least 1", c.DefaultPartitions)
	case c.DefaultReplicationFactor < 1:
		return fmt.Errorf("cluster: default replication factor %d must be at least 1", c.DefaultReplicationFactor)
	case ValidateTopicDefaults(c.TopicDefaults) != nil:
		return ValidateTopicDefaults(c.TopicDefaults)
	case c.MaxPartitionsPerTopic < 0 || c.MaxPartitionsPerRequest < 0 || c.MaxPartitions < 0:
		return fmt.Errorf("cluster: partition limits (per topic %d, per request %d, total %d) must not be negative; 0 means the default",
			c.MaxPartitionsPerTopic, c.MaxPartitionsPerRequest, c.MaxPartitions)
	case c.DefaultPartitions > c.partitionLimits().perTopic:
		return fmt.Errorf("cluster: default partition count %d is above millrace.max.partitions.per.topic (%d), so no topic could be created with it",
			c.DefaultPartitions, c.partitionLimits().perTopic)
	case c.Replicated && (c.SessionTimeout <= 0 || c.ReplicaLagTimeMax <= 0 || c.LeaderImbalanceCheckInterval <= 0 || c.ProduceAckTimeout <= 0):
		return fmt.Errorf("cluster: with replication the session timeout (%v), replica.lag.time.max.ms (%v), leader.imbalance.check.interval (%v) and the produce ack timeout (%v) must all be positive",
			c.SessionTimeout, c.ReplicaLagTimeMax, c.LeaderImbalanceCheckInterval, c.ProduceAckTimeout)
	}
	return nil
}

// topicEntry is one topic with the logs this broker holds for it (nil where
// this broker is not a replica). Immutable: changes build a new entry.
type topicEntry struct {
	topic *Topic
	logs  []*log.Log
}

// Cluster is the metadata model of one broker. Reads are cheap lock-protected
// map lookups returning immutable snapshots; changes (create, delete, grow,
// reconfigure) are serialized, written to the store first and then applied.
type Cluster struct {
	cfg      Config
	store    coord.Store
	logs     *log.Manager
	defaults log.Config
	logger   *slog.Logger
	// builtinTopicDefaults and staticTopicDefaults are every topic
	// config's built-in default and its value from the properties file,
	// by topic config name. Fixed at Open.
	builtinTopicDefaults map[string]string
	staticTopicDefaults  map[string]string

	// adminMu serializes changes, so that a validation and the store write
	// that follows it see the same model. Held across store and disk I/O;
	// readers never take it.
	adminMu sync.Mutex

	mu        sync.RWMutex // guards the following
	topics    map[string]*topicEntry
	byID      map[[16]byte]*topicEntry
	clusterID string
	brokers   []BrokerInfo // live brokers, sorted by ID
	// dynamicDefault and dynamicBroker are the dynamic broker configs
	// (/config/brokers/<default> and /config/brokers/<this broker's ID>),
	// by broker config name. Replaced, never modified.
	dynamicDefault map[string]string
	dynamicBroker  map[string]string
	// onBrokerSettings is called after they change (OnBrokerSettings).
	onBrokerSettings func()
	brokerGen        uint64 // counts the changes of brokers
	closed           bool
	// deleting are the topics marked for deletion (delete.go); they are
	// not in topics.
	deleting map[string]*pendingDeletion
	// modelChanged is closed and replaced by every change of topics,
	// deleting or brokers, and by Close (await.go).
	modelChanged chan struct{}

	registration *registration // set by Register; owns the watch goroutine
	background   *background   // set by Start (replicated mode)

	// changes has room for one signal, sent after every model refresh and
	// session change; the replication manager waits on it (Changes).
	changes chan struct{}
	// sessionOK is false while the coordination session is expired or has
	// been disconnected for longer than the session timeout.
	sessionOK atomic.Bool
	// controllerID is the broker ID in /controller, -1 when none is known.
	controllerID atomic.Int32
	// controllerEpoch is this broker's epoch while it acts as the
	// controller, 0 otherwise (epochs start at 1).
	controllerEpoch atomic.Int32
}

// Open loads the model from the store, creating the base paths and the
// cluster ID on first start, and opens (or creates) the logs of every
// partition this broker hosts with its topic's effective config. defaults is
// the broker-wide log config that topic overrides are applied to.
func Open(cfg Config, store coord.Store, logs *log.Manager, defaults log.Config, logger *slog.Logger) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{
		cfg:      cfg,
		store:    store,
		logs:     logs,
		defaults: defaults,
		logger:   logger.With("component", "cluster"),
		topics:   make(map[string]*topicEntry),
		byID:     make(map[[16]byte]*topicEntry),
		deleting: make(map[string]*pendingDeletion),
		changes:  make(chan struct{}, 1),

		modelChanged: make(chan struct{}),
	}
	c.builtinTopicDefaults, c.staticTopicDefaults = topicDefaults(defaults, cfg.TopicDefaults)
	c.sessionOK.Store(true)
	c.controllerID.Store(cfg.BrokerID)
	if cfg.Replicated {
		c.controllerID.Store(-1)
	}
	for _, p := range []string{brokersPath, brokerIDsPath, topicsPath, configPath, topicConfigsPath, brokerConfigsPath, clusterPath, adminPath, deleteTopicsPath} {
		if err := ensureNode(store, p); err != nil {
			return nil, err
		}
	}
	id, err := loadClusterID(store)
	if err != nil {
		return nil, err
	}
	if cfg.ExpectedClusterID != "" && id != cfg.ExpectedClusterID {
		return nil, fmt.Errorf("cluster: the data directory belongs to cluster %s but the coordination store is cluster %s's (wrong ZooKeeper address or chroot?); refusing to start rather than delete its partition logs", cfg.ExpectedClusterID, id)
	}
	c.clusterID = id
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// ensureNode creates a persistent node if it is missing.
func ensureNode(store coord.Store, path string) error {
	if _, err := store.Create(path, nil, coord.Persistent); err != nil && !errors.Is(err, coord.ErrNodeExists) {
		return fmt.Errorf("cluster: creating %s: %w", path, err)
	}
	return nil
}

// load reads every topic from the store and opens its logs. Logs of topics
// that are gone or pending deletion are deleted rather than served, and
// this broker confirms its part of each pending deletion (delete.go).
func (c *Cluster) load() error {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	clusterWide, own, err := c.readBrokerConfigs(nil)
	if err != nil {
		return err
	}
	c.setBrokerConfigsLocked(clusterWide, own)
	read, pending, err := c.readModel(nil)
	if err != nil {
		return err
	}
	for name, t := range read {
		entry, err := c.openLogs(t)
		if err != nil {
			return err
		}
		c.topics[name] = entry
		c.byID[t.ID] = entry
	}
	c.removeStrayLogs()
	c.applyDeletionsLocked(pending)
	c.logger.Info("metadata loaded", "topics", len(c.topics), "pending_deletion", len(pending), "cluster_id", c.clusterID)
	return nil
}

// readTopic reads one topic's assignment, partition states and overrides.
func (c *Cluster) readTopic(name string) (*Topic, error) { return c.readTopicFrom(nil, name) }

// readTopicFrom is readTopic, arming watches on what it reads when bg is set
// (sync.go). A missing topic node is an error wrapping coord.ErrNoNode.
//
// The assignment and the partition states are separate znodes, read one
// after the other; a reassignment step changes both at once (a multi). If
// the assignment changed while the states were read, they are read again,
// so no broker pairs a new leader epoch with the replica list from before
// it (a leader keeps its replica list for the whole of an epoch).
func (c *Cluster) readTopicFrom(bg *background, name string) (*Topic, error) {
	for attempt := 0; ; attempt++ {
		t, version, err := c.readTopicOnce(bg, name)
		if err != nil {
			return nil, err
		}
		ok, stat, err := c.store.Exists(topicPath(name))
		if err != nil {
			return nil, fmt.Errorf("cluster: reading topic %q: %w", name, err)
		}
		if !ok {
			return nil, fmt.Errorf("cluster: reading topic %q: %w", name, coord.ErrNoNode)
		}
		if stat.Version == version || attempt == 9 {
			return t, nil
		}
	}
}

// readTopicOnce reads the topic and returns it with the version of the
// assignment read.
func (c *Cluster) readTopicOnce(bg *background, name string) (*Topic, int32, error) {
	data, topicStat, err := c.get(bg, topicPath(name))
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: reading topic %q: %w", name, err)
	}
	t, err := decodeTopic(name, data)
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: %w", err)
	}
	for _, p := range t.Partitions {
		state, stat, err := c.get(bg, partitionStatePath(name, p.Partition))
		switch {
		case errors.Is(err, coord.ErrNoNode) && bg != nil:
			// With several brokers nobody leads a partition without a
			// state: guessing could make two leaders.
			p.Leader, p.StateVersion = -1, -1
		case errors.Is(err, coord.ErrNoNode):
			// Kafka's controller writes the state after the assignment; a
			// crash in between leaves none. Lead with the preferred replica.
			p.Leader, p.ISR = p.Replicas[0], p.Replicas
			c.logger.Warn("partition state missing; using the preferred replica as leader", "topic", name, "partition", p.Partition)
		case err != nil:
			return nil, 0, fmt.Errorf("cluster: reading topic %q partition %d state: %w", name, p.Partition, err)
		default:
			if err := decodePartitionState(p, state); err != nil {
				return nil, 0, fmt.Errorf("cluster: %w", err)
			}
			p.StateVersion = stat.Version
		}
	}
	t.Config = map[string]string{}
	data, _, err = c.get(bg, topicConfigPath(name))
	switch {
	case errors.Is(err, coord.ErrNoNode):
	case err != nil:
		return nil, 0, fmt.Errorf("cluster: reading topic %q config: %w", name, err)
	default:
		if t.Config, err = decodeConfig(name, data); err != nil {
			return nil, 0, fmt.Errorf("cluster: %w", err)
		}
	}
	return t, topicStat.Version, nil
}

// openLogs opens or creates the logs of the partitions this broker hosts.
func (c *Cluster) openLogs(t *Topic) (*topicEntry, error) {
	cfg, err := c.effectiveConfig(t.Config)
	if err != nil {
		return nil, fmt.Errorf("cluster: topic %q: %w", t.Name, err)
	}
	entry := &topicEntry{topic: t, logs: make([]*log.Log, len(t.Partitions))}
	for _, p := range t.Partitions {
		if !containsBroker(p.Replicas, c.cfg.BrokerID) {
			continue
		}
		l, err := c.openLog(t.Name, p.Partition, cfg)
		if err != nil {
			return nil, err
		}
		entry.logs[p.Partition] = l
	}
	return entry, nil
}

func (c *Cluster) openLog(topic string, partition int32, cfg log.Config) (*log.Log, error) {
	if l, ok := c.logs.Get(topic, partition); ok {
		if err := l.SetConfig(cfg); err != nil {
			return nil, fmt.Errorf("cluster: applying the config of topic %q partition %d: %w", topic, partition, err)
		}
		return l, nil
	}
	l, err := c.logs.Create(topic, partition, cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: opening the log of topic %q partition %d: %w", topic, partition, err)
	}
	return l, nil
}

// Close deregisters the broker and stops the broker watch. It does not close
// the store or the log manager, which the caller owns.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.signalModelLocked()
	reg := c.registration
	bg := c.background
	c.mu.Unlock()
	var errs []error
	if bg != nil {
		bg.stop()
	}
	if reg != nil {
		errs = append(errs, reg.stop())
	}
	return errors.Join(errs...)
}

// Settings returns the configuration the cluster was opened with.
func (c *Cluster) Settings() Config { return c.cfg }

// ClusterID is the cluster's ID (from /cluster/id).
func (c *Cluster) ClusterID() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.clusterID
}

// BrokerID is this broker's ID.
func (c *Cluster) BrokerID() int32 { return c.cfg.BrokerID }

// ControllerID is the ID of the controller: this broker with one broker, the
// broker named in /controller with several (-1 while there is none).
func (c *Cluster) ControllerID() int32 { return c.controllerID.Load() }

// Topics returns every topic, sorted by name.
func (c *Cluster) Topics() []*Topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Topic, 0, len(c.topics))
	for _, e := range c.topics {
		out = append(out, e.topic)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Topic returns a topic by name.
func (c *Cluster) Topic(name string) (*Topic, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.topics[name]
	if !ok {
		return nil, false
	}
	return e.topic, true
}

// TopicByID returns a topic by its ID.
func (c *Cluster) TopicByID(id [16]byte) (*Topic, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	return e.topic, true
}

// Partition returns a partition's state and, when this broker hosts it, its
// log (nil otherwise). ok is false for an unknown topic or partition.
func (c *Cluster) Partition(topic string, partition int32) (state *PartitionState, l *log.Log, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, found := c.topics[topic]
	if !found || partition < 0 || int(partition) >= len(e.topic.Partitions) {
		return nil, nil, false
	}
	return e.topic.Partitions[partition], e.logs[partition], true
}

// Brokers returns the live brokers, sorted by ID.
func (c *Cluster) Brokers() []BrokerInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]BrokerInfo(nil), c.brokers...)
}

// GroupCoordinator returns the live broker that coordinates consumer group
// id, and the generation of the live set it was chosen from (which changes
// whenever a broker comes or goes). Every broker chooses alike from its view
// of /brokers/ids: the broker with the highest hash of (group, broker ID),
// so a broker's death moves only the groups it coordinated, and they come
// back when it returns. ok is false while no broker is known.
func (c *Cluster) GroupCoordinator(id string) (coordinator BrokerInfo, generation uint64, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	coordinator, ok = groupCoordinator(id, c.brokers)
	return coordinator, c.brokerGen, ok
}

// groupCoordinator is the broker of brokers with the highest hash of (group
// id, broker ID): rendezvous hashing.
func groupCoordinator(id string, brokers []BrokerInfo) (coordinator BrokerInfo, ok bool) {
	var best uint64
	for _, b := range brokers {
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0, byte(b.ID >> 24), byte(b.ID >> 16), byte(b.ID >> 8), byte(b.ID)})
		if score := mix64(h.Sum64()); !ok || score > best {
			coordinator, best, ok = b, score, true
		}
	}
	return coordinator, ok
}

// mix64 scrambles FNV's output (splitmix64's finaliser): FNV-1a of keys that
// differ only in their last bytes differs mostly in the low bits, which
// would let one broker win nearly every group.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// Broker returns one live broker.
func (c *Cluster) Broker(id int32) (BrokerInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, b := range c.brokers {
		if b.ID == id {
			return b, true
		}
	}
	return BrokerInfo{}, false
}

func containsBroker(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
