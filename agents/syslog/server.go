package syslog

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
)

// Producer is what the server produces through: *ship.Shipper. Produce
// waits for room in the producer's buffer until ctx ends, so a slow broker
// slows the TCP senders down and fills the UDP queue.
type Producer interface {
	Produce(ctx context.Context, rec *kgo.Record, ack ship.AckFunc)
}

// Transports of Record.Transport.
const (
	transportUDP = "udp"
	transportTCP = "tcp"
	transportTLS = "tls"
)

// maxDatagram is the largest UDP payload (IPv4).
const maxDatagram = 65535

// acceptBackoff is the pause after a failed Accept (out of file
// descriptors), so that the loop does not spin.
const acceptBackoff = 50 * time.Millisecond

// Server receives syslog over UDP, TCP and TLS and produces a record per
// message. Start starts every goroutine; Shutdown stops and waits for them.
type Server struct {
	cfg      Config
	producer Producer
	logger   *slog.Logger
	metrics  *metrics
	loc      *time.Location
	audit    *audit.Counter // nil: no audit (audit.go)
	now      func() time.Time

	udp   net.PacketConn
	tcp   net.Listener
	tls   net.Listener
	queue chan datagram
	slots chan struct{} // one token per open connection

	// produceCtx ends only when Shutdown runs out of time: records handed
	// to the producer keep being retried until then.
	produceCtx    context.Context
	cancelProduce context.CancelFunc
	done          chan struct{} // closed by Shutdown
	wg            sync.WaitGroup

	mu       sync.Mutex // guards the following
	conns    map[net.Conn]struct{}
	shutdown bool
}

// datagram is a UDP message waiting for the producer.
type datagram struct {
	data      []byte
	truncated bool
	from      string
	at        time.Time
}

// New makes a server; nothing listens until Start. reg may be nil.
func New(cfg Config, producer Producer, reg prometheus.Registerer, logger *slog.Logger) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, producer: producer, logger: logger.With("component", "syslog", "topic", cfg.Topic),
		loc: cfg.location(), now: time.Now, done: make(chan struct{}), conns: make(map[net.Conn]struct{}),
		queue: make(chan datagram, cfg.UDPQueue), slots: make(chan struct{}, cfg.MaxConnections)}
	m, err := newMetrics(reg, s)
	if err != nil {
		return nil, fmt.Errorf("syslog: registering metrics: %w", err)
	}
	s.metrics = m
	return s, nil
}

// Start listens on the configured addresses and starts serving. On error
// nothing is left open.
func (s *Server) Start(_ context.Context) (err error) {
	defer func() {
		if err != nil {
			s.closeListeners()
		}
	}()
	if s.cfg.UDP != "" {
		if s.udp, err = net.ListenPacket("udp", s.cfg.UDP); err != nil {
			return fmt.Errorf("syslog: listening for UDP: %w", err)
		}
		if s.cfg.UDPReadBuffer > 0 {
			if err = s.udp.(*net.UDPConn).SetReadBuffer(s.cfg.UDPReadBuffer); err != nil {
				return fmt.Errorf("syslog: setting the UDP receive buffer to udp_read_buffer bytes: %w", err)
			}
		}
	}
	if s.cfg.TCP != "" {
		if s.tcp, err = net.Listen("tcp", s.cfg.TCP); err != nil {
			return fmt.Errorf("syslog: listening for TCP: %w", err)
		}
	}
	if s.cfg.TLS != "" {
		config, err := s.cfg.tlsConfig()
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", s.cfg.TLS)
		if err != nil {
			return fmt.Errorf("syslog: listening for TLS: %w", err)
		}
		s.tls = tls.NewListener(ln, config)
	}
	s.produceCtx, s.cancelProduce = context.WithCancel(context.Background())
	if s.udp != nil {
		s.wg.Add(2)
		go s.readUDP()
		go s.produceUDP()
		s.logger.Info("receiving syslog", "transport", transportUDP, "addr", s.udp.LocalAddr().String())
	}
	for _, l := range []struct {
		ln        net.Listener
		transport string
	}{{s.tcp, transportTCP}, {s.tls, transportTLS}} {
		if l.ln != nil {
			s.wg.Add(1)
			go s.accept(l.ln, l.transport)
			s.logger.Info("receiving syslog", "transport", l.transport, "addr", l.ln.Addr().String())
		}
	}
	return nil
}

// UDPAddr, TCPAddr and TLSAddr are the addresses listened on after Start,
// or nil.
func (s *Server) UDPAddr() net.Addr { return addrOf(s.udp) }

// TCPAddr is the TCP listener's address after Start, or nil.
func (s *Server) TCPAddr() net.Addr { return listenerAddr(s.tcp) }

// TLSAddr is the TLS listener's address after Start, or nil.
func (s *Server) TLSAddr() net.Addr { return listenerAddr(s.tls) }

func addrOf(c net.PacketConn) net.Addr {
	if c == nil {
		return nil
	}
	return c.LocalAddr()
}

func listenerAddr(ln net.Listener) net.Addr {
	if ln == nil {
		return nil
	}
	return ln.Addr()
}

