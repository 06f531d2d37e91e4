package broker

// The schema registry a broker hosts (schema.registry.listeners): the
// registry's rules and API are package schemas/registry; this file gives it
// its log (the `_schemas` topic, read and written through this broker's own
// inter-broker listener, schemas/registry/kafkalog), its election (an
// ephemeral node in this broker's coordination session,
// schemas/registry/election), its authentication (the broker's SCRAM users
// and ACLs, schemas/registry/brokerauth), and an HTTP server
// (internal/httpserver). Every broker of a cluster may host one; they share
// the topic, one is primary and takes the writes.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"millrace/broker/acl"
	"millrace/broker/users"
	"millrace/internal/clientauth"
	"millrace/internal/httpserver"
	"millrace/internal/settings"
	"millrace/schemas/format/languages"
	"millrace/schemas/registry"
	"millrace/schemas/registry/brokerauth"
	"millrace/schemas/registry/election"
	"millrace/schemas/registry/kafkalog"
)

// Values of schema.registry.authentication.method (Confluent's
// authentication.method names).
const (
	SchemaRegistryAuthNone  = "NONE"
	SchemaRegistryAuthBasic = "BASIC"
)

// registryShutdownTimeout bounds the wait for the registry's requests in
// flight at Close.
const registryShutdownTimeout = 5 * time.Second

// SchemaRegistryConfig is the hosted schema registry's configuration,
// named after Confluent's registry settings under schema.registry.
type SchemaRegistryConfig struct {
	// Listeners (schema.registry.listeners, default empty = no registry)
	// is where the registry serves, as Confluent's listeners:
	// "http://host:port" or "https://host:port" (one listener; port 0
	// picks a free one).
	Listeners string
	// HostName (schema.registry.host.name, default empty = the listener's
	// host, "localhost" for a wildcard) is the host other brokers'
	// registries forward writes to while this one is primary, as
	// Confluent's host.name.
	HostName string
	// SSLKeystoreLocation (schema.registry.ssl.keystore.location, default
	// empty = ssl.keystore.location) is the PEM file of the private key
	// and certificate chain an https listener presents.
	SSLKeystoreLocation string
	// AuthenticationMethod (schema.registry.authentication.method, default
	// NONE; empty means NONE) is NONE or BASIC: HTTP basic auth with a broker user's name and
	// password (its SCRAM credential), and, when authorizer.class.name is
	// set, the broker's ACLs for what changes the registry (package
	// schemas/registry/brokerauth lists them).
	AuthenticationMethod string
}

// schemaRegistrySettings are the registry's settings, part of Settings.
var schemaRegistrySettings = settings.NewList[Config](nil,
	settings.Str("schema.registry.listeners", settings.String, "where the schema registry serves, `http://host:port` or `https://host:port`; empty: no registry", func(c *Config) *string { return &c.SchemaRegistry.Listeners }),
	settings.Str("schema.registry.host.name", settings.String, "the host other registries forward writes to while this one is primary; empty: the listener's", func(c *Config) *string { return &c.SchemaRegistry.HostName }),
	settings.Str("schema.registry.ssl.keystore.location", settings.String, "PEM file of the key and certificate chain an https registry presents; empty: ssl.keystore.location", func(c *Config) *string { return &c.SchemaRegistry.SSLKeystoreLocation }),
	settings.Setting[Config]{Name: "schema.registry.authentication.method", Type: settings.String, Doc: "NONE, or BASIC: HTTP basic auth as a broker user, with the ACLs when an authorizer is set",
		Parse: func(c *Config, v string) error {
			c.SchemaRegistry.AuthenticationMethod = strings.ToUpper(v)
			return nil
		},
		Format: func(c Config) string { return c.SchemaRegistry.AuthenticationMethod },
	},
)

// registryListener is schema.registry.listeners parsed.
type registryListener struct {
	scheme, host, port string
}

func (c SchemaRegistryConfig) listener() (registryListener, error) {
	if strings.Contains(c.Listeners, ",") {
		return registryListener{}, fmt.Errorf("broker: schema.registry.listeners %q: one listener only", c.Listeners)
	}
	u, err := url.Parse(c.Listeners)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return registryListener{}, fmt.Errorf("broker: schema.registry.listeners %q is not http://host:port or https://host:port", c.Listeners)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return registryListener{}, fmt.Errorf("broker: schema.registry.listeners %q: %w", c.Listeners, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return registryListener{}, fmt.Errorf("broker: schema.registry.listeners %q: the port must be a number from 0 to 65535", c.Listeners)
	}
	return registryListener{scheme: u.Scheme, host: host, port: port}, nil
}

