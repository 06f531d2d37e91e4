package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPacer: GCRA at 4 connections per second lets a burst of 4 through
// at once, then spaces connections 250ms apart; an idle second refills the
// burst.
func TestPacer(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	var p pacer
	for i, tc := range []struct {
		at   time.Duration // arrival, after t0
		wait time.Duration
	}{
		{0, 0}, {0, 0}, {0, 0}, {0, 0},
		{0, 250 * time.Millisecond},
		{0, 500 * time.Millisecond},
		{100 * time.Millisecond, 650 * time.Millisecond},
		// Idle until every reservation has passed: a whole burst again.
		{3 * time.Second, 0}, {3 * time.Second, 0}, {3 * time.Second, 0}, {3 * time.Second, 0},
		{3 * time.Second, 250 * time.Millisecond},
	} {
		if got := p.reserve(t0.Add(tc.at), 4); got != tc.wait {
			t.Errorf("connection %d at +%v: wait %v, want %v", i, tc.at, got, tc.wait)
		}
	}
	var unpaced pacer
	for range 1000 {
		if got := unpaced.reserve(t0, connectionRateUnbounded); got != 0 {
			t.Fatalf("unbounded rate: wait %v, want none", got)
		}
	}
}

// TestConnectionDelayPerIP: one address over its rate waits, another
// does not, and addresses back at an idle pace are forgotten.
func TestConnectionDelayPerIP(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.MaxConnectionCreationRatePerIP = 2
	var a admission
	t0 := time.Unix(1000, 0)
	a.connectionDelayPerIP(&cfg, "10.0.0.1", t0)
	a.connectionDelayPerIP(&cfg, "10.0.0.1", t0)
	if got := a.connectionDelayPerIP(&cfg, "10.0.0.1", t0); got != 500*time.Millisecond {
		t.Errorf("third connection of 10.0.0.1 in a second: wait %v, want 500ms", got)
	}
	if got := a.connectionDelayPerIP(&cfg, "10.0.0.2", t0); got != 0 {
		t.Errorf("another address waits %v, want none", got)
	}
	for i := range 200 {
		a.connectionDelayPerIP(&cfg, fmt.Sprintf("10.1.%d.%d", i/256, i%256), t0.Add(10*time.Second))
	}
	if n := len(a.creation); n > 2*200 || a.creation["10.0.0.1"] != nil {
		t.Errorf("%d addresses held, 10.0.0.1 still paced: idle addresses must be swept", n)
	}
}

// TestConnectionCreationRateDelaysAccepts: over max.connection.creation.rate
// (per listener) or its per-IP counterpart, connections are served late,
// not refused (KIP-612): at 5 per second, the 8th of a burst is served
// 600ms after the first at the earliest.
func TestConnectionCreationRateDelaysAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		limit string
	}{
		{"per listener", func(c *Config) { c.MaxConnectionCreationRate = 5 }, "max.connection.creation.rate"},
		{"per ip", func(c *Config) { c.MaxConnectionCreationRatePerIP = 5 }, "millrace.max.connection.creation.rate.per.ip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tb := startBroker(t, withConfig(tc.cfg), withMetrics(prometheus.NewPedanticRegistry()))
			start := time.Now()
			for i := range 8 {
				dial(t, tb.addr).apiVersionsOK(int32(i))
			}
			if elapsed := time.Since(start); elapsed < 600*time.Millisecond {
				t.Errorf("8 connections served in %v, want at least 600ms at 5 per second", elapsed)
			}
			if n := testutil.ToFloat64(tb.broker.metrics.throttledConns.WithLabelValues(tc.limit)); n != 3 {
				t.Errorf("connections throttled by %s: %v, want 3", tc.limit, n)
			}
			if n := testutil.ToFloat64(tb.broker.metrics.refused.WithLabelValues(tc.limit)); n != 0 {
				t.Errorf("%v connections refused: a creation rate slows, it does not refuse", n)
			}
		})
	}
}
