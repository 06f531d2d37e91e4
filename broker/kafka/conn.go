package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection. Its reader goroutine (serve) reads frames,
// parses them and runs ordered handlers itself; blocking handlers run on
// their own goroutines. Every request gets a slot in queue, in arrival
// order; the writer goroutine sends each slot's response when it is ready, so
// responses leave in request order whatever order handlers finish in.
type conn struct {
	b  *Broker
	nc net.Conn
	// rd buffers reads of nc for the reader goroutine: a small request
	// (its size, API key, header and body) and often the next one come
	// in one read system call instead of four; a read larger than the
	// buffer (a Produce frame's batches) goes to its buffer directly.
	rd     *bufio.Reader
	remote string
	host   string // peer host, for group member descriptions and ACL host matches
	// id numbers the connection within the broker's run (from 1), so a
	// fetch session can be counted against the connection that opened it
	// without holding the connection.
	id     uint64
	logger *slog.Logger

	// listener is the name of the listener the connection came in on
	// (listeners.go), and protocol its security protocol (security.go).
	listener string
	protocol securityProtocol
	// principal is who the connection acts as: anonymous until a client
	// certificate or SASL names someone. Set on the reader goroutine
	// before the requests that depend on it are read, so handlers read
	// it without a lock.
	principal string
	// sasl is the SASL authentication progress (sasl.go), used by the
	// reader goroutine only.
	sasl saslState

	ctx    context.Context // cancelled when the connection closes
	cancel context.CancelFunc

	// queue holds the slots of requests read and not yet answered; its
	// capacity is millrace.max.pipelined.requests, so a client that does not
	// read its responses stops being read.
	queue chan *slot
	// inflight counts requests read and not yet answered; the idle timer
	// only closes a connection that has none.
	inflight atomic.Int32
	handlers sync.WaitGroup // blocking handler goroutines
	// muted is set when a client over its quota must wait before its
	// next request is read (throttle.go).
	muted muteDeadline

	closeOnce sync.Once
}

// slot is one request's place in the response order.
type slot struct {
	r    *request
	done chan struct{} // closed when out or err is set
	out  []byte        // the framed response; nil for no response
	err  error         // set: close the connection instead of answering
	// stream is set instead of out for a response written in pieces
	// (Fetch records by sendfile; see data_stream.go). The writer releases
	// it whether or not it is written.
	stream *responseStream
	// charge is the queued.max.request.bytes budget the request holds; the
	// writer gives it back once the response is written or dropped.
	charge int64
}

// connReadBufferBytes is the read buffer of a connection: several small
// requests (a Fetch, a Produce of a few records), a few pages per connection.
const connReadBufferBytes = 8 << 10

func newConn(b *Broker, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(b.ctx)
	remote := nc.RemoteAddr().String()
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return &conn{
		b:         b,
		nc:        nc,
		rd:        bufio.NewReaderSize(nc, connReadBufferBytes),
		remote:    remote,
		host:      host,
		id:        b.connIDs.Add(1),
		logger:    b.logger.With("remote", remote),
		protocol:  protocolPlaintext,
		principal: anonymous,
		ctx:       ctx,
		cancel:    cancel,
		queue:     make(chan *slot, b.cfg.MaxPipelinedRequests),
	}
}

// close ends the connection once, logging why.
func (c *conn) close(reason string) {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
		c.logger.Debug("connection closed", "reason", reason)
	})
}

// closeWith closes the connection after a protocol violation or handler
// failure, logged at Warn so an operator sees misbehaving clients.
func (c *conn) closeWith(reason string, r *request) {
	attrs := []any{"reason", reason}
	if r != nil {
		attrs = append(attrs, "api_key", r.key, "api_version", r.version, "correlation_id", r.correlationID, "client_id", r.clientIDString())
	}
	c.logger.Warn("closing connection", attrs...)
	c.close(reason)
}