// validate rejects a registry configuration that cannot serve; keystore is
// the broker's ssl.keystore.location.
func (c SchemaRegistryConfig) validate(keystore string) error {
	switch c.AuthenticationMethod {
	case "", SchemaRegistryAuthNone, SchemaRegistryAuthBasic: // the zero value is none
	default:
		return fmt.Errorf("broker: schema.registry.authentication.method %q must be %s or %s", c.AuthenticationMethod, SchemaRegistryAuthNone, SchemaRegistryAuthBasic)
	}
	if c.Listeners == "" {
		return nil
	}
	l, err := c.listener()
	if err != nil {
		return err
	}
	if l.scheme == "https" && c.SSLKeystoreLocation == "" && keystore == "" {
		return errors.New("broker: schema.registry.listeners is https: set schema.registry.ssl.keystore.location (or ssl.keystore.location) to a PEM file of its private key and certificate chain")
	}
	return nil
}

// schemaRegistry is the hosted registry's parts; goroutines are the
// election, the registry's view and the HTTP server, joined by close.
type schemaRegistry struct {
	ln     net.Listener
	http   *http.Server
	log    *kafkalog.Log
	elect  *election.Election
	users  *users.Cache // with basic auth
	acls   *acl.Cache   // with basic auth and an authorizer
	auth   *brokerauth.Auth
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// openSchemaRegistry binds the registry's listener and starts it. The log
// dials this broker's inter-broker listener, which accepts once Run
// serves; until then the election's claim and the view's reads retry.
func (b *Broker) openSchemaRegistry() (err error) {
	cfg := b.cfg.SchemaRegistry
	l, err := cfg.listener()
	if err != nil {
		return err
	}
	logger := b.logger.With("component", "schema-registry")
	r := &schemaRegistry{}
	b.schemaRegistry = r // closed by closeParts, whatever opened
	opts, err := b.selfClientOpts()
	if err != nil {
		return err
	}
	var tlsConfig *httpserver.TLSConfig
	if l.scheme == "https" {
		keystore := cfg.SSLKeystoreLocation
		if keystore == "" {
			keystore = b.cfg.Kafka.SSLKeystoreLocation
		}
		tlsConfig = &httpserver.TLSConfig{Cert: keystore}
	}
	serverTLS, err := tlsConfig.Load()
	if err != nil {
		return fmt.Errorf("broker: schema registry: %w", err)
	}
	rcfg := registry.Config{Types: languages.All(), Logger: logger}
	if cfg.AuthenticationMethod == SchemaRegistryAuthBasic {
		if err := r.openAuth(b, logger); err != nil {
			return err
		}
		rcfg.Auth = r.auth
	}
	if r.ln, err = httpserver.Listen(net.JoinHostPort(l.host, l.port), serverTLS); err != nil {
		return fmt.Errorf("broker: schema registry: %w", err)
	}
	httpserver.WarnIfOpen(logger, "schema registry", r.ln.Addr(), rcfg.Auth != nil)
	host := cfg.HostName
	if host == "" {
		host = l.host
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "localhost"
		}
	}
	self := l.scheme + "://" + net.JoinHostPort(host, strconv.Itoa(r.ln.Addr().(*net.TCPAddr).Port))
	if r.log, err = kafkalog.New(kafkalog.Config{Opts: opts, Logger: logger,
		OnFenced: func() { r.elect.Fenced() }}); err != nil {
		return err
	}
	if r.elect, err = election.New(election.Config{Store: b.store, URL: self, Claim: r.log.Claim, Release: r.log.Release, Logger: logger}); err != nil {
		return err
	}
	server := registry.New(rcfg, r.log, r.elect)
	r.http = httpserver.New(server.Handler(), httpserver.Timeouts{}, logger)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		if err := r.elect.Run(ctx); err != nil {
			logger.Error("schema registry election stopped", "err", err)
		}
	}()
	go func() {
		defer r.wg.Done()
		if err := server.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("schema registry stopped following its topic", "err", err)
		}
	}()
	go func() {
		defer r.wg.Done()
		if err := r.http.Serve(r.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("schema registry listener failed", "err", err)
		}
	}()
	logger.Info("schema registry listening", "addr", r.ln.Addr().String(), "url", self,
		"authentication", cfg.AuthenticationMethod)
	return nil
}

