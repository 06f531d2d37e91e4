// Package kafka is millrace's Kafka wire-protocol server: the listener, the
// per-connection request loop (framing, header parsing, pipelining with
// in-order responses) and one file per API handler, named by API key as in
// franz-go's kfake (03_metadata.go, 18_api_versions.go, ...). Requests and
// responses are encoded by franz-go's kmsg.
//
// The handlers delegate: topic metadata to broker/cluster, consumer groups to
// broker/group, partition data to broker/log.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/broker/group"
	"millrace/broker/interbroker"
	"millrace/broker/log"
	"millrace/broker/replication"
	"millrace/broker/tier"
	"millrace/broker/txn"
	"millrace/internal/clientauth"
)

// Deps are the broker's collaborators. The caller creates them, and closes
// them after Broker.Close.
type Deps struct {
	// Cluster is the metadata model. Required.
	Cluster *cluster.Cluster
	// Groups is the group coordinator. Required.
	Groups *group.Coordinator
	// Logs is the partition log manager (for the data-path handlers).
	Logs *log.Manager
	// Store is the coordination store session (producer ID blocks, ...).
	Store coord.Store
	// Metrics, when set, receives the wire server's Prometheus metrics.
	Metrics prometheus.Registerer
	// HighWatermarkCheckpoint is the path of the high-watermark checkpoint
	// (broker/replication/checkpoint.go), kept in multi-broker mode; empty keeps
	// none.
	HighWatermarkCheckpoint string
	// RemoteDeleteRecords, when set, moves a tiered partition's remote log
	// start offset up to offset for DeleteRecords and returns it (-1: the
	// partition has nothing remote); broker/tier's Manager.DeleteRecords.
	RemoteDeleteRecords func(topic string, partition int32, offset int64) (int64, error)
	// RemoteIndex, when set, is the partitions' remote state (tiered
	// storage, broker/tier): a consumer's Fetch below the local log start
	// is served from remote storage through RemoteReads (fetch_remote.go),
	// and ListOffsets answers earliest with the remote start. Nil: no
	// topic is tiered, and both behave as without tiered storage.
	RemoteIndex tier.RemoteIndex
	// RemoteReads runs the remote reads (broker/tier's delayed remote
	// fetch); required with RemoteIndex.
	RemoteReads *tier.ReadPool
	// RemoteRebuild, when set, restarts the log of a tiered partition
	// this broker follows at its leader's local log start, from the
	// remote state (broker/interbroker/tiered.go); broker/tier's
	// Manager.RebuildReplica.
	RemoteRebuild interbroker.RemoteRebuild
	// RemoteLogDirTags, when set, returns the tagged fields DescribeLogDirs
	// (v2+) adds to a partition of a tiered topic: broker/tier's summary
	// of its remote part (broker/tier/summary.go); empty when none.
	RemoteLogDirTags func(topic string, partition int32) kmsg.Tags
}

