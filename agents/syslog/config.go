package syslog

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// Defaults for Config.
const (
	DefaultTopic           = "syslog"
	DefaultMaxMessageBytes = 64 << 10
	DefaultMaxConnections  = 1024
	DefaultIdleTimeout     = 5 * time.Minute
	DefaultUDPQueue        = 1024
	// maxMessageLimit caps max_message_bytes: a record must still fit a
	// broker's default message size with its JSON around it.
	maxMessageLimit = 512 << 10
)

// Config configures a Server. The zero value of a field means its default;
// call WithDefaults (New does) before reading them. At least one of UDP,
// TCP and TLS must be set.
type Config struct {
	// UDP is the address (host:port) to receive datagrams on, one message
	// each (RFC 5426). Empty: no UDP.
	UDP string `yaml:"udp"`
	// TCP is the address to accept plain TCP connections on (RFC 6587).
	// Empty: no TCP.
	TCP string `yaml:"tcp"`
	// TLS is the address to accept TLS connections on (RFC 5425); it
	// needs TLSCert. Empty: no TLS.
	TLS string `yaml:"tls"`
	// TLSCert is a PEM file with the certificate chain, leaf first; it may
	// hold the key too (as internal/certs writes it).
	TLSCert string `yaml:"tls_cert"`
	// TLSKey is a PEM file with the certificate's key. Default: TLSCert.
	TLSKey string `yaml:"tls_key"`
	// TLSClientCA is a PEM file of CA certificates; when set, a TLS client
	// must present a certificate signed by one of them.
	TLSClientCA string `yaml:"tls_client_ca"`
	// Topic is where records are produced. Default "syslog".
	Topic string `yaml:"topic"`
	// MaxMessageBytes is the longest message kept; a longer one is
	// truncated to it and flagged. Default 64 KiB, at most 512 KiB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// MaxConnections bounds open TCP and TLS connections together; one
	// more is closed at once. Default 1024.
	MaxConnections int `yaml:"max_connections"`
	// IdleTimeout closes a connection that takes longer to send one
	// whole message (or its first, or its TLS handshake). Default 5m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// UDPQueue is how many datagrams wait for the producer; more are
	// dropped and counted. Default 1024.
	UDPQueue int `yaml:"udp_queue"`
	// UDPReadBuffer asks the kernel for a UDP receive buffer of this many
	// bytes (SO_RCVBUF; Linux caps it at net.core.rmem_max), so that a
	// burst waits in the kernel instead of being dropped there. 0: the
	// system's default.
	UDPReadBuffer int `yaml:"udp_read_buffer"`
	// TimeZone names the zone (IANA, e.g. "Europe/Berlin") RFC 3164
	// timestamps, which carry none, are read in. Default: the receiver's
	// local zone.
	TimeZone string `yaml:"time_zone"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.UDPQueue == 0 {
		c.UDPQueue = DefaultUDPQueue
	}
	return c
}

// Validate rejects a configuration the server cannot run with, saying why.
func (c Config) Validate() error {
	var errs []error
	if c.UDP == "" && c.TCP == "" && c.TLS == "" {
		errs = append(errs, errors.New("syslog: set at least one of udp, tcp and tls: the receiver has nothing to listen on"))
	}
	if c.TLS != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("syslog: tls needs tls_cert, a PEM file with the certificate chain (and the key unless tls_key is set)"))
	}
	if c.TLS == "" && (c.TLSCert != "" || c.TLSKey != "" || c.TLSClientCA != "") {
		errs = append(errs, errors.New("syslog: tls_cert, tls_key and tls_client_ca are set but tls (the address to listen on) is not"))
	}
	if c.MaxMessageBytes < 0 || c.MaxMessageBytes > maxMessageLimit {
		errs = append(errs, fmt.Errorf("syslog: max_message_bytes is %d; it must be between 480 (RFC 5426's minimum) and %d", c.MaxMessageBytes, maxMessageLimit))
	} else if c.MaxMessageBytes != 0 && c.MaxMessageBytes < 480 {
		errs = append(errs, fmt.Errorf("syslog: max_message_bytes is %d; every receiver must take messages of 480 bytes (RFC 5426 §3.2)", c.MaxMessageBytes))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("syslog: max_connections is %d; it must be positive (0 means %d)", c.MaxConnections, DefaultMaxConnections))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("syslog: idle_timeout is %s; it must be positive (0 means %s)", c.IdleTimeout, DefaultIdleTimeout))
	}
	if c.UDPQueue < 0 {
		errs = append(errs, fmt.Errorf("syslog: udp_queue is %d; it must be positive (0 means %d)", c.UDPQueue, DefaultUDPQueue))
	}
	if c.UDPReadBuffer < 0 {
		errs = append(errs, fmt.Errorf("syslog: udp_read_buffer is %d; it must be positive (0 means the system's default)", c.UDPReadBuffer))
	}
	if c.TimeZone != "" {
		if _, err := time.LoadLocation(c.TimeZone); err != nil {
			errs = append(errs, fmt.Errorf("syslog: time_zone %q is not a zone name such as \"UTC\" or \"Europe/Berlin\": %w", c.TimeZone, err))
		}
	}
	return errors.Join(errs...)
}

// location is the zone of RFC 3164 timestamps.
func (c Config) location() *time.Location {
	if c.TimeZone == "" {
		return time.Local
	}
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil {
		return time.Local // Validate rejected it already
	}
	return loc
}

// tlsConfig reads the certificate, key and client CA (TLS 1.2 at least).
func (c Config) tlsConfig() (*tls.Config, error) {
	key := c.TLSKey
	if key == "" {
		key = c.TLSCert
	}
	pair, err := tls.LoadX509KeyPair(c.TLSCert, key)
	if err != nil {
		return nil, fmt.Errorf("syslog: reading tls_cert and tls_key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if c.TLSClientCA != "" {
		pem, err := os.ReadFile(c.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("syslog: reading tls_client_ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("syslog: tls_client_ca %s holds no PEM certificate", c.TLSClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
