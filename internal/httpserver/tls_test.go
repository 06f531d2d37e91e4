package httpserver

import (
	"net"
	"path/filepath"
	"testing"

	"millrace/internal/certs"
)

// Load reads a PEM file holding the key and the chain (tls.key empty) as
// well as separate files, and refuses a key that does not match.
func TestTLSLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	one, other := filepath.Join(dir, "one.pem"), filepath.Join(dir, "other.pem")
	for _, p := range []string{one, other} {
		if _, err := ca.Issue(p, certs.Options{CommonName: "web", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: certs.Server}); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := (*TLSConfig)(nil).Load(); c != nil || err != nil {
		t.Fatalf("no tls section: %v %v", c, err)
	}
	c, err := (&TLSConfig{Cert: one}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Certificates) != 1 || len(c.Certificates[0].Certificate) != 2 {
		t.Fatalf("want the leaf and the CA certificate, got %+v", c.Certificates)
	}
	if _, err := (&TLSConfig{Cert: one, Key: one}).Load(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]TLSConfig{
		"no cert":      {Key: one},
		"missing file": {Cert: filepath.Join(dir, "absent.pem")},
		"other key":    {Cert: one, Key: other},
		"not PEM":      {Cert: filepath.Join(dir, certs.CAKeyFile)},
	} {
		if _, err := bad.Load(); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
