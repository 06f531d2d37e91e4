package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/broker/coord/zk"
	"millrace/broker/log"
	"millrace/internal/zktest"

	"millrace/internal/waitfor"
)

// waitingMessage is what Register logs, once, while it waits for another
// session's hold on its ID to end.
const waitingMessage = "broker id held by another session"

// messages is a slog handler that keeps every message logged, so a test can
// wait for one.
type messages struct {
	mu      sync.Mutex // guards the following
	logged  []string
	changed chan struct{} // closed and replaced at every message
}

func newMessages() *messages { return &messages{changed: make(chan struct{})} }

func (m *messages) Enabled(context.Context, slog.Level) bool { return true }
func (m *messages) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *messages) WithGroup(string) slog.Handler            { return m }
func (m *messages) Handle(_ context.Context, r slog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logged = append(m.logged, r.Message)
	close(m.changed)
	m.changed = make(chan struct{})
	return nil
}

// count returns how many messages start with prefix, and a channel closed
// at the next message.
func (m *messages) count(prefix string) (int, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, msg := range m.logged {
		if strings.HasPrefix(msg, prefix) {
			n++
		}
	}
	return n, m.changed
}

// wait reports whether a message starting with prefix is logged before
// stop is closed.
func (m *messages) wait(prefix string, stop <-chan struct{}) bool {
	for {
		n, changed := m.count(prefix)
		if n > 0 {
			return true
		}
		select {
		case <-changed:
		case <-stop:
			return false
		}
	}
}

// registerBackend is a coordination backend for the registration tests.
type registerBackend struct {
	name string
	// sessionTimeout is the brokers' session timeout on this backend.
	sessionTimeout time.Duration
	// connect opens a session, closed when the test ends.
	connect func(t *testing.T) coord.Store
	// crashedHolder creates path as an ephemeral of a new session whose
	// client then dies without closing it, as a SIGKILLed broker's does.
	// expire, when not nil, is what ends that session; the backend's own
	// session timeout does when it is nil.
	crashedHolder func(t *testing.T, path string, data []byte) (expire func())
}

