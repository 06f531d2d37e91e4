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
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/broker/group"
	"millrace/broker/log"
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
	// (replication_checkpoint.go), kept in multi-broker mode; empty keeps
	// none.
	HighWatermarkCheckpoint string
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
	// hwCheckpoint is Deps.HighWatermarkCheckpoint.
	hwCheckpoint string
	// interBroker is the name of the inter-broker listener, and tls the
	// TLS settings of the listeners and replication connections (tls.go).
	interBroker string
	tls         tlsConfigs
	// admission and budget are the connection and request byte limits
	// (conn_limits.go).
	admission admission
	budget    *requestBudget

	// producers is the idempotent-producer state (producer_state.go). It
	// needs nothing of the components, and replication needs it, so it opens
	// before them and closes after them. Set in New, read-only afterwards.
	producers *producerStates

	// components are the handler files' broker-lifetime state; see
	// regComponent. Set in New, read-only afterwards.
	components map[string]io.Closer

	// ctx is the parent of every connection's context; cancel ends them all.
	ctx    context.Context
	cancel context.CancelFunc

	serveWG sync.WaitGroup // Serve calls in progress
	connWG  sync.WaitGroup // connection goroutines

	mu             sync.Mutex       // guards the following
	listeners      []*boundListener // set by Listen
	conns          map[*conn]struct{}
	closed         bool
	closeErr       error
	componentsDone bool
}

// New builds a broker; Listen binds it and Serve runs it.
func New(cfg Config, deps Deps, logger *slog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: invalid config: %w", err)
	}
	if deps.Cluster == nil || deps.Groups == nil {
		return nil, errors.New("kafka: New needs a cluster and a group coordinator")
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
		cfg:          cfg,
		cluster:      deps.Cluster,
		groups:       deps.Groups,
		logs:         deps.Logs,
		store:        deps.Store,
		hwCheckpoint: deps.HighWatermarkCheckpoint,
		interBroker:  interBroker.name,
		tls:          tlsCfg,
		logger:       logger.With("component", "kafka"),
		components:   make(map[string]io.Closer, len(components)),
		ctx:          ctx,
		cancel:       cancel,
		conns:        make(map[*conn]struct{}),
		budget:       newRequestBudget(cfg.QueuedMaxRequestBytes),
	}
	metrics, err := newBrokerMetrics(deps.Metrics, deps.Cluster, deps.Logs, b)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kafka: registering metrics: %w", err)
	}
	b.metrics = metrics
	b.producers = openProducerStates(b)
	names := make([]string, 0, len(components))
	for name := range components {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c, err := components[name](b)
		if err != nil {
			cancel()
			b.closeComponents()
			return nil, fmt.Errorf("kafka: opening %s: %w", name, err)
		}
		b.components[name] = c
	}
	for _, name := range names {
		if s, ok := b.components[name].(starter); ok {
			s.start()
		}
	}
	return b, nil
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
// goroutine joined, components closed. The Deps stay open.
func (b *Broker) Close() error {
	b.shutdown()
	b.serveWG.Wait()
	b.connWG.Wait()
	b.closeComponents()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closeErr
}

func (b *Broker) closeComponents() {
	b.mu.Lock()
	if b.componentsDone {
		b.mu.Unlock()
		return
	}
	b.componentsDone = true
	b.mu.Unlock()
	names := make([]string, 0, len(b.components))
	for name := range b.components {
		names = append(names, name)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, name := range names {
		if err := b.components[name].Close(); err != nil {
			b.logger.Error("closing a component", "component_name", name, "err", err)
		}
	}
	if err := b.producers.Close(); err != nil {
		b.logger.Error("closing a component", "component_name", "producer-state", "err", err)
	}
}
