// Package broker assembles one millrace broker process: the coordination
// store, the partition logs, the metadata model, the group coordinator and
// the Kafka wire server, opened in dependency order and closed in reverse.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/broker/coord/zk"
	"millrace/broker/group"
	"millrace/broker/kafka"
	"millrace/broker/log"
	"millrace/broker/quota"
	"millrace/broker/replication"
	"millrace/broker/tier"
	"millrace/store"
)

// Broker is a running broker, with embedded coordination or, when
// Config.ZooKeeper is set, as one of several brokers sharing a ZooKeeper
// ensemble (replicated partitions, an elected controller).
type Broker struct {
	cfg    Config
	logger *slog.Logger
	// closeMu serializes Close: a Close from another goroutine ends Run's
	// Serve, and Run then closes the parts as well.
	closeMu sync.Mutex

	// The parts, in the order Open opens them, each needing only parts
	// above it; closeParts closes them in reverse.
	coord   *embedded.Server   // embedded coordination, without ZooKeeper; nil with it
	store   coord.Store        // coordination session (metadata, offsets, ACLs, producer IDs)
	logs    *log.Manager       // partition logs, each recovered as it opens
	cluster *cluster.Cluster   // metadata model: the store, and the logs of hosted partitions
	groups  *group.Coordinator // the store, and the cluster (partitions, coordinator ownership)
	quotas  *quota.Follower    // client quotas (quota.Manager), kept equal to the store's
	server  *kafka.Broker      // wire server: all of the above (kafka.Deps); opens its own parts
	// tier is tiered storage (remote.log.storage.system.enable), nil
	// without: the logs, the cluster, the replicas' high watermarks, the
	// store, and its remote object store (tierStore).
	tier      *tier.Manager
	tierStore store.Store
	// tierReads is tiered storage's read side over tierStore (cache,
	// reader pool), used by the wire server; closed after it.
	tierReads *tierReads
	// tierReady is tier once open, for the replica fetchers, which start
	// before it (tier_wiring.go).
	tierReady atomic.Pointer[tier.Manager]
	// schemaRegistry is the hosted schema registry (schema.registry.listeners),
	// nil without one: the store, and the wire server it writes through.
	schemaRegistry *schemaRegistry
}

