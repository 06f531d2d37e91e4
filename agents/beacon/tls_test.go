package beacon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/agents/ship"
	"millrace/internal/certs"
	"millrace/internal/httpserver"
)

// With tls set, Start serves the ingest and metrics listeners over HTTPS
// with the PEM file's certificate, and plain HTTP is refused.
func TestStartServesTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "beacon test CA")
	if err != nil {
		t.Fatal(err)
	}
	pem := filepath.Join(dir, "beacon.pem")
	if _, err := ca.Issue(pem, certs.Options{CommonName: "beacon", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: certs.Server}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", TLS: &httpserver.TLSConfig{Cert: pem}}, ship.Config{})
	if err := h.server.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.server.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	client := &http.Client{Transport: transport}
	defer transport.CloseIdleConnections()
	for _, url := range []string{"https://" + h.server.Addr().String() + "/healthz", "https://" + h.server.MetricsAddr().String() + "/metrics"} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil {
			t.Fatalf("%s: %d, TLS %v", url, resp.StatusCode, resp.TLS != nil)
		}
	}
	plain := &http.Transport{}
	defer plain.CloseIdleConnections()
	resp, err := (&http.Client{Transport: plain}).Get("http://" + h.server.Addr().String() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served on a TLS listener")
		}
	}
	if err := (Config{TLS: &httpserver.TLSConfig{Key: pem}}).WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "cert") {
		t.Fatalf("tls without cert: %v", err)
	}
}
