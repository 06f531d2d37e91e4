package kafka

// The security state every connection carries: the listener it came in on
// (whose security protocol decides whether TLS and SASL apply) and the
// principal it acts as. listeners.go binds the listeners, sasl.go
// authenticates, and the authorizer (authorize.go) decides per request what
// the principal may do.

// securityProtocol is a listener's security protocol, as Kafka names them in
// listener.security.protocol.map.
type securityProtocol string

const (
	protocolPlaintext     securityProtocol = "PLAINTEXT"
	protocolSSL           securityProtocol = "SSL"
	protocolSASLPlaintext securityProtocol = "SASL_PLAINTEXT"
	protocolSASLSSL       securityProtocol = "SASL_SSL"
)

// usesTLS reports whether connections are TLS from their first byte.
func (p securityProtocol) usesTLS() bool { return p == protocolSSL || p == protocolSASLSSL }

// usesSASL reports whether a connection must authenticate with SASL before
// any request but ApiVersions, SaslHandshake and SaslAuthenticate.
func (p securityProtocol) usesSASL() bool {
	return p == protocolSASLPlaintext || p == protocolSASLSSL
}

// anonymous is the principal of a connection that has not authenticated
// (PLAINTEXT, or SSL without a client certificate), as in Kafka.
const anonymous = "User:ANONYMOUS"
