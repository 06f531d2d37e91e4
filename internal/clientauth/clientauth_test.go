package clientauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/certs"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		want []string // substrings of the error; none: valid
	}{
		{name: "zero is plaintext", s: Settings{}},
		{name: "tls with system roots", s: Settings{TLS: &TLS{}}},
		{name: "cert holding its key", s: Settings{TLS: &TLS{Cert: "both.pem"}}},
		{name: "key without cert", s: Settings{TLS: &TLS{Key: "k.pem"}}, want: []string{"tls: key is set without cert"}},
		{name: "scram", s: Settings{SASL: &SASL{Mechanism: "SCRAM-SHA-512", Username: "u", Password: "p"}}},
		{name: "password file", s: Settings{SASL: &SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: "f"}}},
		{name: "unknown mechanism", s: Settings{SASL: &SASL{Mechanism: "GSSAPI", Username: "u", Password: "p"}},
			want: []string{`mechanism "GSSAPI" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`}},
		{name: "lower-case mechanism", s: Settings{SASL: &SASL{Mechanism: "plain", Username: "u", Password: "p"}},
			want: []string{`mechanism "plain"`}},
		{name: "no user", s: Settings{SASL: &SASL{Mechanism: "PLAIN", Password: "p"}}, want: []string{"sasl: username is empty"}},
		{name: "no password", s: Settings{SASL: &SASL{Mechanism: "PLAIN", Username: "u"}},
			want: []string{"set exactly one of password and password_file"}},
		{name: "both passwords", s: Settings{SASL: &SASL{Mechanism: "PLAIN", Username: "u", Password: "p", PasswordFile: "f"}},
			want: []string{"set exactly one of password and password_file"}},
		{name: "every problem at once", s: Settings{TLS: &TLS{Key: "k"}, SASL: &SASL{}},
			want: []string{"key is set without cert", "mechanism", "username is empty", "exactly one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", tc.s)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, oerr := tc.s.Opts(); oerr == nil {
				t.Error("Opts accepted settings Validate rejects")
			}
		})
	}
}

func TestInherit(t *testing.T) {
	parentTLS := &TLS{CA: "ca.pem"}
	parentSASL := &SASL{Mechanism: "PLAIN", Username: "admin", Password: "a"}
	ownSASL := &SASL{Mechanism: "SCRAM-SHA-512", Username: "tail", Password: "t"}
	parent := Settings{TLS: parentTLS, SASL: parentSASL}

	got := Settings{SASL: ownSASL}.Inherit(parent)
	if got.TLS != parentTLS || got.SASL != ownSASL {
		t.Errorf("own sasl, parent tls: got %+v", got)
	}
	got = Settings{}.Inherit(parent)
	if got.TLS != parentTLS || got.SASL != parentSASL {
		t.Errorf("nothing own: got %+v", got)
	}
	ownTLS := &TLS{CA: "other.pem"}
	got = Settings{TLS: ownTLS}.Inherit(Settings{})
	if got.TLS != ownTLS || got.SASL != nil {
		t.Errorf("empty parent: got %+v", got)
	}
	if !(Settings{}).IsZero() || got.IsZero() {
		t.Error("IsZero")
	}
}

func TestOpts(t *testing.T) {
	dir := t.TempDir()
	passFile := filepath.Join(dir, "pass")
	if err := os.WriteFile(passFile, []byte("s3cret\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	opts, err := Settings{}.Opts()
	if err != nil || len(opts) != 0 {
		t.Errorf("zero settings: %d options, %v", len(opts), err)
	}
	opts, err = Settings{TLS: &TLS{}, SASL: &SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: passFile}}.Opts()
	if err != nil || len(opts) != 2 {
		t.Errorf("tls and sasl: %d options, %v", len(opts), err)
	}

	for _, tc := range []struct {
		name string
		s    Settings
		want string
	}{
		{"missing CA", Settings{TLS: &TLS{CA: missing}}, "tls: reading the CA file"},
		{"CA without PEM", Settings{TLS: &TLS{CA: notPEM}}, "holds no PEM certificate"},
		{"missing cert", Settings{TLS: &TLS{Cert: missing}}, "tls: loading the client certificate"},
		{"cert that is no certificate", Settings{TLS: &TLS{Cert: notPEM, Key: notPEM}}, "tls: loading the client certificate"},
		{"missing password file", Settings{SASL: &SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: missing}}, "sasl: reading the password file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.s.Opts(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Opts: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestTLSConfig(t *testing.T) {
	cfg, err := TLS{ServerName: "broker.example"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServerName != "broker.example" || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs != nil || len(cfg.Certificates) != 0 {
		t.Errorf("config %+v: want the server name, TLS 1.2 at least, the system's roots and no client certificate", cfg)
	}
}

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pass")
	// Only the line ending goes: spaces may be part of a password.
	if err := os.WriteFile(f, []byte(" pa ss \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := (SASL{PasswordFile: f}).Secret(); err != nil || got != " pa ss " {
		t.Errorf("Secret from file = %q, %v", got, err)
	}
	if got, err := (SASL{Password: "inline"}).Secret(); err != nil || got != "inline" {
		t.Errorf("Secret inline = %q, %v", got, err)
	}
}

// TestSASLAgainstBroker authenticates with each mechanism against a
// broker that requires SASL, and checks that a wrong password is refused.
func TestSASLAgainstBroker(t *testing.T) {
	t.Parallel()
	for _, mech := range Mechanisms {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "admin", "right"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			user := func(password string) Settings {
				return Settings{SASL: &SASL{Mechanism: mech, Username: "admin", Password: password}}
			}
			if err := ping(t, c, user("right")); err != nil {
				t.Errorf("right password: %v", err)
			}
			if err := ping(t, c, user("wrong")); err == nil {
				t.Error("a wrong password was accepted")
			}
		})
	}
}

// ping connects to the cluster with the settings and asks for metadata.
func ping(t *testing.T, c *kfake.Cluster, s Settings) error {
	t.Helper()
	opts, err := s.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestTLSAgainstBroker connects to a TLS broker that requires client
// certificates: with the CA and a client certificate it works; without
// the certificate, without the CA, or expecting another server name it
// does not.
func TestTLSAgainstBroker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certs.NewCA(filepath.Join(dir, "ca"), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	serverFile, clientFile := filepath.Join(dir, "broker.pem"), filepath.Join(dir, "client.pem")
	if _, err := ca.Issue(serverFile, certs.Options{CommonName: "broker", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}, Usage: certs.Server}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(clientFile, certs.Options{CommonName: "tail", Usage: certs.Client}); err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.LoadX509KeyPair(serverFile, serverFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// The keystore holds key and chain in one file, so key may be empty.
	if err := ping(t, c, Settings{TLS: &TLS{CA: ca.CertFile(), Cert: clientFile}}); err != nil {
		t.Errorf("CA and client certificate: %v", err)
	}
	if err := ping(t, c, Settings{TLS: &TLS{CA: ca.CertFile(), Cert: clientFile, Key: clientFile, ServerName: "localhost"}}); err != nil {
		t.Errorf("server name localhost: %v", err)
	}
	for name, s := range map[string]Settings{
		"no client certificate": {TLS: &TLS{CA: ca.CertFile()}},
		"system roots":          {TLS: &TLS{Cert: clientFile}},
		"other server name":     {TLS: &TLS{CA: ca.CertFile(), Cert: clientFile, ServerName: "elsewhere.example"}},
		"plaintext":             {},
	} {
		if err := ping(t, c, s); err == nil {
			t.Errorf("%s: connected", name)
		}
	}
}