// serve runs the connection until it closes, then joins its goroutines.
func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	reason := c.readLoop()
	c.close(reason)
	close(c.queue)
	c.handlers.Wait()
	<-writerDone
}

// readLoop reads and dispatches requests; it returns why it stopped.
func (c *conn) readLoop() string {
	maxBytes := c.b.cfg.SocketRequestMaxBytes
	var sizeBuf [4]byte
	for {
		// Between requests the connection may idle; from the first byte
		// of the next one the whole frame must arrive within
		// millrace.request.read.timeout.ms. A client over its quota
		// waits first (KIP-219).
		if err := c.awaitUnmuted(); err != nil {
			return "closed"
		}
		if err := c.awaitRequest(sizeBuf[:1]); err != nil {
			return c.readFailure(err, "waiting for a request")
		}
		// And again: a handler running off the reader (a long-poll
		// Fetch) may have muted the connection while the reader waited,
		// and a client that does not wait out throttle_time_ms itself
		// sends its next request as soon as the answer arrives.
		if err := c.awaitUnmuted(); err != nil {
			return "closed"
		}
		deadline := time.Now().Add(c.b.cfg.RequestReadTimeout)
		if err := c.readBy(sizeBuf[1:], deadline); err != nil {
			return c.readFailure(err, "reading a request size")
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if c.sasl.raw {
			// After a version 0 SaslHandshake: a raw SASL frame.
			if reason, ok := c.serveRawSASL(size, deadline); !ok {
				return reason
			}
			continue
		}
		err := checkSize(size, maxBytes)
		if err == nil {
			err = c.checkUnauthenticatedSize(size)
		}
		if err != nil {
			c.closeWith(err.Error(), nil)
			return err.Error()
		}
		frame, charge, err := c.readFrame(int(size), deadline)
		if err != nil {
			c.b.budget.release(charge)
			return c.readFailure(err, fmt.Sprintf("reading a request of %d bytes", size))
		}
		r, err := parseRequest(frame, c.b.cfg.ClientIDMaxBytes, func(key, version int16, flexible bool, body []byte) error {
			return c.chargeDecode(key, version, flexible, body, &charge)
		})
		if err != nil {
			c.b.budget.release(charge)
			if c.ctx.Err() != nil {
				return "closed"
			}
			c.closeWith(err.Error(), r)
			return err.Error()
		}
		r.conn, r.size = c, size
		if err := c.saslGate(r); err != nil {
			c.b.budget.release(charge)
			c.closeWith(err.Error(), r)
			return err.Error()
		}
		s := &slot{r: r, done: make(chan struct{}), charge: charge}
		c.inflight.Add(1)
		select {
		case c.queue <- s:
		case <-c.ctx.Done():
			c.b.budget.release(charge)
			return "closed"
		}
		entry := registry[r.key]
		if r.unsupportedAPIVersions || !entry.blocking {
			c.run(s)
			if r.key == produceKey {
				// Answered (the response is encoded) and nothing kept
				// a reference into the request: see framepool.go.
				r.body = nil
				recycleFrame(frame)
			}
			if s.err != nil {
				c.closeWith(s.err.Error(), r)
				return s.err.Error()
			}
			continue
		}
		c.handlers.Add(1)
		go func() {
			defer c.handlers.Done()
			c.run(s)
		}()
	}
}

// readFailure logs a read error and returns the close reason. A client
// closing between requests is normal; mid-frame it is worth a line.
func (c *conn) readFailure(err error, doing string) string {
	switch {
	case c.ctx.Err() != nil:
		return "closed"
	case errors.Is(err, errIdle):
		c.logger.Info("closing idle connection", "idle", c.b.cfg.ConnectionsMaxIdle)
		return "idle"
	case errors.Is(err, io.EOF) && doing == "waiting for a request":
		return "client closed the connection"
	default:
		reason := fmt.Sprintf("%s: %v", doing, err)
		c.closeWith(reason, nil)
		return reason
	}
}

var errIdle = errors.New("connection idle")

// awaitRequest reads the first byte of the next request into buf. Each
// read waits at most connections.max.idle.ms; when that passes with no
// request in flight, the connection is idle. While requests are in flight
// the client is waiting on us, so it is not idle.
func (c *conn) awaitRequest(buf []byte) error {
	if c.rd.Buffered() >= len(buf) {
		// Pipelined: the request is here already.
		_, err := io.ReadFull(c.rd, buf)
		return err
	}
	idle := c.b.cfg.ConnectionsMaxIdle
	for {
		if err := c.nc.SetReadDeadline(time.Now().Add(idle)); err != nil {
			return err
		}
		n, err := c.rd.Read(buf)
		switch {
		case n > 0:
			return nil
		case err == nil:
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) && c.inflight.Load() > 0:
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			return errIdle
		default:
			return err
		}
	}
}