// Broker serves the Kafka protocol on its listeners (listeners.go).
type Broker struct {
	cfg     Config
	cluster *cluster.Cluster
	groups  *group.Coordinator
	logs    *log.Manager
	store   coord.Store
	logger  *slog.Logger
	metrics *brokerMetrics
	// hwCheckpoint is Deps.HighWatermarkCheckpoint, for the replica
	// manager.
	hwCheckpoint string
	// remoteDeleteRecords is Deps.RemoteDeleteRecords.
	remoteDeleteRecords func(topic string, partition int32, offset int64) (int64, error)
	// remoteIndex and remoteReads are Deps.RemoteIndex and
	// Deps.RemoteReads (fetch_remote.go); nil when nothing is tiered.
	remoteIndex tier.RemoteIndex
	remoteReads *tier.ReadPool
	// remoteRebuild is Deps.RemoteRebuild.
	remoteRebuild interbroker.RemoteRebuild
	// remoteLogDirTags is Deps.RemoteLogDirTags.
	remoteLogDirTags func(topic string, partition int32) kmsg.Tags
	// interBroker is the name of the inter-broker listener, and tls the
	// TLS settings of the listeners and inter-broker clients (tls.go).
	interBroker string
	tls         tlsConfigs
	// admission and budget are the connection and request byte limits
	// (conn_limits.go).
	admission admission
	budget    *requestBudget
	// produceRefusals rate-limits the log lines about refused produces
	// (produce_refusals.go).
	produceRefusals refusalLog
	// quotas enforces client quotas (throttle.go); nil when there are
	// none, so the request path pays one nil check.
	quotas *quotaEnforcer
	// leaderReplication is leader.replication.throttled.rate
	// (replication_throttle.go).
	leaderReplication *byteRate
	// followerReplication is follower.replication.throttled.rate, held by
	// the replica fetchers (broker/interbroker/throttle.go).
	followerReplication *byteRate

	// The broker's parts: broker-lifetime state the handler files need
	// beyond the Deps, opened by openParts in the order it gives and closed
	// by closeParts in reverse. Set in New, read-only afterwards.
	authorizer    *authorizer           // ACL cache (authorize.go); nil when authorization is off
	sasl          *saslComponent        // SCRAM credentials (sasl.go); nil without a store: SASL fails closed
	fetchSessions *fetchSessionCache    // KIP-227 fetch sessions (fetch_sessions.go)
	connIDs       atomic.Uint64         // the last connection ID given (conn.id)
	producerIDs   *producerIDs          // producer ID blocks (producer_ids.go)
	replicas      *replication.Manager  // leads and follows partitions, long-poll wake-ups (broker/replication)
	brokers       *interbroker.Client   // clients to the other brokers (broker/interbroker)
	fetchers      *interbroker.Fetchers // replica fetchers, one per leader (broker/interbroker)
	txn           *txn.Coordinator      // transaction coordinator (broker/txn); nil without a store

	// ctx is the parent of every connection's context; cancel ends them all.
	ctx    context.Context
	cancel context.CancelFunc

	serveWG sync.WaitGroup // Serve calls in progress
	connWG  sync.WaitGroup // connection goroutines

	mu          sync.Mutex       // guards the following
	listeners   []*boundListener // set by Listen
	conns       map[*conn]struct{}
	closed      bool
	closeErr    error
	partsClosed bool
}

// New builds a broker; Listen binds it and Serve runs it.
func New(cfg Config, deps Deps, logger *slog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: invalid config: %w", err)
	}
	if deps.Cluster == nil || deps.Groups == nil {
		return nil, errors.New("kafka: New needs a cluster and a group coordinator")
	}
	if (deps.RemoteIndex == nil) != (deps.RemoteReads == nil) {
		return nil, errors.New("kafka: tiered storage needs both the remote index and the remote read pool, or neither")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	specs, err := cfg.listenerSpecs()
	if err != nil {
		return nil, fmt.Errorf("kafka: invalid config: %w", err)
	}
	interBroker, err := cfg.interBrokerListener(specs)
	if err != nil {
		return nil, fmt.Errorf("kafka: invalid config: %w", err)
	}
	serving := false
	for _, s := range specs {
		serving = serving || s.protocol.usesTLS()
	}
	tlsCfg, err := loadTLS(cfg, serving)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg:                 cfg,
		cluster:             deps.Cluster,
		groups:              deps.Groups,
		logs:                deps.Logs,
		store:               deps.Store,
		hwCheckpoint:        deps.HighWatermarkCheckpoint,
		remoteDeleteRecords: deps.RemoteDeleteRecords,
		remoteIndex:         deps.RemoteIndex,
		remoteReads:         deps.RemoteReads,
		remoteRebuild:       deps.RemoteRebuild,
		remoteLogDirTags:    deps.RemoteLogDirTags,
		interBroker:         interBroker.name,
		tls:                 tlsCfg,
		logger:              logger.With("component", "kafka"),
		ctx:                 ctx,
		cancel:              cancel,
		conns:               make(map[*conn]struct{}),
		budget:              newRequestBudget(cfg.QueuedMaxRequestBytes),
	}
	b.leaderReplication = newByteRate(cfg.LeaderReplicationThrottledRate)
	b.followerReplication = newByteRate(cfg.FollowerReplicationThrottledRate)
	b.cluster.OnBrokerSettings(b.replicationRates)
	b.replicationRates()
	metrics, err := newBrokerMetrics(deps.Metrics, deps.Cluster, deps.Logs, b)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kafka: registering metrics: %w", err)
	}
	b.metrics = metrics
	if b.quotas, err = newQuotaEnforcer(cfg, len(specs), interBroker.name, deps.Metrics); err != nil {
		cancel()
		return nil, fmt.Errorf("kafka: registering quota metrics: %w", err)
	}
	if err := b.openParts(); err != nil {
		cancel()
		b.closeParts()
		return nil, fmt.Errorf("kafka: %w", err)
	}
	b.startParts()
	return b, nil
}

