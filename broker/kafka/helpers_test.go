package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/broker/group"
	"millrace/broker/log"
)

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testBroker is an in-process broker on the real stack: embedded
// coordination store and log manager in a temporary directory.
type testBroker struct {
	t       testing.TB
	dir     string
	broker  *Broker
	cluster *cluster.Cluster
	logs    *log.Manager
	groups  *group.Coordinator
	store   coord.Store
	server  *embedded.Server
	addr    string
	logOut  *syncBuffer
	served  chan error
	stopped bool
}

type testOptions struct {
	dir     string
	cfg     func(*Config)
	cluster func(*cluster.Config)
	group   group.Config
	metrics prometheus.Registerer
	deps    func(*Deps)
}

func withConfig(f func(*Config)) func(*testOptions) {
	return func(o *testOptions) { o.cfg = f }
}

// withClusterConfig adjusts the metadata layer's config.
func withClusterConfig(f func(*cluster.Config)) func(*testOptions) {
	return func(o *testOptions) { o.cluster = f }
}

func withDir(dir string) func(*testOptions) {
	return func(o *testOptions) { o.dir = dir }
}

// withMetrics registers the broker's metrics with reg.
func withMetrics(reg prometheus.Registerer) func(*testOptions) {
	return func(o *testOptions) { o.metrics = reg }
}

// withDeps adjusts the broker's Deps (e.g. tiered storage's) before New.
func withDeps(f func(*Deps)) func(*testOptions) {
	return func(o *testOptions) { o.deps = f }
}

func withGroupConfig(cfg group.Config) func(*testOptions) {
	return func(o *testOptions) { o.group = cfg }
}

func startBroker(t testing.TB, opts ...func(*testOptions)) *testBroker {
	t.Helper()
	o := testOptions{group: group.DefaultConfig()}
	o.group.InitialRebalanceDelay = -1
	for _, opt := range opts {
		opt(&o)
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	tb := &testBroker{t: t, dir: o.dir, logOut: &syncBuffer{}, served: make(chan error, 1)}
	logger := slog.New(slog.NewTextHandler(tb.logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))

	var err error
	if tb.server, err = embedded.Open(o.dir+"/coord", logger); err != nil {
		t.Fatal(err)
	}
	if tb.store, err = tb.server.Session(); err != nil {
		t.Fatal(err)
	}
	if tb.logs, err = log.OpenManager(o.dir+"/data", log.DefaultConfig(), logger); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listener = "127.0.0.1:0"
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	ccfg := cluster.Config{BrokerID: cfg.BrokerID, DefaultPartitions: cfg.NumPartitions, DefaultReplicationFactor: cfg.DefaultReplicationFactor}
	if o.cluster != nil {
		o.cluster(&ccfg)
	}
	if tb.cluster, err = cluster.Open(ccfg, tb.store, tb.logs, log.DefaultConfig(), logger); err != nil {
		t.Fatal(err)
	}
	o.group.PartitionExists = func(topic string, partition int32) bool {
		_, _, ok := tb.cluster.Partition(topic, partition)
		return ok
	}
	tb.groups = group.New(tb.store, o.group, logger)
	deps := Deps{Cluster: tb.cluster, Groups: tb.groups, Logs: tb.logs, Store: tb.store, Metrics: o.metrics}
	if o.deps != nil {
		o.deps(&deps)
	}
	if tb.broker, err = New(cfg, deps, logger); err != nil {
		t.Fatal(err)
	}
	if err := tb.broker.Listen(); err != nil {
		t.Fatal(err)
	}
	tb.addr = tb.broker.Addr().String()
	go func() { tb.served <- tb.broker.Serve(context.Background()) }()
	t.Cleanup(tb.stop)
	return tb
}

// stop shuts everything down in dependency order, failing on errors.
func (tb *testBroker) stop() {
	if tb.stopped {
		return
	}
	tb.stopped = true
	t := tb.t
	if err := tb.broker.Close(); err != nil {
		t.Errorf("broker close: %v", err)
	}
	if err := <-tb.served; err != nil {
		t.Errorf("serve: %v", err)
	}
	tb.groups.Close()
	if err := tb.cluster.Close(); err != nil {
		t.Errorf("cluster close: %v", err)
	}
	if err := tb.logs.Close(); err != nil {
		t.Errorf("logs close: %v", err)
	}
	tb.store.Close()
	if err := tb.server.Close(); err != nil {
		t.Errorf("coord close: %v", err)
	}
}

// rawClient is a hand-driven client connection for framing tests.
type rawClient struct {
	t  testing.TB
	nc net.Conn
}

func dial(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc}
}

// frame encodes a request with kmsg, header included.
func frame(req kmsg.Request, correlationID int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("test-client")).AppendRequest(nil, req, correlationID)
}

func (c *rawClient) send(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame: the correlation ID and what follows it.
func (c *rawClient) readFrame() (int32, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// roundTrip sends req and decodes its response (header v0 for ApiVersions,
// v1 for other flexible versions).
func (c *rawClient) roundTrip(req kmsg.Request, correlationID int32) kmsg.Response {
	c.t.Helper()
	c.send(frame(req, correlationID))
	return c.readResponse(req, correlationID)
}

func (c *rawClient) readResponse(req kmsg.Request, correlationID int32) kmsg.Response {
	c.t.Helper()
	id, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("reading the response to correlation id %d: %v", correlationID, err)
	}
	if id != correlationID {
		c.t.Fatalf("correlation id %d, want %d", id, correlationID)
	}
	resp := req.ResponseKind()
	if req.IsFlexible() && req.Key() != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("flexible response header without an empty tag section")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding %T: %v", resp, err)
	}
	return resp
}

// expectClosed asserts the broker closes the connection: a read ends with
// EOF or a reset, not with a response or a timeout.
func (c *rawClient) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	for {
		n, err := c.nc.Read(buf)
		if n > 0 {
			c.t.Fatalf("got %d bytes from a connection that should be closed", n)
		}
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("connection still open after 10s")
		}
		return // EOF or connection reset
	}
}

// apiVersionsOK asserts a working connection by an ApiVersions round trip.
func (c *rawClient) apiVersionsOK(correlationID int32) {
	c.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "millrace-test", "1"
	resp := c.roundTrip(req, correlationID).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		c.t.Fatalf("ApiVersions: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}
