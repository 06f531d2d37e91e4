package kafka

// The client side of SASL, for the replication connections this broker
// opens to a leader whose inter-broker listener is SASL_PLAINTEXT or
// SASL_SSL: SaslHandshake v1, then SaslAuthenticate v1 messages until the
// mechanism is done, as any Kafka client does (KIP-152). The mechanism is
// sasl.mechanism.inter.broker.protocol, the user and password
// millrace.inter.broker.sasl.username and .password.file; the exchange
// itself is franz-go's (pkg/sasl, through internal/clientauth).
//
// When the leader reports a session lifetime (its connections.max.reauth.ms,
// KIP-368), the connection authenticates again before its next request once
// 85% of the lifetime has passed, as Kafka's clients do between 85% and
// 95%, so the leader never has to close it.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/clientauth"
)

// saslClientTimeout bounds each round of a replication connection's
// authentication.
const saslClientTimeout = 10 * time.Second

// replicaSession is a replication connection's SASL session.
type replicaSession struct {
	b       *Broker
	renewAt time.Time
}

// renew re-authenticates c when its session is due; a nil session never is.
func (s *replicaSession) renew(c *replicaConn) error {
	if s == nil || time.Now().Before(s.renewAt) {
		return nil
	}
	c.session = nil // the exchange's own requests must not renew
	return s.b.authenticateReplica(c)
}

// authenticateReplica authenticates c as this broker's inter-broker user.
// The password file is read on every authentication, so a rotated
// password is used from the next one on.
func (b *Broker) authenticateReplica(c *replicaConn) error {
	cfg := b.cfg.SASL
	if cfg.InterBrokerUsername == "" {
		return errors.New("the leader's inter-broker listener uses SASL and millrace.inter.broker.sasl.username is not set")
	}
	mechanism, err := clientauth.SASL{Mechanism: cfg.InterBrokerMechanism, Username: cfg.InterBrokerUsername, PasswordFile: cfg.InterBrokerPasswordFile}.Authenticator()
	if err != nil {
		return err
	}
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.SetVersion(1)
	handshake.Mechanism = mechanism.Name()
	handshakeResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.do(handshake, handshakeResp, saslClientTimeout); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(handshakeResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s: %w (the leader offers %v)", mechanism.Name(), err, handshakeResp.SupportedMechanisms)
	}
	ctx, cancel := context.WithTimeout(b.ctx, saslClientTimeout)
	defer cancel()
	session, msg, err := mechanism.Authenticate(ctx, "")
	if err != nil {
		return err
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.do(req, resp, saslClientTimeout); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return fmt.Errorf("SaslAuthenticate as %s: %w: %s", cfg.InterBrokerUsername, err, *resp.ErrorMessage)
			}
			return fmt.Errorf("SaslAuthenticate as %s: %w", cfg.InterBrokerUsername, err)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			if lifetime := time.Duration(resp.SessionLifetimeMillis) * time.Millisecond; lifetime > 0 {
				c.session = &replicaSession{b: b, renewAt: time.Now().Add(lifetime * 85 / 100)}
			}
			return nil
		}
		msg = next
	}
}