// errFrameTimeout is a frame that did not arrive in time.
var errFrameTimeout = errors.New("request not complete within millrace.request.read.timeout.ms")

// readBy fills buf before deadline, the frame's deadline.
func (c *conn) readBy(buf []byte, deadline time.Time) error {
	if c.rd.Buffered() >= len(buf) {
		// No read system call, so no deadline to arm.
		_, err := io.ReadFull(c.rd, buf)
		return err
	}
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return err
	}
	_, err := io.ReadFull(c.rd, buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%v)", errFrameTimeout, c.b.cfg.RequestReadTimeout)
	}
	return err
}

// readFrame reads a frame of size bytes (after its size prefix) by
// deadline, taking queued.max.request.bytes budget before it allocates;
// time spent waiting for budget does not count against the deadline. It
// returns the budget taken, also on error (the caller gives it back). A
// request other than Produce is at most millrace.control.request.max.bytes
// (checked on its API key, its first two bytes) and takes its whole
// charge at once. A Produce frame starts at frameClassMin bytes and grows,
// taking budget, with the bytes that arrive, so a size prefix alone cannot
// make the broker allocate or hold socket.request.max.bytes.
func (c *conn) readFrame(size int, deadline time.Time) (frame []byte, charge int64, err error) {
	budget, wait := c.b.budget, c.b.cfg.RequestReadTimeout
	take := func(n int64) error {
		start := time.Now()
		if err := budget.acquire(c.ctx, n, charge > 0, wait); err != nil {
			return err
		}
		charge += n
		deadline = deadline.Add(time.Since(start))
		return nil
	}
	var keyBuf [2]byte
	if err := c.readBy(keyBuf[:], deadline); err != nil {
		return nil, charge, err
	}
	key := int16(binary.BigEndian.Uint16(keyBuf[:]))
	first := min(size, frameClassMin)
	if key != produceKey {
		if limit := c.b.cfg.ControlRequestMaxBytes; size > int(limit) {
			return nil, charge, closef("API key %d request of %d bytes is larger than millrace.control.request.max.bytes %d", key, size, limit)
		}
		// Everything this request will hold, decoding included, taken
		// at once while holding nothing: it cannot stand in the way of
		// readers that hold budget.
		first = size
		err = take(int64(size) + budget.decodeCharge(int64(size), int64(size)))
	} else {
		err = take(int64(first))
	}
	if err != nil {
		return nil, charge, err
	}
	if key == produceKey {
		// A free pooled buffer takes the frame from its first byte: a
		// first buffer per request was most of what a stream of small
		// Produce requests (a producer at a steady rate) allocated.
		if pooled := frameBuffer(size); pooled != nil {
			frame, err = c.readPooledFrame(pooled, keyBuf, first, deadline, take)
			return frame, charge, err
		}
		// Capacity for the smallest pool class, so that a frame smaller
		// than that is recycled too (framepool.go keeps nothing smaller).
		frame = make([]byte, first, frameClassMin)
	} else {
		frame = make([]byte, first)
	}
	copy(frame, keyBuf[:])
	if err := c.readBy(frame[len(keyBuf):], deadline); err != nil {
		return nil, charge, err
	}
	if size > first {
		if frame, err = c.readFrameRest(frame, size, deadline, take); err != nil {
			return nil, charge, err
		}
	}
	return frame, charge, nil
}

