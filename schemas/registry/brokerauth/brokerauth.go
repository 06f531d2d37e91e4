// Package brokerauth protects the schema registry with the broker's own
// users and ACLs (registry.Auth), as Redpanda protects its registry: HTTP
// basic auth whose password is checked against the user's stored SCRAM
// credential (broker/users), and Kafka ACLs (broker/acl) for what changes
// the registry. One set of users and one set of grants serve the Kafka
// listeners and the registry, managed with the tools Kafka users know
// (kafka-configs --alter --add-config SCRAM-SHA-512=..., kafka-acls).
//
// What each operation needs (registry.Operation):
//
//	read (every GET)                  any authenticated user
//	write (register, import)          WRITE on TOPIC _schemas
//	delete (soft or permanent)        WRITE on TOPIC _schemas
//	config (/config and /mode)        ALTER_CONFIGS on CLUSTER
//
// A write or a delete is a record the registry appends to `_schemas`, so it
// is granted as writing to that topic: `kafka-acls --add --allow-principal
// User:ci --operation Write --topic _schemas`. Compatibility levels and
// modes change how the whole registry behaves, so they are granted like
// broker configuration: `kafka-acls --add --allow-principal User:ops
// --operation AlterConfigs --cluster`. Super users (super.users) may do
// everything; without an authorizer (authorizer.class.name empty) every
// authenticated user may, as on the Kafka listeners. The registry does not
// pass the client's address to Authorize, so an Allow counts only with host
// `*`, and a Deny of any host counts for every host (fail closed).
package brokerauth

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"time"

	"millrace/broker/acl"
	"millrace/broker/users"
	"millrace/schemas/registry"
)

// Defaults of Config.
const (
	// DefaultTopic is the registry's topic, the resource of writes.
	DefaultTopic = "_schemas"
	// DefaultVerifiedTTL is how long a verified password is remembered: a
	// client sends its credentials with every request, and each PBKDF2
	// check costs milliseconds of CPU.
	DefaultVerifiedTTL = 5 * time.Minute
	// defaultVerifiedUsers bounds the remembered passwords.
	defaultVerifiedUsers = 1024
)

// Credentials are the broker's SCRAM credentials (*users.Cache).
type Credentials interface {
	// LookupAny returns one of user's credentials, to check a password.
	LookupAny(user string) (users.Credential, bool)
}

// Config is what the registry's users and grants come from.
type Config struct {
	// Users are the credentials passwords are checked against. Required.
	Users Credentials
	// Verified remembers recently verified passwords. Default: a cache of
	// DefaultVerifiedTTL.
	Verified *users.VerifiedCache
	// ACLs returns the current ACLs; nil means no authorizer: every
	// authenticated user may do everything.
	ACLs func() *acl.Snapshot
	// ACLSettings are super.users and allow.everyone.if.no.acl.found.
	ACLSettings acl.Settings
	// Topic is the resource of writes and deletes. Default DefaultTopic.
	Topic string
	// MaxConcurrentChecks bounds the password checks (PBKDF2) running at
	// once, so a flood of wrong passwords costs at most that many cores;
	// the rest wait, as long as their request allows. Default half the
	// CPUs, at least 1.
	MaxConcurrentChecks int
	// Logger receives failed logins at warn level (user and client, never
	// the password). Default: discarded.
	Logger *slog.Logger
}

// Auth is registry.Auth over the broker's users and ACLs.
type Auth struct {
	cfg    Config
	logger *slog.Logger
	checks chan struct{} // a token per password check running
	// dummy is checked for an unknown user, so that the answer takes as
	// long as for a known one and does not tell which users exist.
	dummy users.Credential
}

var _ registry.Auth = (*Auth)(nil)

// Errors of Authenticate (both answered 401).
var (
	ErrNoCredentials = errors.New("the schema registry needs HTTP basic auth with a broker user's name and password")
	ErrInvalid       = errors.New("invalid username or password")
)

// New returns the authenticator.
func New(cfg Config) (*Auth, error) {
	if cfg.Users == nil {
		return nil, errors.New("brokerauth: Users is required")
	}
	if cfg.Verified == nil {
		cfg.Verified = users.NewVerifiedCache(DefaultVerifiedTTL, defaultVerifiedUsers, nil)
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.MaxConcurrentChecks <= 0 {
		cfg.MaxConcurrentChecks = max(runtime.GOMAXPROCS(0)/2, 1)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dummy, err := users.NewCredential(users.SCRAMSHA512, "millrace-no-such-user", users.MinIterations)
	if err != nil {
		return nil, err
	}
	return &Auth{cfg: cfg, logger: logger.With("component", "schema-registry-auth"),
		checks: make(chan struct{}, cfg.MaxConcurrentChecks), dummy: dummy}, nil
}

// Authenticate checks the request's basic-auth credentials and returns its
// principal, "User:<name>".
func (a *Auth) Authenticate(r *http.Request) (string, error) {
	user, password, ok := r.BasicAuth()
	if !ok {
		return "", ErrNoCredentials
	}
	if users.CheckName(user) != nil {
		a.fail(r, "(not a valid user name)")
		return "", ErrInvalid
	}
	cred, known := a.cfg.Users.LookupAny(user)
	if known && a.cfg.Verified.Check(user, password, cred) {
		return "User:" + user, nil
	}
	select {
	case a.checks <- struct{}{}:
	case <-r.Context().Done():
		return "", r.Context().Err()
	}
	defer func() { <-a.checks }()
	if !known {
		a.dummy.Verify(password)
		a.fail(r, user)
		return "", ErrInvalid
	}
	if !cred.Verify(password) {
		a.fail(r, user)
		return "", ErrInvalid
	}
	a.cfg.Verified.Add(user, password, cred)
	return "User:" + user, nil
}

func (a *Auth) fail(r *http.Request, user string) {
	a.logger.Warn("schema registry authentication failed", "user", user, "client", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
}

// Authorize reports whether principal may do op on subject (the package
// comment lists what each operation needs).
func (a *Auth) Authorize(principal string, op registry.Operation, subject string) bool {
	if op == registry.OpRead || a.cfg.ACLs == nil {
		return true
	}
	var (
		operation acl.Operation
		typ       acl.ResourceType
		name      string
	)
	switch op {
	case registry.OpWrite, registry.OpDelete:
		operation, typ, name = acl.Write, acl.Topic, a.cfg.Topic
	case registry.OpConfig:
		operation, typ, name = acl.AlterConfigs, acl.Cluster, acl.ClusterName
	default:
		return false
	}
	snap := a.cfg.ACLs()
	if !snap.Authorize(a.cfg.ACLSettings, principal, acl.Wildcard, operation, typ, name) {
		return false
	}
	// A Deny bound to a host counts as if the request came from there.
	denies := snap.Select(acl.Filter{Type: typ, Name: &name, PatternType: acl.MatchPattern,
		Operation: acl.AnyOperation, Permission: acl.Deny})
	for _, d := range denies {
		if d.Entry.Host != acl.Wildcard && !snap.Authorize(a.cfg.ACLSettings, principal, d.Entry.Host, operation, typ, name) {
			return false
		}
	}
	return true
}
