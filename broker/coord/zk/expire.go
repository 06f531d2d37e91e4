package zk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ZooKeeper's wire protocol, as far as this file needs it. Every frame is a
// 4-byte big-endian length followed by that many bytes.
//
// Connect request:  protocolVersion int32, lastZxidSeen int64, timeOut int32
// (ms), sessionId int64, passwd (int32 length + bytes), readOnly bool.
// Connect response: protocolVersion int32, timeOut int32, sessionId int64,
// passwd (int32 length + bytes), readOnly bool (optional). A sessionId of 0
// means the session asked for has expired.
// Close request:    xid int32, type int32 (opCloseSession = -11).
// Reply header:     xid int32, zxid int64, err int32.
const (
	opCloseSession int32 = -11
	closeXid       int32 = 1
	// maxHandshake bounds the connect response this file will buffer; a real
	// one is about 40 bytes.
	maxHandshake = 1024
)

// sniffingDialer dials the servers for the client and reads the session ID and
// password out of each connection's handshake: the client library keeps the
// password to itself, and ExpireSession needs it.
type sniffingDialer struct {
	// handshakeTimeout bounds the wait for a server's connect response. The
	// client library allows ten times its read timeout, long enough to sit
	// out a session timeout on a server that accepted the connection while
	// still starting up and never answers it; like ZooKeeper's Java client,
	// give each server its share of the session timeout instead.
	handshakeTimeout time.Duration

	mu      sync.Mutex // guards the following
	id      int64
	passwd  []byte
	current net.Conn // the latest connection, for tests that cut it
}

func (d *sniffingDialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.current = conn
	d.mu.Unlock()
	return &sniffingConn{Conn: conn, dialer: d}, nil
}

// SetReadDeadline shortens the client's deadline for the handshake.
func (c *sniffingConn) SetReadDeadline(t time.Time) error {
	if !c.done && !t.IsZero() && c.dialer.handshakeTimeout > 0 {
		if limit := time.Now().Add(c.dialer.handshakeTimeout); t.After(limit) {
			t = limit
		}
	}
	return c.Conn.SetReadDeadline(t)
}

// credentials returns the current session's ID and password.
func (d *sniffingDialer) credentials() (int64, []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.id, d.passwd
}

// dropConnection closes the current connection as a network failure would;
// the client reconnects and keeps its session.
func (d *sniffingDialer) dropConnection() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.current != nil {
		d.current.Close()
	}
}

// sniffingConn copies what the client reads until the connect response is
// complete, then gets out of the way. The client reads from one goroutine.
type sniffingConn struct {
	net.Conn
	dialer *sniffingDialer
	done   bool
	buf    []byte
}

func (c *sniffingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		c.sniff()
	}
	return n, err
}

func (c *sniffingConn) sniff() {
	if len(c.buf) < 4 {
		return
	}
	size := int(binary.BigEndian.Uint32(c.buf))
	if size > maxHandshake {
		// Not a handshake this file understands; the client will complain.
		c.done, c.buf = true, nil
		return
	}
	if len(c.buf) < 4+size {
		return
	}
	id, passwd, ok := parseConnectResponse(c.buf[4 : 4+size])
	c.done, c.buf = true, nil
	if ok && id != 0 {
		c.dialer.mu.Lock()
		c.dialer.id, c.dialer.passwd = id, passwd
		c.dialer.mu.Unlock()
	}
}

// parseConnectResponse extracts the session ID and password.
func parseConnectResponse(body []byte) (int64, []byte, bool) {
	if len(body) < 20 {
		return 0, nil, false
	}
	id := int64(binary.BigEndian.Uint64(body[8:16]))
	n := int32(binary.BigEndian.Uint32(body[16:20]))
	if n < 0 {
		return id, nil, true
	}
	if int(n) > len(body)-20 {
		return 0, nil, false
	}
	return id, append([]byte(nil), body[20:20+n]...), true
}

// ExpireSession ends the store's current session on the servers, as if it had
// missed its heartbeats for the session timeout: its ephemerals are deleted at
// once, and the store then sees SessionExpired, opens a new session and
// reports SessionConnected. It is meant for tests of the layers above.
//
// It is ZooKeeper's classic way to force expiry: a second connection presents
// the session's ID and password (taking the session over) and closes it.
func (s *Store) ExpireSession() error {
	if s.closed.Load() {
		return fmt.Errorf("coord/zk: expire session: %w", errClosed())
	}
	id, passwd := s.dialer.credentials()
	if id == 0 {
		return errors.New("coord/zk: expire session: no session established")
	}
	var lastErr error
	// The store's client, kicked off the session by the takeover, may
	// reconnect and take it back before the close is processed: try again.
	for attempt := 0; attempt < 10; attempt++ {
		for _, host := range s.hosts {
			if lastErr = closeSession(host, id, passwd, s.timeout); lastErr == nil {
				s.logger.Info("ZooKeeper session closed from a second connection", "session", fmt.Sprintf("0x%x", id))
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("coord/zk: expire session 0x%x: %w", id, lastErr)
}

// closeSession connects to host with the session's credentials and closes the
// session. A session the server no longer knows counts as closed.
func closeSession(host string, id int64, passwd []byte, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	// Both requests in one write: the server handles them in order, so the
	// close follows the takeover before the old client can take it back.
	var out []byte
	connect := binary.BigEndian.AppendUint32(nil, 0) // protocol version
	connect = binary.BigEndian.AppendUint64(connect, 0)
	connect = binary.BigEndian.AppendUint32(connect, uint32(timeout.Milliseconds()))
	connect = binary.BigEndian.AppendUint64(connect, uint64(id))
	connect = binary.BigEndian.AppendUint32(connect, uint32(len(passwd)))
	connect = append(connect, passwd...)
	connect = append(connect, 0) // not read-only
	out = binary.BigEndian.AppendUint32(out, uint32(len(connect)))
	out = append(out, connect...)
	closeReq := binary.BigEndian.AppendUint32(nil, uint32(closeXid))
	closeReq = binary.BigEndian.AppendUint32(closeReq, closeType())
	out = binary.BigEndian.AppendUint32(out, uint32(len(closeReq)))
	out = append(out, closeReq...)
	if _, err := conn.Write(out); err != nil {
		return err
	}

	body, err := readFrame(conn)
	if err != nil {
		return fmt.Errorf("read connect response: %w", err)
	}
	got, _, ok := parseConnectResponse(body)
	if !ok {
		return errors.New("malformed connect response")
	}
	if got == 0 {
		return nil // already expired
	}
	if got != id {
		return fmt.Errorf("server answered with session 0x%x", got)
	}
	reply, err := readFrame(conn)
	if err != nil {
		return fmt.Errorf("read close reply: %w", err)
	}
	if len(reply) < 16 {
		return errors.New("malformed close reply")
	}
	xid := int32(binary.BigEndian.Uint32(reply[0:4]))
	code := int32(binary.BigEndian.Uint32(reply[12:16]))
	if xid != closeXid || code != 0 {
		return fmt.Errorf("close reply xid %d error %d", xid, code)
	}
	return nil
}

// closeType is opCloseSession as it goes on the wire.
func closeType() uint32 {
	op := opCloseSession
	return uint32(op)
}

// readFrame reads one length-prefixed frame of at most maxHandshake bytes.
func readFrame(r io.Reader) ([]byte, error) {
	var header [4]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(header[:])
	if size > maxHandshake {
		return nil, fmt.Errorf("frame of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}
