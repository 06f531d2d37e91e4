// Package httpserver builds every HTTP server millrace runs (the beacon, the
// appliance's web server, the console, the /metrics listeners) with all four
// of net/http's timeouts set. A server without them keeps a goroutine and a
// connection per client that sends its headers or body a byte at a time
// (slowloris), never reads its answer, or just stays idle.
//
// It also holds what protects those servers: HTTPS from PEM files
// (TLSConfig, Listen), bearer-token and basic-auth checks with a browser
// login (AuthConfig, Auth), the random token `millrace up` generates
// (GenerateToken), and the warning for a server open beyond loopback
// without authentication (WarnIfOpen).
package httpserver

import (
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// Defaults for Timeouts.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	// MaxHeaderBytes caps a request's header block. Go's default is 1 MiB;
	// no client of these servers needs more than a few KiB.
	MaxHeaderBytes = 64 << 10
)

// Timeouts are a server's limits on one connection. Zero means the default.
type Timeouts struct {
	// ReadHeader bounds the time to read a request's headers. Default 5s.
	ReadHeader time.Duration
	// Read bounds the time to read a whole request, body included.
	// Default 30s.
	Read time.Duration
	// Write bounds the time from the end of the request headers to the end
	// of the answer, so it must cover the handler's work. Default 30s.
	Write time.Duration
	// Idle bounds the wait for the next request on a kept-alive
	// connection. Default 2m.
	Idle time.Duration
}

// WithDefaults returns t with every zero timeout set to its default.
func (t Timeouts) WithDefaults() Timeouts {
	if t.ReadHeader == 0 {
		t.ReadHeader = DefaultReadHeaderTimeout
	}
	if t.Read == 0 {
		t.Read = DefaultReadTimeout
	}
	if t.Write == 0 {
		t.Write = DefaultWriteTimeout
	}
	if t.Idle == 0 {
		t.Idle = DefaultIdleTimeout
	}
	return t
}

// Validate rejects negative timeouts: net/http would read a negative value
// as "no timeout", which is what this package exists to prevent.
func (t Timeouts) Validate() error {
	if t.ReadHeader < 0 || t.Read < 0 || t.Write < 0 || t.Idle < 0 {
		return errors.New("HTTP timeouts must not be negative")
	}
	return nil
}

// New returns a server for handler with t's timeouts (defaults applied), a
// 64 KiB header limit, and net/http's own error lines (TLS handshake
// failures, panics) sent to logger at warn level. A nil logger discards them.
func New(handler http.Handler, t Timeouts, logger *slog.Logger) *http.Server {
	t = t.WithDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