// Open opens every part in the order of Broker's fields, then starts them:
// the wire server's Listen binds the listeners and registers this broker
// under the bound addresses, which cluster.Start needs before it syncs the
// model and stands for controller (cluster.Start says so); the logs'
// retention and flush checks and the log cleaner start last. Run serves.
func Open(cfg Config, logger *slog.Logger) (b *Broker, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b = &Broker{cfg: cfg, logger: logger}
	// The error returns set b to nil; close what was opened through a copy.
	opened := b
	defer func() {
		if err != nil {
			opened.closeParts()
		}
	}()
	if cfg.ZooKeeper != "" {
		if b.store, err = zk.Connect(cfg.ZooKeeper, cfg.Cluster.SessionTimeout, logger.With("component", "zookeeper")); err != nil {
			return nil, fmt.Errorf("broker: connecting to ZooKeeper at %s: %w", cfg.ZooKeeper, err)
		}
	} else {
		if b.coord, err = embedded.Open(filepath.Join(cfg.DataDir, "coord"), logger); err != nil {
			return nil, err
		}
		if b.store, err = b.coord.Session(); err != nil {
			return nil, err
		}
	}
	// The partition directories, and the high-watermark checkpoint beside
	// them as in Kafka's log directories.
	openLogs := log.OpenManager
	if cfg.HoldUnsyncedWrites {
		openLogs = log.OpenManagerHoldingUnsynced
	}
	if b.logs, err = openLogs(filepath.Join(cfg.DataDir, "logs"), cfg.Log, logger, log.WithMaxOpenFiles(cfg.MaxOpenLogFiles), log.WithRecoveryThreads(cfg.RecoveryThreads),
		log.WithRemoteStorageSystem(cfg.Tier.Enable)); err != nil {
		return nil, err
	}
	meta, known, err := readMeta(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if known && meta.BrokerID != cfg.Kafka.BrokerID {
		return nil, fmt.Errorf("broker: the data directory %s belongs to broker %d, not %d", cfg.DataDir, meta.BrokerID, cfg.Kafka.BrokerID)
	}
	ccfg := cfg.clusterConfig()
	ccfg.ExpectedClusterID = meta.ClusterID
	if b.cluster, err = cluster.Open(ccfg, b.store, b.logs, cfg.Log, logger); err != nil {
		return nil, err
	}
	if !known {
		if err = writeMeta(cfg.DataDir, dataMeta{BrokerID: cfg.Kafka.BrokerID, ClusterID: b.cluster.ClusterID()}); err != nil {
			return nil, fmt.Errorf("broker: writing %s: %w", metaFile, err)
		}
	}
	// A broker restarted right after a crash finds its ID still held by its
	// previous run's session: wait for it to expire before binding the
	// listener and registering (cluster.Register says why).
	if err = b.cluster.AwaitBrokerID(); err != nil {
		return nil, err
	}
	gcfg := cfg.Group
	// One producer.id.expiration.ms for the logs and the transactional
	// offsets index.
	gcfg.ProducerIDExpiration = cfg.Kafka.ProducerIDExpiration
	gcfg.PartitionExists = func(topic string, partition int32) bool {
		_, _, ok := b.cluster.Partition(topic, partition)
		return ok
	}
	gcfg.Owner = func(id string) (bool, uint64) {
		c, gen, ok := b.cluster.GroupCoordinator(id)
		return ok && c.ID == cfg.Kafka.BrokerID, gen
	}
	b.groups = group.New(b.store, gcfg, logger)
	// Client quotas: loaded and followed from the store before the wire
	// server asks them (broker/quota).
	manager := quota.NewManager(0)
	b.quotas = quota.NewFollower(b.store, manager, logger)
	b.quotas.Start()
	cfg.Kafka.Quotas = manager
	deps := kafka.Deps{Cluster: b.cluster, Groups: b.groups, Logs: b.logs, Store: b.store, Metrics: cfg.Metrics,
		HighWatermarkCheckpoint: filepath.Join(cfg.DataDir, "logs", replication.HighWatermarkCheckpointFile)}
	// Set below, once the wire server's replicas exist; requests are
	// served only after Open returns.
	var tierManager *tier.Manager
	if cfg.Tier.Enable {
		if err = b.openTierReads(); err != nil {
			return nil, err
		}
		deps.RemoteIndex, deps.RemoteReads = b.tierReads.Index, b.tierReads.Pool
		cl := b.cluster
		deps.RemoteDeleteRecords = func(topic string, partition int32, offset int64) (int64, error) {
			p, ok := tierPartition(cl, cfg.Kafka.BrokerID, topic, partition, -1)
			if !ok {
				return -1, nil
			}
			return tierManager.DeleteRecords(context.Background(), p, offset)
		}
		deps.RemoteRebuild = b.rebuildReplica
		deps.RemoteLogDirTags = func(topic string, partition int32) kmsg.Tags {
			var tags kmsg.Tags
			if r, ok := tierManager.Remote(topic, partition); ok {
				tags.Set(tier.DescribeLogDirsTag, r.Encode())
			}
			return tags
		}
	}
	if b.server, err = kafka.New(cfg.Kafka, deps, logger); err != nil {
		return nil, err
	}
	if err = b.server.Listen(); err != nil {
		return nil, err
	}
	if err = b.cluster.Start(); err != nil {
		return nil, err
	}
	// Retention deletes an expired active segment only below the high
	// watermark, the same bound the cleaner stays under.
	b.logs.SetRetentionBound(b.server.Replicas().CleanerBound)
	b.logs.Start(cfg.RetentionCheckInterval)
	if err = b.logs.StartCleaner(cfg.Cleaner, b.server.Replicas().CleanerBound, cfg.Metrics); err != nil {
		return nil, err
	}
	if cfg.Tier.Enable {
		if tierManager, err = b.openTier(); err != nil {
			return nil, err
		}
	}
	if cfg.SchemaRegistry.Listeners != "" {
		if err = b.openSchemaRegistry(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Addr is the address the inter-broker listener is bound to.
func (b *Broker) Addr() net.Addr { return b.server.Addr() }

// ListenerAddr is the address the named listener is bound to, nil when
// there is no such listener.
func (b *Broker) ListenerAddr(name string) net.Addr { return b.server.ListenerAddr(name) }

// Run serves until ctx is done, then shuts down cleanly: connections closed,
// logs flushed with their clean-shutdown markers, the store closed.
func (b *Broker) Run(ctx context.Context) error {
	b.logger.Info("broker serving", "addr", b.server.Addr().String(), "id", b.cfg.Kafka.BrokerID, "data", b.cfg.DataDir)
	if err := errors.Join(b.server.Serve(ctx), b.Close()); err != nil {
		return err
	}
	b.logger.Info("broker stopped cleanly")
	return nil
}

// Close stops serving and closes every part; safe to call after Run and
// while Run returns (Run closes the parts too once Serve ends, which a
// Close from another goroutine makes it do): the first call closes them,
// the others find nothing left to close.
func (b *Broker) Close() error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if err := b.closeParts(); err != nil {
		return fmt.Errorf("broker: shutdown: %w", err)
	}
	return nil
}

// closeParts closes what Open opened, in the reverse of Open's order, so
// each part closes while the parts it uses are still open: the schema
// registry first (its election gives the primary node up in the store),
// then the wire server (no request or replication fetcher touches anything
// after it), then tiered storage (its round cancelled and waited for), then
// groups, the cluster (deregistering), the logs (flushed, with their
// clean-shutdown markers), and the store last. Parts never opened are nil
// and skipped.
func (b *Broker) closeParts() error {
	var errs []error
	if b.schemaRegistry != nil {
		errs = append(errs, b.schemaRegistry.close())
		b.schemaRegistry = nil
	}
	if b.server != nil {
		errs = append(errs, b.server.Close())
		b.server = nil
	}
	if b.tierReads != nil {
		b.tierReads.Close()
		b.tierReads = nil
	}
	if b.tier != nil {
		errs = append(errs, b.tier.Close())
		b.tier = nil
	}
	if b.tierStore != nil {
		errs = append(errs, b.tierStore.Close())
		b.tierStore = nil
	}
	if b.quotas != nil {
		errs = append(errs, b.quotas.Close())
		b.quotas = nil
	}
	if b.groups != nil {
		errs = append(errs, b.groups.Close())
		b.groups = nil
	}
	if b.cluster != nil {
		errs = append(errs, b.cluster.Close())
		b.cluster = nil
	}
	if b.logs != nil {
		errs = append(errs, b.logs.Close())
		b.logs = nil
	}
	if b.store != nil {
		errs = append(errs, b.store.Close())
		b.store = nil
	}
	if b.coord != nil {
		errs = append(errs, b.coord.Close())
		b.coord = nil
	}
	return errors.Join(errs...)
}
