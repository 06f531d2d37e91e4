package kafka

// SASL authentication of a connection (SaslHandshake, key 17, and
// SaslAuthenticate, key 36), as Kafka's broker does it:
//
//   - On a SASL_PLAINTEXT or SASL_SSL listener a connection must
//     authenticate before anything but ApiVersions, SaslHandshake and
//     SaslAuthenticate; any other request first closes the connection
//     (saslGate, called by the connection loop for every request).
//   - SaslHandshake picks the mechanism. After version 1, the mechanism's
//     messages travel in SaslAuthenticate requests (KIP-152); after
//     version 0, as raw size-prefixed frames with no request header, the
//     flow of clients older than KIP-152 (kafka-python 2.0 among them),
//     read by the connection loop through serveRawSASL.
//   - PLAIN (RFC 4616) checks the password against the user's stored SCRAM
//     credential; SCRAM-SHA-256/512 (RFC 5802, 7677) run xdg-go/scram's
//     server over the stored credentials. Credentials come from the
//     users.Cache of Broker.sasl, which follows the coordination store.
//   - Success makes the connection's principal "User:<name>". With
//     connections.max.reauth.ms set (KIP-368) the session has that
//     lifetime: SaslAuthenticate v1+ says so, the client re-authenticates
//     (a new handshake and exchange, same mechanism and user) and a
//     connection whose session ended is closed at its next request.
//   - Failure answers SASL_AUTHENTICATION_FAILED after
//     connection.failed.authentication.delay.ms, is counted
//     (millrace_broker_sasl_authentications_total{result="failed"} or
//     "throttled") and logged, sampled, with the client's address and the
//     user name; the connection is closed at its next request, as Kafka
//     closes it. Failed password checks are limited per IP and per user,
//     and verified PLAIN passwords cached briefly (sasl_guard.go).
//
// The state lives in conn.sasl and is touched only by the connection's
// reader goroutine: the gate runs there, and both handlers are ordered
// (not blocking) handlers, which run there too.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/xdg-go/scram"

	"millrace/broker/users"
)

// API keys of the SASL requests.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// maxSASLMessageBytes bounds one client SASL message. A SCRAM message is
// under 300 bytes plus the user name; a PLAIN one is the user name and
// password. Larger is not a client speaking the mechanism.
const maxSASLMessageBytes = 16 << 10

// saslState is a connection's authentication progress.
type saslState struct {
	// mechanism is the one chosen by the handshake in progress; empty
	// when no handshake is waiting for its exchange.
	mechanism string
	// raw marks a version 0 handshake: the exchange follows as raw frames.
	raw bool
	// scram is the SCRAM exchange in progress; clientFirst and
	// serverFirst its first two messages (for users.VerifyClientFinal).
	scram                    *scram.ServerConversation
	clientFirst, serverFirst string
	// authenticated is set once an exchange succeeded; authMechanism and
	// user are what it established, which a re-authentication must keep.
	authenticated bool
	authMechanism string
	user          string
	// expires is when the session ends (KIP-368); zero for never.
	expires time.Time
	// failed is set by a failed authentication: the connection is closed
	// at its next request.
	failed bool
}

// errAuthentication is a failed authentication; its text is sent to the
// client.
type errAuthentication struct {
	msg string
	// throttled: the client's IP or the user was over its failure limit,
	// so nothing was checked (sasl_guard.go).
	throttled bool
	// padded: no password was checked, so the answer also waits what a
	// check would have taken.
	padded bool
}

func (e *errAuthentication) Error() string { return e.msg }

func authFailed(format string, args ...any) error {
	return &errAuthentication{msg: fmt.Sprintf(format, args...)}
}

// saslGate decides whether r may be served: nil, or the reason to close
// the connection instead. Listeners without SASL pass everything.
func (c *conn) saslGate(r *request) error {
	if !c.protocol.usesSASL() {
		return nil
	}
	s := &c.sasl
	if s.failed {
		return closef("request after a failed SASL authentication")
	}
	switch r.key {
	case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		return nil
	}
	if !s.authenticated {
		return closef("API key %d before SASL authentication", r.key)
	}
	if !s.expires.IsZero() && !time.Now().Before(s.expires) {
		return closef("SASL session of %s expired without re-authentication (connections.max.reauth.ms)", s.user)
	}
	return nil
}

