// Package zk is the ZooKeeper backend of millrace's coordination store: a
// coord.Store on one ZooKeeper client session (github.com/go-zookeeper/zk),
// for clusters whose brokers share a ZooKeeper ensemble.
//
// # Connecting
//
// Connect takes ZooKeeper's connect string, "host:port[,host:port...][/chroot]".
// With a chroot every path is relative to it (the chroot node is created when
// missing), so several clusters can share one ensemble. Connect returns once
// the first session is established, or fails after a bounded wait.
//
// # Sessions and what an owner must do
//
// A session outlives short disconnections: when the connection drops, the
// store reports SessionDisconnected and the client reconnects to any server of
// the ensemble; if that happens within the session timeout the store reports
// SessionConnected with the same SessionID, and all ephemerals and watches are
// intact (the client re-registers watches, and the server delivers any that
// fired meanwhile). While disconnected the owner must act cautiously: its
// ephemerals may already be gone for the rest of the cluster, so a leader or
// controller must not take decisions it cannot undo.
//
// When the session expires (the servers heard nothing for the session timeout,
// or the session was closed from elsewhere), ZooKeeper deletes its ephemerals
// and drops its watches. The store delivers EventNotWatching on every watch
// channel, reports SessionExpired, opens a new session (new SessionID) and
// reports SessionConnected. On SessionExpired an owner must:
//
//   - stop acting as leader or controller at once: another broker may already
//     hold the role, since the ephemeral that claimed it is gone;
//   - after SessionConnected, re-create its ephemerals (broker registration,
//     controller candidacy) under the new session, as a fresh start would,
//     treating ErrNodeExists as "someone else holds it now";
//   - re-read the state it watched and re-arm its watches, since changes made
//     while it had no session were not delivered;
//   - only then resume the role, if it wins it again.
//
// Tests of those owners can force an expiry with Store.ExpireSession.
//
// # Errors
//
// Operations return the coord.Err* values wrapped with the path. Operations
// made while disconnected are queued until the client reconnects and fail
// with ErrConnectionLoss once the client has tried every server without
// success (about one connect timeout per server), so no call blocks for long.
// An operation cut off by a lost connection also fails with ErrConnectionLoss;
// its outcome is unknown (a Create may have happened) and the caller should
// re-read before retrying. Once the session has expired, operations in flight
// fail with coord.ErrSessionExpired; later ones run in the new session.
package zk

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"millrace/broker/coord"
	"millrace/broker/coord/internal/statequeue"
)

// ErrConnectionLoss reports that the connection to ZooKeeper was lost or no
// server could be reached; the operation's outcome is unknown.
var ErrConnectionLoss = errors.New("coord/zk: connection to ZooKeeper lost")

// minHandshakeTimeout is the least time a server gets to answer a connect
// request.
const minHandshakeTimeout = time.Second

// closeTimeout bounds Close's wait for the client's goroutines to end.
const closeTimeout = 10 * time.Second

// Store is one ZooKeeper client session; it implements coord.Store.
type Store struct {
	conn    *gozk.Conn
	hosts   []string
	chroot  string // "" or an absolute path without trailing slash
	timeout time.Duration
	logger  *slog.Logger
	events  *statequeue.Queue
	dialer  *sniffingDialer

	connected chan struct{} // closed at the first established session
	pumpDone  chan struct{} // closed when the client's event channel closes

	// closed is set first thing in Close; methods check it without the lock.
	closed atomic.Bool

	mu         sync.Mutex // guards the following
	closing    bool       // no more watch goroutines start once set
	lastState  coord.SessionState
	sawSession bool // connected has been closed
	watches    sync.WaitGroup
}

var _ coord.Store = (*Store)(nil)

// Connect opens a session on the ZooKeeper ensemble named by servers
// ("host:port[,host:port...][/chroot]"). The servers may grant a different
// session timeout than asked for (they clamp it to their min and max).
// Connect waits for the first session to be established for at most twice
// the session timeout (and at least 5 s), then fails.
func Connect(servers string, sessionTimeout time.Duration, logger *slog.Logger) (*Store, error) {
	hosts, chroot, err := parseServers(servers)
	if err != nil {
		return nil, err
	}
	if sessionTimeout <= 0 {
		return nil, fmt.Errorf("coord/zk: session timeout %v must be positive", sessionTimeout)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		hosts:     hosts,
		timeout:   sessionTimeout,
		logger:    logger.With("component", "coord/zk"),
		events:    statequeue.New(),
		dialer:    &sniffingDialer{handshakeTimeout: max(sessionTimeout/time.Duration(len(hosts)), minHandshakeTimeout)},
		connected: make(chan struct{}),
		pumpDone:  make(chan struct{}),
	}
	conn, zkEvents, err := gozk.Connect(hosts, sessionTimeout,
		gozk.WithLogger(zkLogger{s.logger}),
		// Only the client's errors: session changes are logged here, once.
		gozk.WithLogInfo(false),
		gozk.WithDialer(s.dialer.dial),
		// The callback runs on the client's goroutine, in order, and never
		// drops a state change, unlike the client's small event channel.
		gozk.WithEventCallback(s.onEvent),
	)
	if err != nil {
		s.events.Stop()
		return nil, fmt.Errorf("coord/zk: connect %s: %w", servers, err)
	}
	s.conn = conn
	// The client closes its event channel after its last goroutine has
	// invalidated every watch: Close waits for that. Draining it also keeps
	// the client from dropping events into a full channel.
	go func() {
		defer close(s.pumpDone)
		for range zkEvents {
		}
	}()

	wait := max(2*sessionTimeout, 5*time.Second)
	select {
	case <-s.connected:
	case <-time.After(wait):
		s.Close()
		return nil, fmt.Errorf("coord/zk: connect %s: %w: no session within %v", servers, ErrConnectionLoss, wait)
	}
	if chroot != "" {
		if err := s.ensureRaw(chroot); err != nil {
			s.Close()
			return nil, fmt.Errorf("coord/zk: create chroot %s: %w", chroot, err)
		}
		s.chroot = chroot
	}
	return s, nil
}

