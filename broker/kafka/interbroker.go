package kafka

// Inter-broker requests other than replication (transaction markers, a
// leader asking a transaction coordinator): one franz-go client per other
// broker, dialing that broker's inter-broker listener with this broker's
// own TLS client settings (tls.go) and, on a SASL listener, authenticating
// as the inter-broker user (sasl.mechanism.inter.broker.protocol,
// millrace.inter.broker.sasl.username and .password.file), as replication
// does. Each client talks only to its seed, so the addresses other brokers
// advertise in Metadata do not matter. A client is rebuilt when the broker's
// endpoint changes (a restart on another port).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"millrace/internal/clientauth"
)

// interBrokerClients are the franz-go clients to the other brokers.
type interBrokerClients struct {
	b *Broker

	mu      sync.Mutex // guards the following
	clients map[int32]*interBrokerClient
	closed  bool
}

// interBrokerClient is one client and the address it was built for.
type interBrokerClient struct {
	addr string
	cl   *kgo.Client
}

func newInterBrokerClients(b *Broker) *interBrokerClients {
	return &interBrokerClients{b: b, clients: make(map[int32]*interBrokerClient)}
}

// errInterBrokerClosed is the answer once the broker is closing.
var errInterBrokerClosed = errors.New("the broker is closing")

// brokerRequest sends req to broker id's inter-broker listener and returns
// its response. The request's version is the highest both sides serve
// (franz-go negotiates it with ApiVersions). ctx bounds the whole exchange.
func (b *Broker) brokerRequest(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	cl, err := b.interBrokerClients.client(id)
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

// client returns the client to broker id, building it on first use or when
// the broker's inter-broker endpoint has moved.
func (c *interBrokerClients) client(id int32) (*kgo.Client, error) {
	b := c.b
	info, ok := b.cluster.Broker(id)
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", id)
	}
	endpoint, ok := info.Endpoint(b.interBroker)
	if !ok {
		return nil, fmt.Errorf("broker %d has no listener %s (inter.broker.listener.name)", id, b.interBroker)
	}
	addr := net.JoinHostPort(endpoint.Host, strconv.Itoa(int(endpoint.Port)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errInterBrokerClosed
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
		kgo.ClientID("millrace-broker-" + strconv.Itoa(int(b.cfg.BrokerID))),
	}
	protocol := securityProtocol(endpoint.SecurityProtocol)
	if protocol.usesTLS() {
		// franz-go sets ServerName to the host dialled when it is empty,
		// so the certificate is checked against the endpoint as
		// replication checks it.
		opts = append(opts, kgo.DialTLSConfig(b.tls.client.Clone()))
	}
	if protocol.usesSASL() {
		cfg := b.cfg.SASL
		if cfg.InterBrokerUsername == "" {
			return nil, fmt.Errorf("broker %d's inter-broker listener uses SASL and millrace.inter.broker.sasl.username is not set", id)
		}
		opts = append(opts, kgo.SASL(interBrokerMechanism{clientauth.SASL{
			Mechanism: cfg.InterBrokerMechanism, Username: cfg.InterBrokerUsername, PasswordFile: cfg.InterBrokerPasswordFile,
		}}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client to broker %d: %w", id, err)
	}
	c.clients[id] = &interBrokerClient{addr: addr, cl: cl}
	return cl, nil
}

// Close closes every client; later requests fail.
func (c *interBrokerClients) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, have := range c.clients {
		have.cl.Close()
		delete(c.clients, id)
	}
	return nil
}

// interBrokerMechanism builds the SASL mechanism at each authentication, so
// the password file is read every time and a rotated password is used from
// the next connection on, as replication does.
type interBrokerMechanism struct{ cfg clientauth.SASL }

// Name is the mechanism's name, as sent in SaslHandshake.
func (m interBrokerMechanism) Name() string { return m.cfg.Mechanism }

// Authenticate starts the exchange with a freshly read password.
func (m interBrokerMechanism) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	mech, err := m.cfg.Authenticator()
	if err != nil {
		return nil, nil, err
	}
	return mech.Authenticate(ctx, host)
}
