package httpserver

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
)

// TLSConfig serves HTTPS from PEM files. The files are read once, at start.
type TLSConfig struct {
	// Cert is a PEM file with the server's certificate chain, leaf first.
	// It may hold the private key too (as Kafka's PEM keystore and
	// internal/certs write it), with Key left empty. Required.
	Cert string `yaml:"cert"`
	// Key is a PEM file with the certificate's private key. Default: Cert.
	Key string `yaml:"key"`
}

// Validate rejects a TLS section without a certificate.
func (c *TLSConfig) Validate() error {
	if c != nil && c.Cert == "" {
		return errors.New("tls: cert is required (a PEM file with the certificate chain, and the key unless tls.key is set)")
	}
	return nil
}

// Load reads the certificate and key into a server configuration
// (TLS 1.2 at least). A nil c gives a nil configuration: plain HTTP.
func (c *TLSConfig) Load() (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	key := c.Key
	if key == "" {
		key = c.Cert
	}
	pair, err := tls.LoadX509KeyPair(c.Cert, key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// Listen listens on addr, behind TLS when config is not nil.
func Listen(addr string, config *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || config == nil {
		return ln, err
	}
	return tls.NewListener(ln, config), nil
}

// Scheme is "https" with a TLS configuration and "http" without.
func Scheme(config *tls.Config) string {
	if config != nil {
		return "https"
	}
	return "http"
}

// Loopback reports whether addr only accepts connections from this machine:
// an address in 127.0.0.0/8 or ::1. The unspecified addresses 0.0.0.0 and
// :: accept from anywhere.
func Loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// WarnIfOpen logs a warning when the server what listens at addr beyond
// loopback with no authentication: anyone who can reach the address can
// read what it serves.
func WarnIfOpen(logger *slog.Logger, what string, addr net.Addr, auth bool) {
	if auth || Loopback(addr) {
		return
	}
	logger.Warn("HTTP server listens beyond loopback without authentication: anyone who can reach it can use it; set a token_file or basic_file",
		"server", what, "addr", addr.String())
}

// GenerateToken returns the token kept in path, first making a random one
// (32 bytes from crypto/rand, hex encoded) and writing it with mode 0600
// when the file does not exist. created tells which happened. The file is
// made with O_EXCL and synced before use, so a token once printed survives
// a crash and two starts never write different tokens.
func GenerateToken(path string) (token string, created bool, err error) {
	if token, err := ReadToken(path); err == nil {
		return token, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("http auth: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, fmt.Errorf("http auth: %w", err)
	}
	token = hex.EncodeToString(raw[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("http auth: token file: %w", err)
	}
	_, err = f.WriteString(token + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("http auth: token file: %w", err)
	}
	return token, true, nil
}

// Security is a server's loaded TLS configuration (nil: plain HTTP) and
// authentication (nil: none).
type Security struct {
	TLS  *tls.Config
	Auth *Auth
}

// LoadSecurity reads the PEM files of tlsConfig (nil: plain HTTP) and the
// credential files of auth (none set: no authentication); reg and logger
// are NewAuth's.
func LoadSecurity(tlsConfig *TLSConfig, auth AuthConfig, reg prometheus.Registerer, logger *slog.Logger) (Security, error) {
	var s Security
	var err error
	if s.TLS, err = tlsConfig.Load(); err != nil {
		return s, err
	}
	if auth.On() {
		s.Auth, err = NewAuth(auth, reg, logger)
	}
	return s, err
}

// Protect puts h behind the authentication, when there is one.
func (s Security) Protect(h http.Handler) http.Handler {
	if s.Auth == nil {
		return h
	}
	return s.Auth.Wrap(h)
}

// Listen opens addr for the server what, over TLS when configured, and
// warns on logger when it is open beyond loopback without authentication.
func (s Security) Listen(addr, what string, logger *slog.Logger) (net.Listener, error) {
	ln, err := Listen(addr, s.TLS)
	if err != nil {
		return nil, err
	}
	WarnIfOpen(logger, what, ln.Addr(), s.Auth != nil)
	return ln, nil
}

// Scheme is "https" with TLS and "http" without.
func (s Security) Scheme() string { return Scheme(s.TLS) }