// readPooledFrame reads a Produce frame into pooled, a free buffer of its
// size, after its first two bytes (in key): up to first bytes on the budget
// already taken, the rest after taking budget for it, as readFrameRest does.
// The buffer goes back to the pool on failure.
func (c *conn) readPooledFrame(pooled []byte, key [2]byte, first int, deadline time.Time, take func(int64) error) ([]byte, error) {
	n := copy(pooled, key[:])
	err := c.readBy(pooled[n:first], deadline)
	if err == nil && len(pooled) > first {
		if err = take(int64(len(pooled) - first)); err == nil {
			err = c.readBy(pooled[first:], deadline)
		}
	}
	if err != nil {
		recycleFrame(pooled)
		return nil, err
	}
	return pooled, nil
}

// readFrameRest reads the rest of a Produce frame whose first bytes are in
// frame, into a pooled buffer when one is free, else into one that doubles
// as bytes arrive. Capacities are rounded up to a pool class (at most
// doubling what arrived), so that a recycled buffer serves the next frame
// of its size.
func (c *conn) readFrameRest(frame []byte, size int, deadline time.Time, take func(int64) error) ([]byte, error) {
	if pooled := frameBuffer(size); pooled != nil {
		if err := take(int64(size - len(frame))); err != nil {
			recycleFrame(pooled)
			return nil, err
		}
		n := copy(pooled, frame)
		return pooled, c.readBy(pooled[n:], deadline)
	}
	for len(frame) < size {
		if len(frame) == cap(frame) {
			next := frameCapacity(min(size, 2*cap(frame)))
			if err := take(int64(min(next, size) - len(frame))); err != nil {
				return nil, err
			}
			grown := make([]byte, len(frame), next)
			copy(grown, frame)
			frame = grown
		}
		next := min(cap(frame), size)
		if err := c.readBy(frame[len(frame):next], deadline); err != nil {
			return nil, err
		}
		frame = frame[:next]
	}
	return frame, nil
}

// chargeDecode takes the budget for what decoding a Produce request may
// allocate (see requestDecodeFactor), adding it to charge: its part that
// is not record batches, which is held to millrace.control.request.max.bytes
// like a whole request of another API. Other requests took their decode
// charge with their frame (readFrame).
func (c *conn) chargeDecode(key, version int16, flexible bool, body []byte, charge *int64) error {
	if key != produceKey {
		return nil
	}
	n, err := produceStructureBytes(body, version, flexible)
	if err != nil {
		return closef("API key %d version %d: %v", key, version, err)
	}
	if limit := c.b.cfg.ControlRequestMaxBytes; n > int(limit) {
		return closef("API key %d version %d: %d bytes besides record batches is more than millrace.control.request.max.bytes %d", key, version, n, limit)
	}
	extra := c.b.budget.decodeCharge(int64(n), *charge)
	if err := c.b.budget.acquire(c.ctx, extra, *charge > 0, c.b.cfg.RequestReadTimeout); err != nil {
		return err
	}
	*charge += extra
	return nil
}

// run serves one request into its slot.
func (c *conn) run(s *slot) {
	defer close(s.done)
	s.out, s.stream, s.err = c.b.handle(c.ctx, s.r)
}

