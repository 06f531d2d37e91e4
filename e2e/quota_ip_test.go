package e2e

import (
	"encoding/binary"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

// TestQuotaIPConnectionRate: an IP quota set with `millrace quota set --ip`
// on a broker process paces the connections from that address (KIP-612):
// beyond the rate each connection waits, and every one is served, none
// refused; another loopback address, under no quota, is not held. Bounds
// are generous: ten connections at 5 a second, after the burst is spent,
// take about 2 s; the test asks for more than 1.2 s.
func TestQuotaIPConnectionRate(t *testing.T) {
	t.Parallel()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBroker(t, "--metrics-listen", metricsAddr)
	metrics := "http://" + metricsAddr + "/metrics"
	const (
		throttled = `millrace_broker_connections_throttled_total{limit="connection_creation_rate"}`
		refused   = `millrace_broker_connections_refused_total{limit="max.connections.per.ip"}`
	)
	quota := func(args ...string) string {
		return run(t, time.Minute, "", millraceBin, append(append([]string{"quota"}, args...), "-b", b.addr)...)
	}
	quota("set", "--ip", "127.0.0.1", "connection_creation_rate=5")
	if out := quota("list", "--ip", "127.0.0.1"); !strings.Contains(out, "{ip=127.0.0.1}") || !strings.Contains(out, "connection_creation_rate=5") {
		t.Fatalf("quota list --ip 127.0.0.1:\n%s", out)
	}

	// served opens a connection from local, sends ApiVersions v0 and reads
	// the whole answer: a connection closed instead fails the test.
	served := func(local string) {
		t.Helper()
		c := dialFrom(t, local, b.addr)
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(frame(requestHeader(18, 0, "ip-quota"))); err != nil {
			t.Fatalf("a connection from %s: writing ApiVersions: %v", local, err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatalf("a connection from %s was not served: %v", local, err)
		}
		if _, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatalf("a connection from %s: reading ApiVersions' answer: %v", local, err)
		}
	}

	// The broker applies the quota once it has followed the change; the
	// first connections spend the burst of one second's worth.
	waitfor.Until(t, 30*time.Second, "a connection from 127.0.0.1 held by its quota", func() bool {
		served("127.0.0.1")
		return scrapeCounterOr(t, metrics, throttled) > 0
	})
	before := scrapeCounterOr(t, metrics, throttled)
	start := time.Now()
	for range 10 {
		served("127.0.0.1")
	}
	elapsed := time.Since(start)
	if elapsed < 1200*time.Millisecond || elapsed > 30*time.Second {
		t.Errorf("10 connections from 127.0.0.1 at 5 a second served in %v, want about 2s (at least 1.2s)", elapsed)
	}
	if n := scrapeCounterOr(t, metrics, throttled) - before; n < 8 {
		t.Errorf("%v of 10 connections throttled, want at least 8", n)
	}
	if n := scrapeCounterOr(t, metrics, refused); n != 0 {
		t.Errorf("%v connections refused: a connection rate slows, it does not refuse", n)
	}

	// Another address is under no quota: its connections are not held.
	before = scrapeCounterOr(t, metrics, throttled)
	for range 10 {
		served("127.0.0.2")
	}
	if n := scrapeCounterOr(t, metrics, throttled) - before; n != 0 {
		t.Errorf("%v connections from 127.0.0.2, which has no quota, were throttled", n)
	}

	// Kafka's rules, told before anything is sent: an ip holds only
	// connection_creation_rate, and is an address.
	for _, args := range [][]string{
		{"--ip", "127.0.0.1", "producer_byte_rate=1"},
		{"--ip", "localhost", "connection_creation_rate=1"},
		{"--user", "alice", "connection_creation_rate=1"},
		{"--ip-default", "--client-default", "connection_creation_rate=1"},
	} {
		if _, errOut, err := runErr(time.Minute, "", millraceBin, append(append([]string{"quota", "set"}, args...), "-b", b.addr)...); err == nil {
			t.Errorf("quota set %v was accepted", args)
		} else if errOut == "" {
			t.Errorf("quota set %v failed without saying why", args)
		}
	}

	quota("delete", "--ip", "127.0.0.1", "connection_creation_rate")
	if out := quota("list"); strings.Contains(out, "ip=") {
		t.Errorf("after delete:\n%s", out)
	}
}