// checkUnauthenticatedSize refuses, on a SASL listener before the client
// has authenticated, a frame larger than sasl.server.max.receive.size.
func (c *conn) checkUnauthenticatedSize(size int32) error {
	if limit := c.b.cfg.SASL.ServerMaxReceiveSize; c.protocol.usesSASL() && !c.sasl.authenticated && size > limit {
		return closef("request of %d bytes before SASL authentication is larger than sasl.server.max.receive.size %d", size, limit)
	}
	return nil
}

// saslComponent holds the credential cache and a SCRAM server per
// mechanism.
type saslComponent struct {
	cache   *users.Cache
	servers map[string]*scram.Server
	guard   *saslGuard
}

// openSASL opens b's SASL part (Broker.sasl); nil without a coordination
// store: no store, no credentials, so SASL fails closed.
func openSASL(b *Broker) (*saslComponent, error) {
	if b.store == nil {
		return nil, nil
	}
	sc := &saslComponent{cache: users.NewCache(b.store, b.logger.With("component", "users")), servers: map[string]*scram.Server{},
		guard: newSASLGuard(b.cfg.SASL, nil)}
	for _, m := range users.Mechanisms {
		hash, _ := users.Hash(m)
		server, err := hash.NewServer(func(user string) (scram.StoredCredentials, error) {
			if users.CheckName(user) != nil {
				return scram.StoredCredentials{}, errors.New("invalid user name")
			}
			cred, ok := sc.cache.Lookup(user, m)
			if !ok {
				return scram.StoredCredentials{}, errors.New("unknown user")
			}
			return cred.Stored(), nil
		})
		if err != nil {
			return nil, err
		}
		sc.servers[m] = server
	}
	return sc, nil
}

func (sc *saslComponent) start()       { sc.cache.Start() }
func (sc *saslComponent) Close() error { return sc.cache.Close() }

// saslStep feeds one client message to the chosen mechanism and returns
// the server's reply. An *errAuthentication is a failed authentication;
// it has been counted, logged and delayed.
func (c *conn) saslStep(ctx context.Context, msg []byte) ([]byte, error) {
	s := &c.sasl
	mechanism := s.mechanism
	reply, user, done, err := c.saslExchange(msg)
	if err == nil && done {
		err = c.saslComplete(user)
	}
	if err != nil {
		c.saslFail(ctx, mechanism, user, err)
		return nil, err
	}
	return reply, nil
}

// saslExchange runs one step of the mechanism: the reply, and once done
// the authenticated user.
func (c *conn) saslExchange(msg []byte) (reply []byte, user string, done bool, err error) {
	s := &c.sasl
	if len(msg) > maxSASLMessageBytes {
		return nil, "", false, authFailed("SASL message of %d bytes is longer than %d", len(msg), maxSASLMessageBytes)
	}
	sc := c.b.sasl
	if sc == nil {
		return nil, "", false, authFailed("no credential store")
	}
	if s.mechanism == mechanismPlain {
		user, err := c.plainLogin(sc, msg)
		return nil, user, true, err
	}
	if s.scram == nil {
		server, ok := sc.servers[s.mechanism]
		if !ok {
			return nil, "", false, authFailed("mechanism %s is not served", s.mechanism)
		}
		s.scram = server.NewConversation()
	}
	if s.serverFirst != "" {
		// The client's proof: checking it is a password guess, limited
		// like PLAIN's (sasl_guard.go). The first step already found the
		// user.
		user := s.scram.Username()
		if !sc.guard.reserve(c.host, user) {
			return nil, user, false, &errAuthentication{msg: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + s.mechanism, throttled: true, padded: true}
		}
		reply, user, done, err := c.scramFinal(sc, msg)
		if err == nil {
			sc.guard.refund(c.host, user)
		}
		return reply, user, done, err
	}
	return c.scramStep(msg)
}

// scramFinal checks the client-final message of a SCRAM exchange.
func (c *conn) scramFinal(sc *saslComponent, msg []byte) (reply []byte, user string, done bool, err error) {
	if users.ExtendedNonce(string(msg), users.ServerNonce(c.sasl.serverFirst)) {
		return c.scramFinalExtended(sc, msg)
	}
	return c.scramStep(msg)
}