// handle serves one parsed request: the framed response, nil for none, or an
// error that closes the connection. A panicking handler is a bug; it is
// logged with its stack and closes only this connection.
func (b *Broker) handle(ctx context.Context, r *request) (out []byte, stream *responseStream, err error) {
	if r.unsupportedAPIVersions {
		return encodeResponse(r, unsupportedAPIVersionsResponse()), nil, nil
	}
	defer b.metrics.served(r.key, time.Now())
	defer func() {
		if p := recover(); p != nil {
			b.logger.Error("handler panic", "api_key", r.key, "api_version", r.version, "panic", p, "stack", string(debug.Stack()))
			out, stream, err = nil, nil, closef("handler for API key %d panicked", r.key)
		}
	}()
	return b.serveResponse(ctx, r)
}

// serveRequest is handle without the panic guard (the fuzz target calls it,
// so that a panic is found rather than hidden). A streamed response is
// returned as plain bytes.
func (b *Broker) serveRequest(ctx context.Context, r *request) ([]byte, error) {
	out, stream, err := b.serveResponse(ctx, r)
	if stream != nil {
		defer stream.release()
		return stream.bytes()
	}
	return out, err
}

// serveResponse runs the handler: the framed response, or a stream for a
// response written in pieces (see data_stream.go), or neither for none.
func (b *Broker) serveResponse(ctx context.Context, r *request) ([]byte, *responseStream, error) {
	var started time.Time
	if b.quotas.timed() {
		started = time.Now()
	}
	resp, err := registry[r.key].handle(ctx, b, r)
	if b.quotas != nil && err == nil {
		if resp != nil && resp != noResponse {
			resp.SetVersion(r.version)
		}
		b.quotas.enforce(r, resp, started)
	}
	switch {
	case err != nil:
		return nil, nil, err
	case resp == noResponse:
		return nil, nil, nil
	case resp == nil || resp.Key() != r.key:
		return nil, nil, closef("handler for API key %d returned no or the wrong response", r.key)
	}
	resp.SetVersion(r.version)
	if sr, ok := resp.(streamedResponse); ok {
		return nil, sr.stream(r), nil
	}
	return encodeResponse(r, resp), nil, nil
}

// writeLoop sends responses in request order. After a failure it keeps
// draining the queue (without writing) so the reader never blocks on it.
func (c *conn) writeLoop() {
	for s := range c.queue {
		c.writeSlot(s)
		if s.stream != nil {
			s.stream.release()
		}
		c.b.budget.release(s.charge)
	}
}

// writeSlot waits for one slot's response and sends it.
func (c *conn) writeSlot(s *slot) {
	select {
	case <-s.done:
	case <-c.ctx.Done():
		// Closing: the handler sees the same cancellation and
		// finishes; nothing more is written.
		<-s.done
		return
	}
	c.inflight.Add(-1)
	if c.ctx.Err() != nil {
		return
	}
	if s.err != nil {
		c.closeWith(s.err.Error(), s.r)
		return
	}
	var err error
	switch {
	case s.stream != nil:
		err = c.writeStream(s.stream)
	case s.out != nil:
		err = c.write(s.out)
	}
	if err != nil {
		c.closeWith(fmt.Sprintf("writing a response: %v", err), s.r)
	}
}

// write sends one response; a client that reads nothing for
// connections.max.idle.ms is closed.
func (c *conn) write(out []byte) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.b.cfg.ConnectionsMaxIdle)); err != nil {
		return err
	}
	_, err := c.nc.Write(out)
	return err
}

// writeStream sends a response written in pieces, with the same deadline.
func (c *conn) writeStream(s *responseStream) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.b.cfg.ConnectionsMaxIdle)); err != nil {
		return err
	}
	return s.writeTo(c.nc, &c.b.metrics.streamedRecordBytes)
}

// unsupportedAPIVersionsResponse is KIP-511's answer to an ApiVersions
// request of an unknown version: error 35 in a v0 body listing what is served.
func unsupportedAPIVersionsResponse() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = 35 // UNSUPPORTED_VERSION
	resp.ApiKeys = servedAPIs()
	return resp
}