// openParts opens the broker's parts, each after the parts it uses:
//
//  1. authorizer: the ACL cache, read from the coordination store.
//  2. sasl: the credential cache, read from the coordination store.
//  3. fetchSessions: needs nothing.
//  4. producerIDs: the producer ID blocks, from the coordination store.
//     The idempotent-producer state itself lives in each partition's log
//     (broker/log), which gets its bounds here.
//  5. brokers and fetchers: the clients to the other brokers, built on
//     first use, and the replica fetchers over them (broker/interbroker).
//  6. replicas: the replica manager (broker/replication), which also wakes
//     waiting Fetches; it follows leaders through fetchers.
//  7. txn: the transaction coordinator, state in the coordination store;
//     it allocates producer IDs (producerIDs) and sends markers through
//     brokers.
//
// The first three need no other part, so their order among themselves is
// free; the security caches come first because the authorizer is the part
// that can refuse the configuration (authorizer.class.name without a
// store), and refusing before the rest open leaves less to undo. Nothing
// outside New reaches a part before New returns: connections are accepted
// only by Serve.
func (b *Broker) openParts() error {
	var err error
	if b.authorizer, err = openAuthorizer(b); err != nil {
		return fmt.Errorf("opening the authorizer: %w", err)
	}
	if b.sasl, err = openSASL(b); err != nil {
		return fmt.Errorf("opening SASL: %w", err)
	}
	b.fetchSessions = newFetchSessionCache(fetchSessionLimits{
		slots:         b.cfg.FetchSessionCacheSlots,
		evictionAge:   b.cfg.FetchSessionEvictionMin,
		maxSize:       func() int { return int(b.cluster.MaxPartitionsPerRequest()) },
		perConnection: b.cfg.FetchSessionsPerConnection,
		perPrincipal:  b.cfg.FetchSessionsPerPrincipal,
		maxBytes:      b.cfg.FetchSessionCacheMaxBytes,
	})
	if b.logs != nil {
		if err := b.logs.SetProducerStateConfig(log.ProducerStateConfig{
			IDExpiration:       b.cfg.ProducerIDExpiration,
			MaxIDsPerPartition: b.cfg.MaxProducerIDsPerPartition,
		}); err != nil {
			return fmt.Errorf("producer state: %w", err)
		}
	}
	b.producerIDs = newProducerIDs(b.store, b.cfg.BrokerID)
	b.brokers = interbroker.New(interbroker.Config{
		BrokerID: b.cfg.BrokerID,
		Cluster:  b.cluster,
		Listener: b.interBroker,
		TLS:      b.tls.client,
		SASL: clientauth.SASL{
			Mechanism: b.cfg.SASL.InterBrokerMechanism, Username: b.cfg.SASL.InterBrokerUsername, PasswordFile: b.cfg.SASL.InterBrokerPasswordFile,
		},
		Logger: b.logger,
	})
	b.fetchers = b.brokers.Fetchers()
	// Installed even while unbounded: the rate is a dynamic config.
	b.fetchers.ThrottleReplication(b.followerReplication)
	if b.remoteRebuild != nil {
		b.fetchers.RebuildFromRemote(b.remoteRebuild)
	}
	b.replicas = replication.New(replication.Deps{
		Cluster:    b.cluster,
		BrokerID:   b.cfg.BrokerID,
		Checkpoint: b.hwCheckpoint,
		Follower:   b.fetchers,
		ISRChanged: b.metrics.isrChanged,
		Logger:     b.logger,
	})
	if b.store != nil {
		txnConfig := b.cfg.Txn
		txnConfig.Owner, txnConfig.NewProducerID, txnConfig.Markers = b.coordinatesTxn, b.producerIDs.nextID, txnMarkerWriter{b}
		if b.txn, err = txn.New(b.store, txnConfig, b.logger); err != nil {
			return fmt.Errorf("opening the transaction coordinator: %w", err)
		}
	}
	return nil
}

