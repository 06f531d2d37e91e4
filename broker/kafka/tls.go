package kafka

// TLS for SSL and SASL_SSL listeners and for the inter-broker clients to an
// SSL or SASL_SSL inter-broker listener, from Kafka's PEM settings:
// ssl.keystore.location is one file holding the private key and the
// certificate chain, ssl.truststore.location one of CA certificates, and
// ssl.client.auth whether clients are asked for certificates. The files are
// read once, when the broker is built.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"net"
	"os"
	"strings"
)

// parseClientAuth maps ssl.client.auth to Go's client-certificate policy.
func parseClientAuth(v string) (tls.ClientAuthType, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "none":
		return tls.NoClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("ssl.client.auth %q must be none, requested or required", v)
}

// tlsConfigs are the broker's TLS settings, loaded from the PEM files.
type tlsConfigs struct {
	// server serves SSL and SASL_SSL listeners; nil when there are none.
	server *tls.Config
	// client dials other brokers' TLS inter-broker listeners: it trusts the
	// truststore (the system's roots without one) and presents the
	// keystore, if any, as the client certificate.
	client *tls.Config
}

// loadTLS reads the keystore and truststore; serving is whether a listener
// uses TLS.
func loadTLS(cfg Config, serving bool) (tlsConfigs, error) {
	var out tlsConfigs
	var certs []tls.Certificate
	if cfg.SSLKeystoreLocation != "" {
		// tls.X509KeyPair takes the certificates and the key from one
		// PEM file alike, skipping the other blocks.
		pair, err := tls.LoadX509KeyPair(cfg.SSLKeystoreLocation, cfg.SSLKeystoreLocation)
		if err != nil {
			return out, fmt.Errorf("ssl.keystore.location %s (an unencrypted private key and certificates, PEM): %w", cfg.SSLKeystoreLocation, err)
		}
		certs = []tls.Certificate{pair}
	}
	var roots *x509.CertPool
	if cfg.SSLTruststoreLocation != "" {
		data, err := os.ReadFile(cfg.SSLTruststoreLocation)
		if err != nil {
			return out, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(data) {
			return out, fmt.Errorf("ssl.truststore.location %s holds no PEM certificate", cfg.SSLTruststoreLocation)
		}
	}
	out.client = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: certs}
	if serving {
		clientAuth, err := parseClientAuth(cfg.SSLClientAuth)
		if err != nil {
			return out, err
		}
		out.server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: certs, ClientAuth: clientAuth, ClientCAs: roots}
	}
	return out, nil
}

// tlsServer wraps an accepted connection of a TLS listener; the handshake
// happens on the connection's goroutine (conn.handshake).
func (b *Broker) tlsServer(nc net.Conn) net.Conn { return tls.Server(nc, b.tls.server) }

// handshake completes a TLS connection's handshake within
// millrace.request.read.timeout.ms and takes the principal from the
// client certificate, if one was presented. Plain connections pass.
func (c *conn) handshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.b.cfg.RequestReadTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	if peers := tc.ConnectionState().PeerCertificates; len(peers) > 0 {
		c.principal = certificatePrincipal(peers[0])
	}
	c.logger.Debug("TLS handshake done", "principal", c.principal)
	return nil
}

// certificatePrincipal is Kafka's default principal of a client
// certificate: "User:" and the subject as an RFC 2253 string, most specific
// attribute first ("User:CN=alice,O=acme"). It formats the subject as
// encoded, so the attribute order is the certificate's.
func certificatePrincipal(cert *x509.Certificate) string {
	var subject pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &subject); err == nil && len(rest) == 0 {
		return "User:" + subject.String()
	}
	return "User:" + cert.Subject.String()
}
