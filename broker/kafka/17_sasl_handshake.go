package kafka

// SaslHandshake (key 17), versions 0–1.
//
// Picks the SASL mechanism of a connection on a SASL_PLAINTEXT or SASL_SSL
// listener (sasl.go describes the whole flow). The answer always lists
// sasl.enabled.mechanisms. A mechanism not enabled gets
// UNSUPPORTED_SASL_MECHANISM, and the client may try another. After
// version 1 the exchange follows in SaslAuthenticate requests; after
// version 0 as raw SASL frames (clients older than KIP-152).
//
// ILLEGAL_SASL_STATE answers a handshake on a listener without SASL (as
// Kafka does), a second handshake before the first one's exchange, and a
// re-authentication (KIP-368: a handshake on an authenticated connection)
// that uses version 0, which cannot carry it, or another mechanism than
// the first authentication.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(saslHandshakeKey, 0, 1, handleSASLHandshake) }

func handleSASLHandshake(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = b.cfg.SASL.EnabledMechanisms
	c := r.conn
	if c == nil || !c.protocol.usesSASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	s := &c.sasl
	switch {
	case s.mechanism != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	case !b.saslMechanismEnabled(req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, nil
	case s.authenticated && (r.version == 0 || req.Mechanism != s.authMechanism):
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	s.mechanism, s.raw = req.Mechanism, r.version == 0
	s.scram, s.clientFirst, s.serverFirst = nil, "", ""
	return resp, nil
}
