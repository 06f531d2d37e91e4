package syslog

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // a piece of the error; "" for none
	}{
		{name: "udp only", cfg: Config{UDP: ":514", UDPReadBuffer: 4 << 20}},
		{name: "all", cfg: Config{UDP: ":514", TCP: ":514", TLS: ":6514", TLSCert: "c.pem", TLSClientCA: "ca.pem", TimeZone: "Europe/Berlin"}},
		{name: "nothing to listen on", cfg: Config{}, want: "at least one of udp, tcp and tls"},
		{name: "tls without cert", cfg: Config{TLS: ":6514"}, want: "tls needs tls_cert"},
		{name: "cert without tls", cfg: Config{TCP: ":514", TLSCert: "c.pem"}, want: "tls (the address to listen on) is not"},
		{name: "tiny messages", cfg: Config{UDP: ":514", MaxMessageBytes: 100}, want: "RFC 5426"},
		{name: "huge messages", cfg: Config{UDP: ":514", MaxMessageBytes: 1 << 20}, want: "between 480"},
		{name: "negative", cfg: Config{UDP: ":514", MaxConnections: -1, IdleTimeout: -time.Second, UDPQueue: -1}, want: "udp_queue is -1"},
		{name: "negative buffer", cfg: Config{UDP: ":514", UDPReadBuffer: -1}, want: "udp_read_buffer is -1"},
		{name: "zone", cfg: Config{UDP: ":514", TimeZone: "Mars/Olympus"}, want: "not a zone name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.cfg.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseUDPSNMP(t *testing.T) {
	t.Parallel()
	// Linux 6.1's /proc/net/snmp, shortened.
	const snmp = `Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 123
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 1000 3 42 900 40 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
`
	got, ok := parseUDPSNMP([]byte(snmp))
	if !ok || got != (udpSNMP{inErrors: 42, rcvbufErrors: 40}) {
		t.Errorf("parseUDPSNMP = %+v, %v", got, ok)
	}
	if _, ok := parseUDPSNMP([]byte("Ip: x\nIp: 1\n")); ok {
		t.Error("a file without Udp lines parsed")
	}
}

// Shutdown hands the queued datagrams to the producer; when its context
// ends first, it abandons those still waiting and returns.
func TestShutdown(t *testing.T) {
	t.Parallel()
	p := newFakeProducer()
	p.gate = make(chan struct{})
	s, err := New(Config{UDP: "127.0.0.1:0", TCP: "127.0.0.1:0"}, p, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := dial(t, "udp", s.UDPAddr())
	tcp := dial(t, "tcp", s.TCPAddr())
	for range 2 {
		if _, err := io.WriteString(c, "<13>queued"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both datagrams read", func() bool { return counter(s.metrics.received.WithLabelValues("udp")) == 2 })
	p.gate <- struct{}{} // the first is produced, the second waits
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want the context's error", err)
	}
	if got := counter(s.metrics.produced) + counter(s.metrics.produceErrors); got != 2 {
		t.Errorf("produced + errors = %v, want 2", got)
	}
	if _, err := tcp.Read(make([]byte, 1)); err == nil {
		t.Error("a connection is open after Shutdown")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("a second Shutdown = %v", err)
	}
}
