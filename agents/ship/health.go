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

// Ready reports whether records ship: nil when the last contact with any
// broker (a connection opened, or a request answered) succeeded and no
// record is failing for a reason the operator must fix (see Problems),
// else why not. It answers from what the producer already saw and never
// dials: when that is older than readyRefresh, or was a failure, it asks
// the client for a metadata refresh (at most one per readyRefresh), whose
// outcome the next call reports. Before the first contact it waits for one
// until ctx ends.
func (s *Shipper) Ready(ctx context.Context) error { return s.ReadyFor(ctx) }

// ReadyFor is Ready counting only the problems of the named topics (and
// those of every topic, such as refused credentials): an agent that shares
// the Shipper with others is not held up by their topics.
func (s *Shipper) ReadyFor(ctx context.Context, topics ...string) error {
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
	if err := h.state(); err != nil {
		return err
	}
	var errs []error
	for _, p := range s.problems.current(now, topics...) {
		errs = append(errs, errors.New(p.Message))
	}
	return errors.Join(errs...)
}

// Problems lists what keeps records from shipping that only the operator
// can fix (a missing topic, a denied write), oldest first; empty while
// every topic's records ship. A problem ends when a record to its topic is
// acknowledged, or problemExpiry after its last failure when no record to
// its topic is tried any more.
func (s *Shipper) Problems() []Problem { return s.problems.current(time.Now()) }