// scramStep feeds msg to xdg-go/scram's conversation.
func (c *conn) scramStep(msg []byte) (reply []byte, user string, done bool, err error) {
	s := &c.sasl
	out, err := s.scram.Step(string(msg))
	user = s.scram.Username()
	if err == nil && s.serverFirst == "" {
		s.clientFirst, s.serverFirst = string(msg), out
	}
	if err != nil {
		return nil, user, false, authFailed("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mechanism)
	}
	if !s.scram.Done() {
		return []byte(out), user, false, nil
	}
	if !s.scram.Valid() {
		return nil, user, false, authFailed("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mechanism)
	}
	if authz := s.scram.AuthzID(); authz != "" && authz != user {
		return nil, user, false, authFailed("authorization id %q is not the user name", authz)
	}
	return []byte(out), user, true, nil
}

// scramFinalExtended finishes a SCRAM exchange whose client-final nonce
// extends the server's (librdkafka's form; see users.ExtendedNonce).
func (c *conn) scramFinalExtended(sc *saslComponent, msg []byte) (reply []byte, user string, done bool, err error) {
	s := &c.sasl
	user = s.scram.Username()
	failed := authFailed("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mechanism)
	cred, ok := sc.cache.Lookup(user, s.mechanism)
	if !ok {
		return nil, user, false, failed
	}
	out, err := users.VerifyClientFinal(cred, s.clientFirst, s.serverFirst, string(msg))
	if err != nil {
		return nil, user, false, failed
	}
	if authz := s.scram.AuthzID(); authz != "" && authz != user {
		return nil, user, false, authFailed("authorization id %q is not the user name", authz)
	}
	return []byte(out), user, true, nil
}

// dummyCost is what deriving one credential took at start-up: the first
// estimate of a password check's cost, which saslGuard.measured refines.
var dummyCost = func() time.Duration {
	start := time.Now()
	users.Derive(users.SCRAMSHA512, "", []byte("millrace-no-such-user"), users.MinIterations)
	return time.Since(start)
}()

// plainLogin checks a PLAIN message, "authzid NUL authcid NUL passwd"
// (RFC 4616), against the stored credentials; it returns the user. Only a
// known user with a password not verified moments ago costs a PBKDF2, and
// only while the client's IP and the user have tokens (sasl_guard.go).
func (c *conn) plainLogin(sc *saslComponent, msg []byte) (string, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", authFailed("malformed PLAIN message")
	}
	authz, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if err := users.CheckName(user); err != nil {
		return "", authFailed("Authentication failed: invalid user name")
	}
	if authz != "" && authz != user {
		return user, authFailed("Authentication failed: authorization id %q is not the user name", authz)
	}
	g := sc.guard
	cred, known := sc.cache.LookupAny(user)
	if known && g.verified.Check(user, password, cred) {
		return user, nil
	}
	invalid := &errAuthentication{msg: "Authentication failed: Invalid username or password"}
	bucketUser := ""
	if known {
		// Buckets only for users that exist: names a client makes up
		// cannot grow the table.
		bucketUser = user
	}
	if !g.reserve(c.host, bucketUser) {
		invalid.throttled, invalid.padded = true, true
		return user, invalid
	}
	if !known {
		invalid.padded = true
		return user, invalid
	}
	start := time.Now()
	ok := cred.Verify(password)
	g.measured(time.Since(start))
	if !ok {
		return user, invalid
	}
	g.refund(c.host, bucketUser)
	g.verified.Add(user, password, cred)
	return user, nil
}

// saslComplete records a successful exchange as user.
func (c *conn) saslComplete(user string) error {
	s := &c.sasl
	principal := "User:" + user
	if s.authenticated {
		// KIP-368: re-authentication proves the same identity again.
		if user != s.user {
			return authFailed("re-authentication as %s, not %s: the principal cannot change", user, s.user)
		}
		if s.mechanism != s.authMechanism {
			return authFailed("re-authentication with %s, not %s: the mechanism cannot change", s.mechanism, s.authMechanism)
		}
	}
	if c.principal != principal {
		// First authentication: no other request of this connection has
		// run, so no handler reads principal concurrently.
		c.principal = principal
	}
	s.authenticated, s.authMechanism, s.user = true, s.mechanism, user
	s.mechanism, s.raw, s.scram, s.clientFirst, s.serverFirst = "", false, nil, "", ""
	if reauth := c.b.cfg.SASL.ConnectionsMaxReauth; reauth > 0 {
		s.expires = time.Now().Add(reauth)
	}
	c.b.metrics.saslAuthenticated(s.authMechanism, "ok")
	c.logger.Debug("SASL authenticated", "user", user, "mechanism", s.authMechanism)
	return nil
}

// saslFail counts, logs (sampled) and delays a failed authentication, and
// marks the connection for closing.
func (c *conn) saslFail(ctx context.Context, mechanism, user string, err error) {
	c.sasl.failed = true
	c.sasl.scram, c.sasl.clientFirst, c.sasl.serverFirst = nil, "", ""
	var failed *errAuthentication
	errors.As(err, &failed)
	result := "failed"
	if failed != nil && failed.throttled {
		result = "throttled"
	}
	c.b.metrics.saslAuthenticated(mechanism, result)
	if users.CheckName(user) != nil {
		user = "(not a valid user name)" // client text of any size and bytes
	}
	delay := c.b.cfg.SASL.FailedAuthenticationDelay
	var g *saslGuard
	if c.b.sasl != nil {
		g = c.b.sasl.guard
	}
	if g != nil {
		key := ""
		if _, known := c.b.sasl.cache.LookupAny(user); known {
			key = user
		}
		if unlogged, ok := g.log.allow(key, time.Now(), failureLogBurst, failureLogWindow); ok {
			reason := err.Error()
			if result == "throttled" {
				reason = "too many failed authentications from this IP or for this user; the password was not checked"
			}
			c.logger.Warn("SASL authentication failed", "client", c.remote, "user", user, "mechanism", mechanism,
				"reason", reason, "failures_not_logged_before", unlogged)
		}
		if failed != nil && failed.padded {
			// As long as a check would have taken, so the answer's time
			// tells nothing (sasl_guard.go).
			delay += time.Duration(g.verifyCost.Load())
		}
	} else {
		c.logger.Warn("SASL authentication failed", "client", c.remote, "user", user, "mechanism", mechanism, "reason", err.Error())
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// sessionLifetime is what SaslAuthenticate v1+ reports after a success:
// the time left until re-authentication is due, 0 for none.
func (c *conn) sessionLifetime() int64 {
	if c.sasl.expires.IsZero() {
		return 0
	}
	return max(time.Until(c.sasl.expires).Milliseconds(), 1)
}

// saslMechanismEnabled reports whether m is in sasl.enabled.mechanisms.
func (b *Broker) saslMechanismEnabled(m string) bool {
	return slices.Contains(b.cfg.SASL.EnabledMechanisms, m)
}

// serveRawSASL reads and serves one raw SASL frame of size bytes after a
// version 0 handshake; the reply goes back as a raw size-prefixed frame, in
// order with the responses before it. The frame is read here rather than
// as a request, since it has no request header (and may be shorter than
// one). ok is false when the connection must close, with the reason: a
// failed authentication, which raw framing cannot report, closes it.
func (c *conn) serveRawSASL(size int32, deadline time.Time) (reason string, ok bool) {
	if size < 0 || size > maxSASLMessageBytes {
		reason = fmt.Sprintf("raw SASL frame of %d bytes is outside 0 to %d", size, maxSASLMessageBytes)
		c.closeWith(reason, nil)
		return reason, false
	}
	frame := make([]byte, size)
	if err := c.readBy(frame, deadline); err != nil {
		return c.readFailure(err, "reading a raw SASL frame"), false
	}
	reply, err := c.saslStep(c.ctx, frame)
	if err != nil {
		return "SASL authentication failed", false
	}
	out := make([]byte, 4+len(reply))
	binary.BigEndian.PutUint32(out, uint32(len(reply)))
	copy(out[4:], reply)
	s := &slot{done: make(chan struct{}), out: out}
	close(s.done)
	c.inflight.Add(1)
	select {
	case c.queue <- s:
		return "", true
	case <-c.ctx.Done():
		return "closed", false
	}
}
