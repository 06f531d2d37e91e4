package kafka

// Listeners, as Kafka names them: listeners=NAME://host:port,... binds one
// socket per listener; listener.security.protocol.map gives each name its
// security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL);
// advertised.listeners the address clients are told for it; and
// inter.broker.listener.name the one other brokers replicate through.
//
// A connection remembers the listener it came in on. Metadata,
// FindCoordinator and DescribeCluster answer with every broker's address
// on that same listener and leave out brokers that lack it, so a client
// that came in on EXTERNAL never learns INTERNAL addresses it may not be
// able to reach (KIP-103).
//
// TLS handshakes run on the connection's own goroutine, not the accept
// loop, so a client that stalls its handshake cannot keep others from
// connecting; until the handshake is done the connection already counts
// against max.connections and max.connections.per.ip, and it must finish
// within millrace.request.read.timeout.ms.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"millrace/broker/cluster"
	"millrace/broker/quota"
)

// defaultSecurityProtocolMap is Kafka's listener.security.protocol.map
// default: every protocol is also a listener name.
const defaultSecurityProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

// listenerSpec is one configured listener.
type listenerSpec struct {
	name     string
	protocol securityProtocol
	host     string
	port     int32
}

// address is an advertised host and port.
type address struct {
	host string
	port int32
}

// boundListener is a listener with its socket.
type boundListener struct {
	listenerSpec
	ln net.Listener
	// creation paces the listener's new connections under
	// max.connection.creation.rate (conn_rate.go); used by its accept
	// loop only.
	creation pacer
}

// parseProtocolMap parses "NAME:PROTOCOL,...". Names are upper-cased, as
// Kafka normalises them.
func parseProtocolMap(v string) (map[string]securityProtocol, error) {
	out := map[string]securityProtocol{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME:PROTOCOL", item)
		}
		p := securityProtocol(proto)
		switch p {
		case protocolPlaintext, protocolSSL, protocolSASLPlaintext, protocolSASLSSL:
		default:
			return nil, fmt.Errorf("%q: unknown security protocol %s (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", item, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener name %s is mapped twice", name)
		}
		out[name] = p
	}
	return out, nil
}

// parseEndpoint parses "NAME://host:port" or "host:port" (name "").
func parseEndpoint(s string) (name, host string, port int32, err error) {
	s = strings.TrimSpace(s)
	if n, rest, ok := strings.Cut(s, "://"); ok {
		name, s = strings.ToUpper(n), rest
		if name == "" {
			return "", "", 0, fmt.Errorf("%q: the listener name is empty", s)
		}
	}
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return "", "", 0, fmt.Errorf("%q is not host:port: %w", s, err)
	}
	p, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return "", "", 0, fmt.Errorf("%q: port %q is not a number from 0 to 65535", s, portText)
	}
	return name, host, int32(p), nil
}

// listenerSpecs parses listeners against listener.security.protocol.map.
func (c Config) listenerSpecs() ([]listenerSpec, error) {
	protocols, err := parseProtocolMap(c.ListenerSecurityProtocolMap)
	if err != nil {
		return nil, fmt.Errorf("listener.security.protocol.map: %w", err)
	}
	var specs []listenerSpec
	names, ports := map[string]bool{}, map[int32]string{}
	for item := range strings.SplitSeq(c.Listener, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, host, port, err := parseEndpoint(item)
		if err != nil {
			return nil, fmt.Errorf("listeners: %w", err)
		}
		if name == "" {
			name = string(protocolPlaintext)
		}
		protocol, ok := protocols[name]
		if !ok {
			return nil, fmt.Errorf("listeners: listener %s has no security protocol in listener.security.protocol.map", name)
		}
		if names[name] {
			return nil, fmt.Errorf("listeners: listener name %s is used twice", name)
		}
		names[name] = true
		if other, dup := ports[port]; dup && port != 0 {
			return nil, fmt.Errorf("listeners: listeners %s and %s both use port %d", other, name, port)
		}
		ports[port] = name
		specs = append(specs, listenerSpec{name: name, protocol: protocol, host: host, port: port})
	}
	if len(specs) == 0 {
		return nil, errors.New("listeners: no listener is configured")
	}
	return specs, nil
}

// advertisedAddresses parses advertised.listeners by listener name.
func (c Config) advertisedAddresses(specs []listenerSpec) (map[string]address, error) {
	out := map[string]address{}
	for item := range strings.SplitSeq(c.AdvertisedListener, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, host, port, err := parseEndpoint(item)
		if err != nil {
			return nil, fmt.Errorf("advertised.listeners: %w", err)
		}
		if name == "" {
			if len(specs) != 1 {
				return nil, fmt.Errorf("advertised.listeners: %q names no listener, and there are %d", item, len(specs))
			}
			name = specs[0].name
		}
		if !hasListener(specs, name) {
			return nil, fmt.Errorf("advertised.listeners: %s is not one of the listeners", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("advertised.listeners: listener %s is advertised twice", name)
		}
		if ip := net.ParseIP(host); host == "" || port == 0 || ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("advertised.listeners %q needs a host and a non-zero port: clients connect to it", strings.TrimSpace(item))
		}
		out[name] = address{host: host, port: port}
	}
	return out, nil
}