func registerBackends(t *testing.T) []registerBackend {
	embeddedBackend := func() registerBackend {
		var server *embedded.Server
		open := func(t *testing.T) *embedded.Server {
			if server == nil {
				var err error
				if server, err = embedded.Open(t.TempDir(), slog.New(slog.DiscardHandler)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { server.Close(); server = nil })
			}
			return server
		}
		connect := func(t *testing.T) coord.Store {
			s, err := open(t).Session()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return registerBackend{
			name:           "embedded",
			sessionTimeout: 300 * time.Millisecond,
			connect:        connect,
			// Embedded sessions have no heartbeat to miss: the test ends
			// the session itself, once Register waits.
			crashedHolder: func(t *testing.T, path string, data []byte) func() {
				s := connect(t)
				if _, err := s.Create(path, data, coord.Ephemeral); err != nil {
					t.Fatal(err)
				}
				return func() { open(t).ExpireSession(s.SessionID()) }
			},
		}
	}
	zkBackend := func() registerBackend {
		server := zktest.Start(t)
		servers := func(t *testing.T) string {
			// Each sub-test in a chroot of its own.
			return server.Connect() + "/" + strings.ReplaceAll(t.Name(), "/", "-")
		}
		const timeout = 2 * time.Second
		return registerBackend{
			name:           "zookeeper",
			sessionTimeout: timeout,
			connect: func(t *testing.T) coord.Store {
				s, err := zk.Connect(servers(t), timeout, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			},
			crashedHolder: func(t *testing.T, path string, data []byte) func() {
				addr, chroot, _ := strings.Cut(servers(t), "/")
				conn := crashingClient(t, addr, timeout)
				if _, err := conn.Create("/"+chroot+path, data, gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); err != nil {
					t.Fatal(err)
				}
				conn.crash()
				return nil
			},
		}
	}
	return []registerBackend{embeddedBackend(), zkBackend()}
}

// crashClient is a raw ZooKeeper client whose connection can be cut for
// good, so its session ends only by expiry.
type crashClient struct {
	*gozk.Conn
	mu      sync.Mutex // guards the following
	current net.Conn
	crashed bool
}

func crashingClient(t *testing.T, addr string, timeout time.Duration) *crashClient {
	t.Helper()
	c := &crashClient{}
	dial := func(network, address string, d time.Duration) (net.Conn, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.crashed {
			return nil, errors.New("crashed")
		}
		conn, err := net.DialTimeout(network, address, d)
		c.current = conn
		return conn, err
	}
	conn, events, err := gozk.Connect([]string{addr}, timeout, gozk.WithDialer(dial), gozk.WithLogInfo(false),
		gozk.WithLogger(silentZKLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	c.Conn = conn
	t.Cleanup(conn.Close)
	deadline := time.After(10 * time.Second)
	for conn.State() != gozk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			t.Fatal("no ZooKeeper session within 10s")
		}
	}
	go func() {
		for range events { // closed by conn.Close
		}
	}()
	return c
}

// crash cuts the connection and refuses to reconnect, as a killed process
// would: the server keeps the session until it expires.
func (c *crashClient) crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashed = true
	if c.current != nil {
		c.current.Close()
	}
}

type silentZKLogger struct{}

func (silentZKLogger) Printf(string, ...any) {}

// openRegisterEnv opens a replicated cluster on store with the backend's
// session timeout, logging into the returned messages.
func openRegisterEnv(t *testing.T, b registerBackend, store coord.Store) (*Cluster, *messages) {
	t.Helper()
	logged := newMessages()
	logs, err := log.OpenManager(t.TempDir(), log.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	cfg := DefaultConfig()
	cfg.Replicated = true
	cfg.SessionTimeout = b.sessionTimeout
	c, err := Open(cfg, store, logs, log.DefaultConfig(), slog.New(logged))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c, logged
}

// TestRegisterWaitsForPreviousSession: a broker restarted after a crash finds
// its ID held by its previous run's session. AwaitBrokerID (and Register)
// wait for that session to expire, then the broker registers; an ID held by
// a live session is refused after the wait, naming the holder's address.
func TestRegisterWaitsForPreviousSession(t *testing.T) {
	for _, b := range registerBackends(t) {
		t.Run(b.name+"/expired", func(t *testing.T) {
			store := b.connect(t)
			c, logged := openRegisterEnv(t, b, store)
			expire := b.crashedHolder(t, brokerPath(0), []byte(`{"version":4,"host":"previous","port":9092}`))
			registered, expired := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(expired)
				if expire != nil && logged.wait(waitingMessage, registered) {
					expire()
				}
			}()
			// In the broker's order: wait for the ID, bind, register.
			err := c.AwaitBrokerID()
			close(registered)
			<-expired
			if err != nil {
				t.Fatalf("AwaitBrokerID until the previous session expired: %v", err)
			}
			if err := c.Register("h", 9092, ""); err != nil {
				t.Fatalf("Register after the previous session expired: %v", err)
			}
			if n, _ := logged.count(waitingMessage); n != 1 {
				t.Fatalf("the wait was logged %d times, want once", n)
			}
			ok, stat, err := store.Exists(brokerPath(0))
			if err != nil || !ok || stat.EphemeralOwner != store.SessionID() {
				t.Fatalf("registration after the wait: exists %v, owner 0x%x, err %v; want owned by session 0x%x", ok, stat.EphemeralOwner, err, store.SessionID())
			}
			// The model loaded before the wait may name this broker leader
			// of what others lead by now: it leads nothing and elects no
			// controller until Start has read the model again.
			if c.SessionOK() {
				t.Fatal("SessionOK after a wait in Register, before Start")
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			waitfor.Until(t, 10*time.Second, "a session and this broker as controller after Start", func() bool { return c.SessionOK() && c.ControllerID() == 0 })
		})
		t.Run(b.name+"/live", func(t *testing.T) {
			store := b.connect(t)
			c, logged := openRegisterEnv(t, b, store)
			holder := b.connect(t)
			if _, err := holder.Create(brokerPath(0), []byte(`{"version":4,"host":"other-host","port":9093}`), coord.Ephemeral); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err := c.Register("h", 9092, "")
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "other-host:9093") || !errors.Is(err, coord.ErrNodeExists) {
				t.Fatalf("Register over a live holder: %v, want a refusal naming other-host:9093", err)
			}
			if took < c.registrationWait() {
				t.Fatalf("refused after %v, before the wait of %v", took, c.registrationWait())
			}
			if n, _ := logged.count(waitingMessage); n != 1 {
				t.Fatalf("the wait was logged %d times, want once", n)
			}
		})
	}
}

// TestRegisterSingleBrokerDoesNotWait: with embedded coordination nothing of
// a previous run survives, so a held ID is refused at once.
func TestRegisterSingleBrokerDoesNotWait(t *testing.T) {
	e := openEnv(t, t.TempDir())
	holder, err := e.server.Session()
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.Create(brokerPath(0), []byte(`{"version":4,"host":"other-host","port":9093}`), coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if w := e.c.registrationWait(); w != 0 {
		t.Fatalf("a single broker waits %v for a held ID", w)
	}
	err = e.c.Register("h", 9092, "")
	if err == nil || !strings.Contains(err.Error(), "other-host:9093") || strings.Contains(err.Error(), "waiting") {
		t.Fatalf("Register over a held ID: %v, want a refusal naming other-host:9093, without a wait", err)
	}
}
