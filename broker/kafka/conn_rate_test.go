package kafka

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"millrace/broker/quota"
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

// fakeRates is a table of connection_creation_rate quotas by address,
// "<default>" for the default ip entity.
type fakeRates map[string]int

func (f fakeRates) ConnectionCreationRate(ip string) (int, bool) {
	if r, ok := f[ip]; ok {
		return r, true
	}
	r, ok := f[quota.Default]
	return r, ok
}

// TestConnectionDelayPerIP: an address over its connection_creation_rate
// waits; the address's own quota wins over the default ip entity's
// (Kafka's ConnectionQuotas.connectionRateForIp); an address under no
// quota is not paced and leaves no state; a rate of 0 serves nothing; and
// addresses back at an idle pace are forgotten.
func TestConnectionDelayPerIP(t *testing.T) {
	t.Parallel()
	rates := fakeRates{"10.0.0.1": 2, quota.Default: 4}
	var a admission
	t0 := time.Unix(1000, 0)
	for i, want := range []time.Duration{0, 0, 500 * time.Millisecond, time.Second} {
		if got, serve := a.connectionDelayPerIP(rates, "10.0.0.1", t0); got != want || !serve {
			t.Errorf("connection %d of 10.0.0.1 (its own rate, 2) in a second: wait %v (served %v), want %v", i, got, serve, want)
		}
	}
	for i, want := range []time.Duration{0, 0, 0, 0, 250 * time.Millisecond} {
		if got, _ := a.connectionDelayPerIP(rates, "10.0.0.2", t0); got != want {
			t.Errorf("connection %d of 10.0.0.2 (the default's rate, 4): wait %v, want %v", i, got, want)
		}
	}
	unquoted := fakeRates{"10.0.0.1": 2}
	for range 100 {
		if got, serve := a.connectionDelayPerIP(unquoted, "10.0.0.3", t0); got != 0 || !serve {
			t.Fatalf("an address under no quota waits %v (served %v)", got, serve)
		}
	}
	if a.creation["10.0.0.3"] != nil {
		t.Error("an address under no quota is tracked")
	}
	if got, serve := a.connectionDelayPerIP(nil, "10.0.0.1", t0); got != 0 || !serve {
		t.Errorf("no quotas at all: wait %v (served %v)", got, serve)
	}
	if got, serve := a.connectionDelayPerIP(fakeRates{"10.0.0.4": 0}, "10.0.0.4", t0); got != blockedHold || serve {
		t.Errorf("rate 0: wait %v, served %v; want held %v and closed", got, serve, blockedHold)
	}
	everyone := fakeRates{quota.Default: 2}
	for i := range 200 {
		a.connectionDelayPerIP(everyone, fmt.Sprintf("10.1.%d.%d", i/256, i%256), t0.Add(10*time.Second))
	}
	if n := len(a.creation); n > 2*200 || a.creation["10.0.0.1"] != nil {
		t.Errorf("%d addresses held, 10.0.0.1 still paced: idle addresses must be swept", n)
	}
}

// TestConnectionCreationRateDelaysAccepts: over max.connection.creation.rate
// (per listener) or the connection_creation_rate quota of 127.0.0.1 (an
// ip entity, KIP-612), connections are served late, not refused: at 5 per
// second, the 8th of a burst is served 600ms after the first at the
// earliest.
func TestConnectionCreationRateDelaysAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		limit string
	}{
		{"per listener", func(c *Config) { c.MaxConnectionCreationRate = 5 }, "max.connection.creation.rate"},
		{"per ip", func(c *Config) { c.Quotas = ipQuotas(map[string]float64{"127.0.0.1": 5}) }, "connection_creation_rate"},
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

// ipQuotas is a quota manager holding connection_creation_rate quotas by
// address ("<default>" for the default ip entity).
func ipQuotas(rates map[string]float64) *quota.Manager {
	m := quota.NewManager(0)
	for ip, r := range rates {
		m.Set(quota.IPEntity(ip), map[quota.Kind]float64{quota.ConnectionCreationRate: r})
	}
	return m
}

// TestConnectionCreationRateZero: an address whose quota is 0 gets no
// service, as in Kafka, where every connection from it is over: the
// connection is held unread for a quota window and then closed.
func TestConnectionCreationRateZero(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = ipQuotas(map[string]float64{"127.0.0.1": 0}) }), withMetrics(prometheus.NewPedanticRegistry()))
	nc, err := net.Dial("tcp", tb.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	if err := nc.SetReadDeadline(start.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := nc.Read(make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("read %d bytes (%v), want the connection closed", n, err)
	}
	if held := time.Since(start); held < blockedHold/2 {
		t.Errorf("closed after %v, want held about %v", held, blockedHold)
	}
	if n := testutil.ToFloat64(tb.broker.metrics.throttledConns.WithLabelValues("connection_creation_rate")); n != 1 {
		t.Errorf("connections throttled by connection_creation_rate: %v, want 1", n)
	}
}

// TestPerIPRateSettingReplaced: the setting that stood in for ip quotas
// is refused with the quota to set instead.
func TestPerIPRateSettingReplaced(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	err := cfg.Set("millrace.max.connection.creation.rate.per.ip", "5")
	if err == nil || !strings.Contains(err.Error(), "connection_creation_rate") || !strings.Contains(err.Error(), "--ip-default") {
		t.Fatalf("setting millrace.max.connection.creation.rate.per.ip: %v, want an error naming the ip quota", err)
	}
}
