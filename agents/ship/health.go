package ship

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readyRefresh is how old what the Shipper knows about the brokers may be
// before Ready asks for a fresh contact, and the least time between two
// such requests: a readiness probe polled at any rate costs at most one
// metadata request per readyRefresh, and never a dial of its own.
const readyRefresh = 2 * time.Second

// health is what the Shipper last heard from the brokers. kgo reports every
// connection attempt (HookBrokerConnect) and every request's round trip
// (HookBrokerE2E), for produce and metadata requests alike; each report
// stores a time.
type health struct {
	lastOK    atomic.Int64 // unix nanoseconds of the last successful contact
	lastFail  atomic.Int64 // and of the last failed one
	lastProbe atomic.Int64 // when Ready last asked for a metadata refresh
	contact   chan struct{}
	once      sync.Once // closes contact at the first report

	mu      sync.Mutex // guards the following
	failErr error      // the last failure's error
}

func newHealth() *health { return &health{contact: make(chan struct{})} }

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h *health) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.report(err)
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h *health) OnBrokerE2E(_ kgo.BrokerMetadata, _ int16, e2e kgo.BrokerE2E) {
	h.report(e2e.Err())
}

func (h *health) report(err error) {
	now := time.Now().UnixNano()
	if err == nil {
		h.lastOK.Store(now)
	} else {
		h.mu.Lock()
		h.failErr = err
		h.mu.Unlock()
		h.lastFail.Store(now)
	}
	h.once.Do(func() { close(h.contact) })
}

// state is nil when the last contact succeeded, else why it failed.
func (h *health) state() error {
	if h.lastFail.Load() <= h.lastOK.Load() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Errorf("no broker reachable: %w", h.failErr)
}

// Ready reports whether the brokers answer: nil when the last contact with
// any of them (a connection opened, or a request answered) succeeded, else
// why not. It answers from what the producer already saw and never dials:
// when that is older than readyRefresh, or was a failure, it asks the client
// for a metadata refresh (at most one per readyRefresh), whose outcome the
// next call reports. Before the first contact it waits for one until ctx
// ends.
func (s *Shipper) Ready(ctx context.Context) error {
	cl := s.client.Load()
	if cl == nil {
		return s.notRunningErr()
	}
	h := s.health
	now := time.Now()
	if last := max(h.lastOK.Load(), h.lastFail.Load()); now.UnixNano()-last > int64(readyRefresh) || h.state() != nil {
		if probe := h.lastProbe.Load(); now.UnixNano()-probe > int64(readyRefresh) && h.lastProbe.CompareAndSwap(probe, now.UnixNano()) {
			cl.ForceMetadataRefresh()
		}
	}
	select {
	case <-h.contact:
	case <-ctx.Done():
		return errors.New("no broker contacted yet")
	}
	return h.state()
}
