// Package srtest starts millrace's schema registry (schemas/registry) in
// the test's process, over an in-memory log and with the real schema
// languages, for the tests of what uses the registry through
// schemas/srclient: the client itself, the CLI, the beacon, the sinks.
// Tests only.
package srtest

import (
	"context"
	"crypto/subtle"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"millrace/schemas/format/languages"
	"millrace/schemas/registry"
)

// Registry is one registry serving on a loopback httptest server until the
// test ends.
type Registry struct {
	// URL is the base URL of its REST API.
	URL string
	// Server is the registry, for what a test needs beyond HTTP.
	Server *registry.Server
	// CAFile is, with the TLS option, a PEM file of the certificate
	// that signs the server's; "" without it.
	CAFile string
	http   *httptest.Server
}

// Option changes how the registry is started.
type Option func(*options)

type options struct {
	cfg registry.Config
	tls bool
}

// BasicAuth makes the registry require HTTP basic auth as user with
// password; that user may do everything.
func BasicAuth(user, password string) Option {
	return func(o *options) { o.cfg.Auth = basicAuth{user, password} }
}

// TLS serves https, with a certificate Registry.CAFile verifies.
func TLS() Option {
	return func(o *options) { o.tls = true }
}

// Start starts a registry, primary over a fresh MemoryLog, and stops it
// when the test ends.
func Start(t testing.TB, opts ...Option) *Registry {
	t.Helper()
	o := options{cfg: registry.Config{Types: languages.All()}}
	for _, opt := range opts {
		opt(&o)
	}
	srv := registry.New(o.cfg, registry.NewMemoryLog(), primary{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	if err := srv.CatchUp(ctx); err != nil {
		cancel()
		<-done
		t.Fatalf("srtest: the registry did not catch up: %v", err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	caFile := ""
	if o.tls {
		hs.StartTLS()
		caFile = filepath.Join(t.TempDir(), "registry-ca.pem")
		block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
		if err := os.WriteFile(caFile, block, 0o600); err != nil {
			t.Fatalf("srtest: %v", err)
		}
	} else {
		hs.Start()
	}
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("srtest: registry Run: %v", err)
		}
	})
	return &Registry{URL: hs.URL, Server: srv, CAFile: caFile, http: hs}
}

// Close stops serving HTTP before the test ends, so a test can see what a
// client does when the registry is gone.
func (r *Registry) Close() { r.http.Close() }

// primary is an election this process always wins.
type primary struct{}

func (primary) Primary() (bool, string) { return true, "" }

// basicAuth lets one user do everything.
type basicAuth struct{ user, password string }

func (a basicAuth) Authenticate(r *http.Request) (string, error) {
	user, password, ok := r.BasicAuth()
	if !ok {
		return "", errors.New("no credentials")
	}
	if subtle.ConstantTimeCompare([]byte(user), []byte(a.user)) != 1 ||
		subtle.ConstantTimeCompare([]byte(password), []byte(a.password)) != 1 {
		return "", errors.New("wrong user or password")
	}
	return user, nil
}

func (basicAuth) Authorize(string, registry.Operation, string) bool { return true }
