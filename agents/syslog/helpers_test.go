package syslog

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// waitLimit bounds every wait for a condition; generous for a loaded machine.
const waitLimit = 10 * time.Second

// fakeProducer decodes what it is given and hands it to the test. With
// gate set, each Produce first waits for a token from it (or for ctx).
type fakeProducer struct {
	records chan Record
	gate    chan struct{}
}

func newFakeProducer() *fakeProducer { return &fakeProducer{records: make(chan Record, 1024)} }

func (p *fakeProducer) Produce(ctx context.Context, rec *kgo.Record, ack ship.AckFunc) {
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			ack(rec, ctx.Err())
			return
		}
	}
	var r Record
	if err := json.Unmarshal(rec.Value, &r); err != nil || rec.Topic != DefaultTopic {
		ack(rec, ship.ErrBufferFull)
		return
	}
	p.records <- r
	ack(rec, nil)
}

// next waits for the next record.
func (p *fakeProducer) next(t *testing.T) Record {
	t.Helper()
	select {
	case r := <-p.records:
		return r
	case <-time.After(waitLimit):
		t.Fatal("no record produced in time")
		return Record{}
	}
}

// startServer starts a server on loopback ports for the transports cfg
// names with "x" (cfg.UDP = "x" etc.), shut down when the test ends.
// setup runs before Start.
func startServer(t *testing.T, cfg Config, p *fakeProducer, setup ...func(*Server)) *Server {
	t.Helper()
	for _, addr := range []*string{&cfg.UDP, &cfg.TCP, &cfg.TLS} {
		if *addr != "" {
			*addr = "127.0.0.1:0"
		}
	}
	if cfg.TimeZone == "" {
		cfg.TimeZone = "UTC"
	}
	s, err := New(cfg, p, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(s)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

func dial(t *testing.T, network string, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial(network, addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
