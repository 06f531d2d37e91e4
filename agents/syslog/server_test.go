package syslog

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"millrace/internal/certs"
)

func TestUDP(t *testing.T) {
	t.Parallel()
	p := newFakeProducer()
	s := startServer(t, Config{UDP: "x", UDPReadBuffer: 1 << 20}, p)
	c := dial(t, "udp", s.UDPAddr())
	// The first ends in LF, as rsyslog's forwarding templates do.
	for _, m := range []string{"<34>1 2003-10-11T22:14:15.003Z host su - ID47 - hello\n", "not syslog"} {
		if _, err := c.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	first, second := p.next(t), p.next(t)
	if first.App != "su" || first.Host != "host" || first.Message != "hello" || first.Transport != "udp" ||
		first.Sender != c.LocalAddr().String() || first.ReceivedAt.IsZero() || first.ParseError != "" {
		t.Errorf("first record %+v", first)
	}
	if u, err := uuid.Parse(first.EventID); err != nil || u.Version() != 7 {
		t.Errorf("event_id %q is not a UUIDv7", first.EventID)
	}
	if second.ParseError == "" || second.Raw != "not syslog" || second.EventID == first.EventID {
		t.Errorf("malformed record %+v", second)
	}
	waitFor(t, "produced counted", func() bool { return counter(s.metrics.produced) == 2 })
	if got := counter(s.metrics.messages.WithLabelValues("udp", "malformed")); got != 1 {
		t.Errorf("malformed = %v, want 1", got)
	}
}

func TestTCPBothFramings(t *testing.T) {
	t.Parallel()
	p := newFakeProducer()
	s := startServer(t, Config{TCP: "x"}, p)
	c := dial(t, "tcp", s.TCPAddr())
	const counted = "<13>1 - h a - - - two\nlines"
	if _, err := io.WriteString(c, "<13>Dec  4 17:30:00 h a: one\n"+strconv.Itoa(len(counted))+" "+counted+"<13>a: three"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite() // the last message ends with the stream
	for _, want := range []string{"one", "two\nlines", "three"} {
		if r := p.next(t); r.Message != want || r.Transport != "tcp" || r.App != "a" {
			t.Errorf("record %+v, want message %q", r, want)
		}
	}
	waitFor(t, "the connection closed", func() bool { return counter(s.metrics.closed.WithLabelValues("eof")) == 1 })
}

func TestTLSWithClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "syslog test CA")
	if err != nil {
		t.Fatal(err)
	}
	serverPEM, clientPEM := filepath.Join(dir, "server.pem"), filepath.Join(dir, "client.pem")
	if _, err := ca.Issue(serverPEM, certs.Options{CommonName: "syslog", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: certs.Server}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(clientPEM, certs.Options{CommonName: "router", Usage: certs.Client}); err != nil {
		t.Fatal(err)
	}
	p := newFakeProducer()
	s := startServer(t, Config{TLS: "x", TLSCert: serverPEM, TLSClientCA: ca.CertFile()}, p)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	pair, err := tls.LoadX509KeyPair(clientPEM, clientPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", s.TLSAddr().String(), &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "<13>1 - h a - - - secret\n"); err != nil {
		t.Fatal(err)
	}
	if r := p.next(t); r.Message != "secret" || r.Transport != "tls" {
		t.Errorf("record %+v", r)
	}

	// Without a client certificate the handshake fails and nothing is produced.
	anon, err := tls.Dial("tcp", s.TLSAddr().String(), &tls.Config{RootCAs: roots})
	if err == nil {
		defer anon.Close()
		_, _ = io.WriteString(anon, "<13>1 - h a - - - anonymous\n")
		if _, err = anon.Read(make([]byte, 1)); err == nil {
			t.Fatal("a client without a certificate was served")
		}
	}
	waitFor(t, "the anonymous connection closed", func() bool { return counter(s.metrics.closed.WithLabelValues("error")) == 1 })
	if n := len(p.records); n != 0 {
		t.Errorf("%d records produced for a client without a certificate", n)
	}
}

// A flood of datagrams while the producer is stuck fills the queue, drops
// and counts the rest, and holds no more than the queue.
func TestUDPFloodCountsDrops(t *testing.T) {
	t.Parallel()
	p := newFakeProducer()
	p.gate = make(chan struct{})
	const queue = 4
	s := startServer(t, Config{UDP: "x", UDPQueue: queue}, p)
	c := dial(t, "udp", s.UDPAddr())
	dropped := s.metrics.dropped.WithLabelValues("udp_queue_full")
	received := s.metrics.received.WithLabelValues("udp")
	// Send until the server drops: the kernel may drop some too, so the
	// count sent is not the count received.
	waitFor(t, "a datagram dropped", func() bool {
		_, _ = io.WriteString(c, "<13>flood")
		return counter(dropped) > 0
	})
	if n := len(s.queue); n > queue {
		t.Errorf("queue holds %d datagrams, more than its %d", n, queue)
	}
	close(p.gate) // the producer catches up
	waitFor(t, "every datagram accounted for", func() bool {
		return counter(s.metrics.produced)+counter(dropped) == counter(received)
	})
	// One of the datagrams the producer held when the gate opened.
	if r := p.next(t); r.Message != "flood" {
		t.Errorf("record %+v", r)
	}
}

// A client sending one endless line gets it cut at max_message_bytes, and
// the connection carries on with the next message.
func TestTCPEndlessLineIsCut(t *testing.T) {
	t.Parallel()
	p := newFakeProducer()
	const max = 1024
	s := startServer(t, Config{TCP: "x", MaxMessageBytes: max}, p)
	c := dial(t, "tcp", s.TCPAddr())
	go func() {
		// Closing c in cleanup ends this writer if the test fails first.
		_, _ = io.WriteString(c, "<13>a: "+strings.Repeat("x", 4<<20)+"\n<13>a: after\n")
	}()
	r := p.next(t)
	if !r.Truncated || len(r.Message) != max-len("<13>a: ") || r.App != "a" {
		t.Errorf("record truncated %v with a message of %d bytes", r.Truncated, len(r.Message))
	}
	if r := p.next(t); r.Message != "after" || r.Truncated {
		t.Errorf("next record %+v", r)
	}
	if got := counter(s.metrics.truncated.WithLabelValues("tcp")); got != 1 {
		t.Errorf("truncated = %v, want 1", got)
	}
}

// A silent connection and one trickling a byte at a time are both closed
// after the idle timeout.
func TestIdleConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	p := newFakeProducer()
	s := startServer(t, Config{TCP: "x", IdleTimeout: 200 * time.Millisecond}, p)
	silent := dial(t, "tcp", s.TCPAddr())
	if _, err := io.WriteString(silent, "<13>half a mess"); err != nil {
		t.Fatal(err)
	}
	trickle := dial(t, "tcp", s.TCPAddr())
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	closed := make(chan error, 1)
	go func() {
		_, err := silent.Read(make([]byte, 1))
		closed <- err
	}()
	deadline := time.After(waitLimit)
	for trickled := false; !trickled; {
		select {
		case <-ticker.C:
			// The write fails once the server closed (reset by the peer).
			if _, err := io.WriteString(trickle, "x"); err != nil {
				trickled = true
			}
		case <-deadline:
			t.Fatal("the trickling connection was not closed")
		}
	}
	// EOF, or a reset when the server closed with the unread bytes.
	if err := <-closed; err == nil {
		t.Error("the silent connection is still open")
	}
	waitFor(t, "two idle closes counted", func() bool { return counter(s.metrics.closed.WithLabelValues("idle_timeout")) == 2 })
	if n := len(p.records); n != 0 {
		t.Errorf("%d records from incomplete messages", n)
	}
}

func TestMaxConnections(t *testing.T) {
	t.Parallel()
	p := newFakeProducer()
	s := startServer(t, Config{TCP: "x", MaxConnections: 1}, p)
	first := dial(t, "tcp", s.TCPAddr())
	if _, err := io.WriteString(first, "<13>a: in\n"); err != nil {
		t.Fatal(err)
	}
	p.next(t) // the first connection is served
	second := dial(t, "tcp", s.TCPAddr())
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Error("a connection over max_connections was served")
	}
	if got := counter(s.metrics.refused); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
}