// interBrokerListener is inter.broker.listener.name's listener, or the one
// named PLAINTEXT, or the first.
func (c Config) interBrokerListener(specs []listenerSpec) (listenerSpec, error) {
	want := strings.ToUpper(strings.TrimSpace(c.InterBrokerListenerName))
	if want == "" {
		want = string(protocolPlaintext)
		if !hasListener(specs, want) {
			return specs[0], nil
		}
	}
	for _, s := range specs {
		if s.name == want {
			return s, nil
		}
	}
	return listenerSpec{}, fmt.Errorf("inter.broker.listener.name %s is not one of the listeners", want)
}

func hasListener(specs []listenerSpec, name string) bool {
	for _, s := range specs {
		if s.name == name {
			return true
		}
	}
	return false
}

// validateListeners checks the listener and TLS settings.
func (c Config) validateListeners() []error {
	specs, err := c.listenerSpecs()
	if err != nil {
		return []error{err}
	}
	var errs []error
	if _, err := c.advertisedAddresses(specs); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.interBrokerListener(specs); err != nil {
		errs = append(errs, err)
	}
	if !strings.EqualFold(c.SSLKeystoreType, "PEM") {
		errs = append(errs, fmt.Errorf("ssl.keystore.type %q: only PEM keystores are read", c.SSLKeystoreType))
	}
	if !strings.EqualFold(c.SSLTruststoreType, "PEM") {
		errs = append(errs, fmt.Errorf("ssl.truststore.type %q: only PEM truststores are read", c.SSLTruststoreType))
	}
	if _, err := parseClientAuth(c.SSLClientAuth); err != nil {
		errs = append(errs, err)
	}
	for _, s := range specs {
		if !s.protocol.usesTLS() {
			continue
		}
		if c.SSLKeystoreLocation == "" {
			errs = append(errs, fmt.Errorf("listener %s is %s: set ssl.keystore.location to a PEM file of its private key and certificate chain", s.name, s.protocol))
		}
		if c.SSLTruststoreLocation == "" && !strings.EqualFold(c.SSLClientAuth, "none") {
			errs = append(errs, fmt.Errorf("ssl.client.auth=%s needs ssl.truststore.location, the CA certificates client certificates are verified against", c.SSLClientAuth))
		}
		break
	}
	return errs
}

// bindListeners binds every listener, or none.
func (c Config) bindListeners(specs []listenerSpec) ([]*boundListener, error) {
	bound := make([]*boundListener, 0, len(specs))
	for _, s := range specs {
		ln, err := net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(int(s.port))))
		if err != nil {
			for _, b := range bound {
				b.ln.Close()
			}
			return nil, fmt.Errorf("kafka: listening on %s://%s: %w", s.name, net.JoinHostPort(s.host, strconv.Itoa(int(s.port))), err)
		}
		bound = append(bound, &boundListener{listenerSpec: s, ln: ln})
	}
	return bound, nil
}

// endpoints are the addresses to register, the inter-broker listener's
// first: each advertised address, else the bound one, with "localhost" for
// a wildcard bind, which is not an address a client can use.
func (c Config) endpoints(bound []*boundListener, advertised map[string]address, interBroker string) []cluster.Endpoint {
	out := make([]cluster.Endpoint, 0, len(bound))
	for _, b := range bound {
		a, ok := advertised[b.name]
		if !ok {
			a = address{host: b.host, port: int32(b.ln.Addr().(*net.TCPAddr).Port)}
			if ip := net.ParseIP(a.host); a.host == "" || ip != nil && ip.IsUnspecified() {
				a.host = "localhost"
			}
		}
		e := cluster.Endpoint{Listener: b.name, SecurityProtocol: string(b.protocol), Host: a.host, Port: a.port}
		if b.name == interBroker {
			out = append([]cluster.Endpoint{e}, out...)
		} else {
			out = append(out, e)
		}
	}
	return out
}