// Shutdown stops listening, closes every connection, hands the queued
// datagrams to the producer and waits for every goroutine. When ctx ends
// first, records still waiting for room in the producer are abandoned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return nil
	}
	s.shutdown = true
	for c := range s.conns {
		_ = c.Close() // the connection's goroutine sees the error and exits
	}
	s.mu.Unlock()
	close(s.done)
	s.closeListeners()
	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		err = fmt.Errorf("syslog: shutdown abandoned records waiting for the producer: %w", ctx.Err())
		if s.cancelProduce != nil {
			s.cancelProduce()
		}
		<-finished
	}
	if s.cancelProduce != nil {
		s.cancelProduce()
	}
	return err
}

func (s *Server) closeListeners() {
	for _, c := range []io.Closer{s.udp, s.tcp, s.tls} {
		if c != nil {
			_ = c.Close() // closing unblocks the loop reading it
		}
	}
}

// readUDP reads datagrams into the queue, never waiting for it: a full
// queue drops the datagram and counts it, as the kernel would drop the
// next ones if the socket were not read.
func (s *Server) readUDP() {
	defer s.wg.Done()
	defer close(s.queue)
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.logger.Error("reading UDP failed; no more datagrams are received", "err", err)
			}
			return
		}
		s.metrics.received.WithLabelValues(transportUDP).Inc()
		keep := min(n, s.cfg.MaxMessageBytes)
		d := datagram{data: append([]byte(nil), buf[:keep]...), truncated: n > keep, from: from.String(), at: s.now()}
		select {
		case s.queue <- d:
		default:
			s.metrics.dropped.WithLabelValues("udp_queue_full").Inc()
		}
	}
}

// produceUDP hands queued datagrams to the producer until the queue is
// closed and empty.
func (s *Server) produceUDP() {
	defer s.wg.Done()
	for d := range s.queue {
		s.handle(d.data, d.truncated, d.from, transportUDP, d.at)
	}
}

// accept serves each connection of ln on its own goroutine, up to
// max_connections.
func (s *Server) accept(ln net.Listener, transport string) {
	defer s.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.logger.Warn("accepting a connection failed", "transport", transport, "err", err)
			select {
			case <-s.done:
				return
			case <-time.After(acceptBackoff):
			}
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.metrics.refused.Inc()
			_ = conn.Close() // refused: nothing was read from it
			continue
		}
		if !s.track(conn) {
			<-s.slots
			_ = conn.Close() // shutting down
			continue
		}
		s.wg.Add(1)
		go s.serve(conn, transport)
	}
}

// track records conn for Shutdown to close; false when shutting down.
func (s *Server) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return false
	}
	s.conns[conn] = struct{}{}
	return true
}

// serve reads one connection's messages until it ends, fails its framing,
// or takes longer than idle_timeout to send a message.
func (s *Server) serve(conn net.Conn, transport string) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		_ = conn.Close() // nothing more is read
		<-s.slots
	}()
	from := conn.RemoteAddr().String()
	frames := newFrameReader(conn, s.cfg.MaxMessageBytes)
	for {
		// The deadline covers a whole message, so a sender trickling a
		// byte at a time (slowloris) is closed like a silent one.
		if err := conn.SetReadDeadline(s.now().Add(s.cfg.IdleTimeout)); err != nil {
			s.metrics.closed.WithLabelValues("error").Inc()
			return
		}
		msg, truncated, err := frames.next()
		if err != nil {
			s.metrics.closed.WithLabelValues(s.closeReason(err)).Inc()
			if errors.Is(err, errFraming) {
				s.logger.Warn("closing a connection whose framing cannot be followed", "transport", transport, "sender", from, "err", err)
			}
			return
		}
		s.metrics.received.WithLabelValues(transport).Inc()
		s.handle(msg, truncated, from, transport, s.now())
	}
}

// closeReason names why a connection's read ended.
func (s *Server) closeReason(err error) string {
	var netErr net.Error
	switch {
	case err == io.EOF:
		return "eof"
	case errors.Is(err, errFraming):
		return "framing_error"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "idle_timeout"
	}
	select {
	case <-s.done:
		return "shutdown"
	default:
		return "error"
	}
}

// handle parses msg and produces its record. A trailing line end is the
// sender's trailer, not part of the message: rsyslog's forwarding
// templates end in LF in datagrams and octet-counted frames too, and
// rsyslog and syslog-ng drop it on receipt as well.
func (s *Server) handle(msg []byte, truncated bool, from, transport string, at time.Time) {
	msg = bytes.TrimRight(msg, "\r\n")
	rec := Parse(msg, at, s.loc)
	result := "parsed"
	if rec.ParseError != "" {
		result = "malformed"
	}
	s.metrics.messages.WithLabelValues(transport, result).Inc()
	if truncated {
		rec.Truncated = true
		s.metrics.truncated.WithLabelValues(transport).Inc()
	}
	id, err := uuid.NewV7()
	if err != nil {
		// Only a failing random source; the record cannot be told apart.
		s.logger.Error("making a syslog record's event_id failed", "err", err)
		s.metrics.produceErrors.Inc()
		return
	}
	rec.EventID, rec.ReceivedAt, rec.Sender, rec.Transport = id.String(), at.UTC(), from, transport
	value, err := json.Marshal(&rec)
	if err != nil {
		// A Record holds only strings, numbers and times: this is a bug.
		s.logger.Error("encoding a syslog record failed", "err", err)
		s.metrics.produceErrors.Inc()
		return
	}
	source := audit.SyslogSource(rec.Host, rec.App)
	s.producer.Produce(s.produceCtx, &kgo.Record{Topic: s.cfg.Topic, Value: value, Timestamp: at},
		func(r *kgo.Record, err error) { s.counted(r, source, err) })
}
