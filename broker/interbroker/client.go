// Package interbroker is everything a broker sends another broker: replica
// fetches (fetcher.go), transaction markers and requests forwarded to a
// transaction coordinator (Client.Request). One TLS and SASL setup serves
// them all, and connections are pooled per broker: one franz-go client per
// other broker, dialing that broker's inter-broker listener, on which
// franz-go keeps one connection per kind of request (the long-polling
// fetches on their own, so they never hold a marker up).
//
// TLS is this broker's client settings (its truststore and keystore); on a
// SASL listener the client authenticates as the inter-broker user
// (sasl.mechanism.inter.broker.protocol, millrace.inter.broker.sasl.username
// and .password.file), reading the password file at every authentication so
// a rotated password is used from the next one on, and re-authenticates
// before the session lifetime the other broker gives ends (KIP-368). Each
// client talks only to its seed, so the addresses other brokers advertise
// in Metadata do not matter; it is rebuilt when the broker's endpoint
// changes (a restart on another port).
package interbroker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"

	"millrace/broker/cluster"
	"millrace/internal/clientauth"
)

// Config is how this broker reaches the others.
type Config struct {
	// BrokerID is this broker's ID: the client ID's suffix, and the
	// replica ID of its fetches.
	BrokerID int32
	// Cluster is the metadata model, where the other brokers' endpoints
	// are registered. Required.
	Cluster *cluster.Cluster
	// Listener is the inter-broker listener's name
	// (inter.broker.listener.name): the endpoint dialled on every broker.
	Listener string
	// TLS is the client TLS configuration for SSL and SASL_SSL listeners.
	TLS *tls.Config
	// SASL is the inter-broker user for SASL listeners; with no Username a
	// SASL listener cannot be reached.
	SASL clientauth.SASL
	// Logger receives the fetchers' log lines.
	Logger *slog.Logger
}

// Client is the pool of clients to the other brokers.
type Client struct {
	cfg    Config
	logger *slog.Logger

	mu      sync.Mutex // guards the following
	clients map[int32]*brokerClient
	closed  bool
}

// brokerClient is one client and the address it was built for.
type brokerClient struct {
	addr string
	cl   *kgo.Client
}

// New builds the pool; clients are built on first use.
func New(cfg Config) *Client {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, logger: logger, clients: make(map[int32]*brokerClient)}
}

// ErrClosed is the answer once the broker is closing.
var ErrClosed = errors.New("the broker is closing")

// Request sends req to broker id's inter-broker listener and returns its
// response. The request's version is the highest both sides serve
// (franz-go negotiates it with ApiVersions), except the replica fetcher's
// Fetch and OffsetForLeaderEpoch (pinnedVersions). ctx bounds the whole
// exchange.
func (c *Client) Request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.client(id)
	if err != nil {
		return nil, err
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, fmt.Errorf("broker %d: the client has no seed", id)
	}
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("request %s to broker %d: %w", kmsg.NameForKey(req.Key()), id, err)
	}
	return resp, nil
}

// pinnedVersions caps the versions of the replica fetcher's requests at
// the ones it builds (Fetch v11, OffsetForLeaderEpoch v3: non-flexible,
// naming topics rather than topic IDs, carrying the replica ID and the
// current leader epoch); every other request goes at the highest version
// both brokers serve.
func pinnedVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(fetchKey, fetchVersion)
	v.SetMaxKeyVersion(offsetForLeaderEpochKey, offsetForLeaderEpochVersion)
	return v
}

// client returns the client to broker id, building it on first use or when
// the broker's inter-broker endpoint has moved.
func (c *Client) client(id int32) (*kgo.Client, error) {
	info, ok := c.cfg.Cluster.Broker(id)
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", id)
	}
	endpoint, ok := info.Endpoint(c.cfg.Listener)
	if !ok {
		return nil, fmt.Errorf("broker %d has no listener %s (inter.broker.listener.name)", id, c.cfg.Listener)
	}
	addr := net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if have := c.clients[id]; have != nil {
		if have.addr == addr {
			return have.cl, nil
		}
		// The old client's requests in flight fail; their callers retry.
		have.cl.Close()
		delete(c.clients, id)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID("millrace-broker-" + strconv.Itoa(int(c.cfg.BrokerID))),
		kgo.MaxVersions(pinnedVersions()),
	}
	if usesTLS(endpoint.SecurityProtocol) {
		// franz-go sets ServerName to the host dialled when it is empty,
		// so the certificate is checked against the endpoint.
		opts = append(opts, kgo.DialTLSConfig(c.cfg.TLS.Clone()))
	}
	if usesSASL(endpoint.SecurityProtocol) {
		if c.cfg.SASL.Username == "" {
			return nil, fmt.Errorf("broker %d's inter-broker listener uses SASL and millrace.inter.broker.sasl.username is not set", id)
		}
		opts = append(opts, kgo.SASL(mechanism{c.cfg.SASL}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client to broker %d: %w", id, err)
	}
	c.clients[id] = &brokerClient{addr: addr, cl: cl}
	return cl, nil
}

// Close closes every client; later requests fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, have := range c.clients {
		have.cl.Close()
		delete(c.clients, id)
	}
	return nil
}

// usesTLS reports a listener whose connections are TLS from their first
// byte (SSL, SASL_SSL).
func usesTLS(protocol string) bool { return protocol == "SSL" || protocol == "SASL_SSL" }

// usesSASL reports a listener that needs SASL before any request
// (SASL_PLAINTEXT, SASL_SSL).
func usesSASL(protocol string) bool { return protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL" }

// mechanism builds the SASL mechanism at each authentication, so the
// password file is read every time and a rotated password is used from
// the next connection or re-authentication on.
type mechanism struct{ cfg clientauth.SASL }

// Name is the mechanism's name, as sent in SaslHandshake.
func (m mechanism) Name() string { return m.cfg.Mechanism }

// Authenticate starts the exchange with a freshly read password.
func (m mechanism) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	mech, err := m.cfg.Authenticator()
	if err != nil {
		return nil, nil, err
	}
	return mech.Authenticate(ctx, host)
}