// Listen binds every listener and registers the broker, with its advertised
// addresses, in the coordination store.
func (b *Broker) Listen() error {
	specs, err := b.cfg.listenerSpecs()
	if err != nil {
		return err
	}
	advertised, err := b.cfg.advertisedAddresses(specs)
	if err != nil {
		return err
	}
	bound, err := b.cfg.bindListeners(specs)
	if err != nil {
		return err
	}
	b.mu.Lock()
	if b.closed || b.listeners != nil {
		b.mu.Unlock()
		for _, l := range bound {
			l.ln.Close()
		}
		return errors.New("kafka: Listen after Close or twice")
	}
	b.listeners = bound
	b.mu.Unlock()
	endpoints := b.cfg.endpoints(bound, advertised, b.interBroker)
	if err := b.cluster.RegisterEndpoints(endpoints, b.cfg.Rack); err != nil {
		return err
	}
	for _, l := range bound {
		e, _ := cluster.BrokerInfo{Endpoints: endpoints}.Endpoint(l.name)
		b.logger.Info("listening", "listener", l.name, "security_protocol", l.protocol, "addr", l.ln.Addr().String(),
			"advertised", net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), "broker_id", b.cfg.BrokerID)
	}
	return nil
}

// Addr is the inter-broker listener's bound address (nil before Listen).
func (b *Broker) Addr() net.Addr { return b.ListenerAddr(b.interBroker) }

// ListenerAddr is the bound address of the named listener, nil before
// Listen or when there is no such listener.
func (b *Broker) ListenerAddr(name string) net.Addr {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.listeners {
		if l.name == strings.ToUpper(name) {
			return l.ln.Addr()
		}
	}
	return nil
}

// Serve accepts connections on every listener until ctx is done or Close
// is called, then closes every connection and returns once their
// goroutines are gone. It returns nil when stopped that way (also when
// Close came first), and an error when Listen was not called or accepting
// fails on any listener (which stops them all).
func (b *Broker) Serve(ctx context.Context) error {
	b.mu.Lock()
	listeners := b.listeners
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	if listeners == nil {
		b.mu.Unlock()
		return errors.New("kafka: Serve needs Listen first")
	}
	b.serveWG.Add(1)
	b.mu.Unlock()
	defer b.serveWG.Done()
	stop := context.AfterFunc(ctx, b.shutdown)
	defer stop()

	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { errs <- b.accept(l) }()
	}
	var err error
	for range listeners {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	b.shutdown()
	b.connWG.Wait()
	return err
}

// accept runs one listener's accept loop until the broker closes; a
// failure to accept shuts the whole broker down and is returned.
func (b *Broker) accept(l *boundListener) error {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return nil
			}
			b.logger.Error("accept failed; stopping", "listener", l.name, "err", err)
			b.shutdown()
			return fmt.Errorf("kafka: accepting connections on %s: %w", l.name, err)
		}
		ip := remoteIP(nc)
		if refusedBy := b.admission.admit(&b.cfg, ip); refusedBy != "" {
			b.refuse(nc, ip, refusedBy)
			continue
		}
		if d := l.creation.reserve(time.Now(), b.cfg.MaxConnectionCreationRate); d > 0 {
			// KIP-612: the accept loop waits, so the connections after
			// this one wait in the accept backlog; a broker closing
			// meanwhile is seen below.
			b.metrics.connectionThrottled("max.connection.creation.rate")
			b.waitOrClose(d)
		}
		ipDelay, serve := b.admission.connectionDelayPerIP(b.ipRates(), ip, time.Now())
		if ipDelay > 0 {
			b.metrics.connectionThrottled(string(quota.ConnectionCreationRate))
		}
		if l.protocol.usesTLS() {
			nc = b.tlsServer(nc)
		}
		c := newConn(b, nc)
		c.listener, c.protocol = l.name, l.protocol
		c.logger = c.logger.With("listener", l.name)
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			nc.Close()
			b.admission.release(ip)
			return nil
		}
		b.conns[c] = struct{}{}
		b.connWG.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.connWG.Done()
			if !b.waitOrClose(ipDelay) {
				c.close("the broker is closing")
			} else if !serve {
				c.close("the address's connection_creation_rate quota is 0")
			} else if err := c.handshake(); err != nil {
				c.logger.Info("TLS handshake failed", "err", err)
				c.close("TLS handshake failed")
			} else {
				c.serve()
			}
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
			b.admission.release(ip)
		}()
	}
}

// listenerOf is the listener a request came in on; requests served without
// a connection (tests, fuzzing) count as the inter-broker listener's.
func (b *Broker) listenerOf(r *request) string {
	if r.conn == nil || r.conn.listener == "" {
		return b.interBroker
	}
	return r.conn.listener
}

// advertisedOn is a broker's address on the named listener; ok is false
// when the broker has no such listener, and clients of that listener are
// then not told of it.
func advertisedOn(info cluster.BrokerInfo, listener string) (host string, port int32, ok bool) {
	e, ok := info.Endpoint(listener)
	return e.Host, e.Port, ok
}