// openAuth opens the credential cache and, with an authorizer, the ACL
// cache the registry's basic auth checks against. They are the registry's
// own caches over the same store nodes the wire server's follow.
func (r *schemaRegistry) openAuth(b *Broker, logger *slog.Logger) error {
	r.users = users.NewCache(b.store, logger)
	r.users.Start()
	acfg := brokerauth.Config{Users: r.users, Logger: logger}
	if authz := b.cfg.Kafka.Authorizer; authz.ClassName != "" {
		var err error
		if r.acls, err = acl.OpenCache(b.store, logger); err != nil {
			return fmt.Errorf("broker: schema registry: %w", err)
		}
		acfg.ACLs = r.acls.Snapshot
		acfg.ACLSettings = acl.Settings{SuperUsers: acl.ParseSuperUsers(authz.SuperUsers), AllowIfNoACL: authz.AllowEveryoneIfNoACLFound}
	}
	var err error
	r.auth, err = brokerauth.New(acfg)
	return err
}

// selfClientOpts reach this broker's inter-broker listener as its advertised
// endpoint (the name its certificate carries), with the inter-broker
// client's TLS and SASL settings: the registry's writes are the broker's
// own, made as the inter-broker user.
func (b *Broker) selfClientOpts() ([]kgo.Opt, error) {
	info, ok := b.cluster.Broker(b.cfg.Kafka.BrokerID)
	if !ok || len(info.Endpoints) == 0 {
		return nil, errors.New("broker: schema registry: this broker's registration is not in the model yet")
	}
	e := info.Endpoints[0]
	opts := []kgo.Opt{
		kgo.SeedBrokers(net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))),
		kgo.ClientID("millrace-schema-registry-" + strconv.Itoa(int(b.cfg.Kafka.BrokerID))),
	}
	var sec clientauth.Settings
	if e.SecurityProtocol == "SSL" || e.SecurityProtocol == "SASL_SSL" {
		sec.TLS = &clientauth.TLS{CA: b.cfg.Kafka.SSLTruststoreLocation, Cert: b.cfg.Kafka.SSLKeystoreLocation}
	}
	if e.SecurityProtocol == "SASL_PLAINTEXT" || e.SecurityProtocol == "SASL_SSL" {
		s := b.cfg.Kafka.SASL
		if s.InterBrokerUsername == "" {
			return nil, fmt.Errorf("broker: the schema registry writes through the inter-broker listener %s, which uses %s: set millrace.inter.broker.sasl.username and millrace.inter.broker.sasl.password.file", e.Listener, e.SecurityProtocol)
		}
		auth := clientauth.SASL{Mechanism: s.InterBrokerMechanism, Username: s.InterBrokerUsername, PasswordFile: s.InterBrokerPasswordFile}
		if err := (clientauth.Settings{SASL: &auth}).Validate(); err != nil {
			return nil, fmt.Errorf("broker: schema registry: %w", err)
		}
		opts = append(opts, kgo.SASL(passwordFileMechanism{auth}))
	}
	more, err := sec.Opts()
	if err != nil {
		return nil, fmt.Errorf("broker: schema registry: %w", err)
	}
	return append(opts, more...), nil
}

// passwordFileMechanism builds the SASL mechanism at each authentication,
// as the inter-broker client does (broker/interbroker), so a rotated
// password file is read from the next connection on.
type passwordFileMechanism struct{ cfg clientauth.SASL }

// Name is the mechanism's name, as sent in SaslHandshake.
func (m passwordFileMechanism) Name() string { return m.cfg.Mechanism }

// Authenticate starts the exchange with a freshly read password.
func (m passwordFileMechanism) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	mech, err := m.cfg.Authenticator()
	if err != nil {
		return nil, nil, err
	}
	return mech.Authenticate(ctx, host)
}

// close stops serving, ends the election (giving the primary node up) and
// the view, and closes the clients.
func (r *schemaRegistry) close() error {
	var errs []error
	if r.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), registryShutdownTimeout)
		if err := r.http.Shutdown(ctx); err != nil {
			errs = append(errs, r.http.Close())
		}
		cancel()
	} else if r.ln != nil {
		errs = append(errs, r.ln.Close())
	}
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	if r.log != nil {
		errs = append(errs, r.log.Close())
	}
	if r.acls != nil {
		errs = append(errs, r.acls.Close())
	}
	if r.users != nil {
		errs = append(errs, r.users.Close())
	}
	return errors.Join(errs...)
}

// SchemaRegistryAddr is the address the schema registry is bound to, nil
// without one.
func (b *Broker) SchemaRegistryAddr() net.Addr {
	if b.schemaRegistry == nil || b.schemaRegistry.ln == nil {
		return nil
	}
	return b.schemaRegistry.ln.Addr()
}