// parseServers splits a connect string into host:port addresses and chroot.
func parseServers(servers string) ([]string, string, error) {
	list, chroot := servers, ""
	if i := strings.IndexByte(servers, '/'); i >= 0 {
		list, chroot = servers[:i], servers[i:]
		if err := coord.ValidatePath(chroot); err != nil {
			return nil, "", fmt.Errorf("coord/zk: chroot of %q: %w", servers, err)
		}
		if chroot == "/" {
			chroot = ""
		}
	}
	var hosts []string
	for _, host := range strings.Split(list, ",") {
		host = strings.TrimSpace(host)
		if host == "" {
			return nil, "", fmt.Errorf("coord/zk: empty server address in %q", servers)
		}
		hosts = append(hosts, host)
	}
	return hosts, chroot, nil
}

// ensureRaw creates path and its ancestors outside any chroot.
func (s *Store) ensureRaw(path string) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		_, err := s.conn.Create(path[:i], nil, 0, gozk.WorldACL(gozk.PermAll))
		if err != nil && !errors.Is(err, gozk.ErrNodeExists) {
			return mapError(err)
		}
	}
	return nil
}

// onEvent receives every event of the client, on its goroutine. It turns the
// connection's state changes into session states: Disconnected only after
// Connected (the client reports it for every failed attempt too), Expired
// whenever the server refuses the old session, Connected for every session
// established.
func (s *Store) onEvent(ev gozk.Event) {
	if ev.Type != gozk.EventSession {
		return
	}
	var state coord.SessionState
	switch ev.State {
	case gozk.StateHasSession:
		state = coord.SessionConnected
	case gozk.StateDisconnected:
		state = coord.SessionDisconnected
	case gozk.StateExpired:
		state = coord.SessionExpired
	case gozk.StateAuthFailed:
		s.logger.Warn("ZooKeeper authentication failed", "server", ev.Server)
		return
	default:
		// Connecting and Connected (TCP only) are steps towards a session.
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		// Close's own disconnection is not news to the owner.
		return
	}
	if state == coord.SessionDisconnected && s.lastState != coord.SessionConnected {
		return
	}
	s.lastState = state
	switch state {
	case coord.SessionConnected:
		// s.conn may not be set yet during Connect; the handshake has the ID.
		id, _ := s.dialer.credentials()
		s.logger.Info("ZooKeeper session established", "session", fmt.Sprintf("0x%x", id), "server", ev.Server)
		if !s.sawSession {
			s.sawSession = true
			close(s.connected)
		}
	case coord.SessionDisconnected:
		s.logger.Warn("ZooKeeper connection lost", "server", ev.Server)
	case coord.SessionExpired:
		s.logger.Warn("ZooKeeper session expired; ephemerals and watches are gone")
	}
	s.events.Push(state)
}

// SessionID implements coord.Store: the current session's ID, 0 while a new
// session is being established after expiry.
func (s *Store) SessionID() int64 { return s.conn.SessionID() }

// SessionEvents implements coord.Store. The first session's SessionConnected
// is already queued when Connect returns.
func (s *Store) SessionEvents() <-chan coord.SessionState { return s.events.Out() }

// Close implements coord.Store: it ends the session on the servers (so its
// ephemerals vanish at once, not after the session timeout), delivers
// EventNotWatching on open watches, and closes SessionEvents. Later calls
// return coord.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.conn.Close()
	var err error
	select {
	case <-s.pumpDone:
	case <-time.After(closeTimeout):
		// The client is stuck reconnecting; its goroutines end when that
		// attempt does. Watches not yet invalidated keep their goroutines
		// until then.
		err = fmt.Errorf("coord/zk: close: client still connecting after %v", closeTimeout)
		s.logger.Warn("ZooKeeper client did not stop in time", "timeout", closeTimeout)
	}
	if err == nil {
		s.watches.Wait()
	}
	s.events.Stop()
	return err
}

// zkLogger routes the client's messages, which with info logging off are all
// failures (connect attempts, lost connections), to the store's logger.
type zkLogger struct{ logger *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.logger.Warn("zookeeper client: " + fmt.Sprintf(format, args...))
}
