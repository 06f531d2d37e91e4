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
	"strconv"
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

// Broker serves the Kafka protocol on one listener.
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
	// admission and budget are the connection and request byte limits
	// (conn_limits.go).
	admission admission
	budget    *requestBudget

	// components are the handler files' broker-lifetime state; see
	// regComponent. Set in New, read-only afterwards.
	components map[string]io.Closer

	// ctx is the parent of every connection's context; cancel ends them all.
	ctx    context.Context
	cancel context.CancelFunc

	serveWG sync.WaitGroup // Serve calls in progress
	connWG  sync.WaitGroup // connection goroutines

	mu             sync.Mutex // guards the following
	listener       net.Listener
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
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg:          cfg,
		cluster:      deps.Cluster,
		groups:       deps.Groups,
		logs:         deps.Logs,
		store:        deps.Store,
		hwCheckpoint: deps.HighWatermarkCheckpoint,
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

// Listen binds the listener and registers the broker, with its advertised
// address, in the coordination store.
func (b *Broker) Listen() error {
	host, _, err := splitListener(b.cfg.Listener)
	if err != nil {
		return err
	}
	_, port, _ := splitListener(b.cfg.Listener)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("kafka: listening on %s: %w", b.cfg.Listener, err)
	}
	advHost, advPort := host, int32(ln.Addr().(*net.TCPAddr).Port)
	if b.cfg.AdvertisedListener != "" {
		advHost, advPort, _ = splitListener(b.cfg.AdvertisedListener)
	} else if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		// A wildcard bind is not an address a client can use.
		advHost = "localhost"
	}
	b.mu.Lock()
	if b.closed || b.listener != nil {
		b.mu.Unlock()
		ln.Close()
		return errors.New("kafka: Listen after Close or twice")
	}
	b.listener = ln
	b.mu.Unlock()
	if err := b.cluster.Register(advHost, advPort, b.cfg.Rack); err != nil {
		return err
	}
	b.logger.Info("listening", "addr", ln.Addr().String(), "advertised", net.JoinHostPort(advHost, strconv.Itoa(int(advPort))), "broker_id", b.cfg.BrokerID)
	return nil
}

// Addr is the bound address (nil before Listen).
func (b *Broker) Addr() net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.listener == nil {
		return nil
	}
	return b.listener.Addr()
}

// Serve accepts connections until ctx is done or Close is called, then
// closes every connection and returns once their goroutines are gone. It
// returns nil when stopped that way (also when Close came first), and an
// error when Listen was not called or accepting fails.
func (b *Broker) Serve(ctx context.Context) error {
	b.mu.Lock()
	ln := b.listener
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	if ln == nil {
		b.mu.Unlock()
		return errors.New("kafka: Serve needs Listen first")
	}
	b.serveWG.Add(1)
	b.mu.Unlock()
	defer b.serveWG.Done()
	stop := context.AfterFunc(ctx, b.shutdown)
	defer stop()

	var err error
	for {
		nc, aerr := ln.Accept()
		if aerr != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if !closed {
				err = fmt.Errorf("kafka: accepting connections: %w", aerr)
				b.logger.Error("accept failed; stopping", "err", aerr)
			}
			break
		}
		ip := remoteIP(nc)
		if refusedBy := b.admission.admit(&b.cfg, ip); refusedBy != "" {
			b.refuse(nc, ip, refusedBy)
			continue
		}
		c := newConn(b, nc)
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			nc.Close()
			b.admission.release(ip)
			break
		}
		b.conns[c] = struct{}{}
		b.connWG.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.connWG.Done()
			c.serve()
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
			b.admission.release(ip)
		}()
	}
	b.shutdown()
	b.connWG.Wait()
	return err
}

// shutdown stops accepting, cancels every connection and closes them.
func (b *Broker) shutdown() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	ln := b.listener
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	b.cancel()
	if ln != nil {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
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
}
