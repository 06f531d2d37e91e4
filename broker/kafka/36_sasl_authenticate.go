package kafka

// SaslAuthenticate (key 36), versions 0–2.
//
// Carries one message of the SASL exchange the last SaslHandshake (v1)
// chose; sasl.go runs the mechanism. PLAIN is one round; SCRAM two (the
// client's first and final messages). A failed exchange gets
// SASL_AUTHENTICATION_FAILED with a message, after
// connection.failed.authentication.delay.ms, and the connection is closed
// at its next request. On success v1+ reports session_lifetime_ms (KIP-368):
// the time until re-authentication is due when connections.max.reauth.ms
// is set, else 0.
//
// ILLEGAL_SASL_STATE answers a request on a listener without SASL and one
// with no handshake before it (or after a version 0 handshake, whose
// exchange uses raw frames).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(saslAuthenticateKey, 0, 2, handleSASLAuthenticate) }

func handleSASLAuthenticate(ctx context.Context, _ *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.conn
	if c == nil || !c.protocol.usesSASL() || c.sasl.mechanism == "" || c.sasl.raw {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = strp("SaslAuthenticate is not expected here: no SaslHandshake version 1 precedes it")
		return resp, nil
	}
	reply, err := c.saslStep(ctx, req.SASLAuthBytes)
	var failed *errAuthentication
	if errors.As(err, &failed) {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = strp(failed.msg)
		return resp, nil
	}
	if err != nil {
		return nil, err
	}
	resp.SASLAuthBytes = reply
	if c.sasl.mechanism == "" { // the exchange completed
		resp.SessionLifetimeMillis = c.sessionLifetime()
	}
	return resp, nil
}