// startParts starts the parts' background work once every part is open, so
// the work may use any part from its first step; same order as openParts.
func (b *Broker) startParts() {
	if b.sasl != nil {
		b.sasl.start()
	}
	b.replicas.Start()
	if b.txn != nil {
		b.txn.Start()
	}
}

// closeParts closes the parts opened, in the reverse of openParts: the
// replica manager stops following first, then the fetchers end and the
// inter-broker clients close (each log writes its producer state snapshot
// when the logs close, after the broker), and the security caches, which
// no connection uses any more, go last. The manager's long-poll waiters
// hold nothing to release: a waiting Fetch ends with its connection's
// context, cancelled before this. Close calls it after the last connection is gone.
func (b *Broker) closeParts() {
	b.mu.Lock()
	if b.partsClosed {
		b.mu.Unlock()
		return
	}
	b.partsClosed = true
	b.mu.Unlock()
	closed := func(part string, err error) {
		if err != nil {
			b.logger.Error("closing a part of the broker", "part", part, "err", err)
		}
	}
	if b.txn != nil {
		closed("transactions", b.txn.Close())
	}
	if b.replicas != nil {
		closed("replication", b.replicas.Close())
	}
	if b.fetchers != nil {
		closed("replica fetchers", b.fetchers.Close())
	}
	if b.brokers != nil {
		closed("inter-broker clients", b.brokers.Close())
	}
	if b.sasl != nil {
		closed("sasl", b.sasl.Close())
	}
	if b.authorizer != nil {
		closed("acl", b.authorizer.Close())
	}
}

// coordinatesTxn reports whether this broker coordinates transactional ID
// id: the same choice as a group's (cluster.GroupCoordinator), and the
// generation of the live-broker view it was made from.
func (b *Broker) coordinatesTxn(id string) (bool, uint64) {
	c, gen, ok := b.cluster.GroupCoordinator(id)
	return ok && c.ID == b.cfg.BrokerID, gen
}

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// shutdown stops accepting, cancels every connection and closes them.
func (b *Broker) shutdown() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	listeners := b.listeners
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	b.cancel()
	for _, l := range listeners {
		if err := l.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			b.mu.Lock()
			b.closeErr = err
			b.mu.Unlock()
		}
	}
	for _, c := range conns {
		c.close("broker shutting down")
	}
}

// Close stops the broker: no new connections, every connection closed, every
// goroutine joined, parts closed (closeParts). The Deps stay open.
func (b *Broker) Close() error {
	b.shutdown()
	b.serveWG.Wait()
	b.connWG.Wait()
	b.closeParts()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closeErr
}

// Replicas is the broker's replica manager: the log cleaner asks it for
// each partition's bound (Manager.CleanerBound).
func (b *Broker) Replicas() *replication.Manager { return b.replicas }
