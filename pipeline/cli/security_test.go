package cli

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"millrace/internal/certs"
)

// TestClientCommandsOverTLSAndSASL runs topic create, produce and consume
// against a cluster that requires a client certificate and SCRAM-SHA-512,
// with the client flags and the password from the environment; a wrong
// password, or no client certificate, fails with one line.
func TestClientCommandsOverTLSAndSASL(t *testing.T) {
	clearClientEnv(t)
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "millrace test CA")
	if err != nil {
		t.Fatal(err)
	}
	serverPEM, clientPEM := filepath.Join(dir, "server.pem"), filepath.Join(dir, "client.pem")
	if _, err := ca.Issue(serverPEM, certs.Options{CommonName: "broker", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: certs.Server}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(clientPEM, certs.Options{CommonName: "cli", Usage: certs.Client}); err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.LoadX509KeyPair(serverPEM, serverPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "s3cret"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots}))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()

	t.Setenv("MILLRACE_BROKERS", strings.Join(cluster.ListenAddrs(), ","))
	t.Setenv("MILLRACE_TLS_CA", ca.CertFile())
	secure := []string{"--tls-cert", clientPEM, "--sasl-mechanism=SCRAM-SHA-512", "--sasl-username", "admin"}
	run := func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(args, strings.NewReader(stdin), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	t.Setenv(passwordEnv, "s3cret")
	if code, out, stderr := run("", append([]string{"topic", "create", "secured", "--partitions", "1"}, secure...)...); code != 0 || !strings.Contains(out, "created topic secured") {
		t.Fatalf("topic create: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := run("hello\n", append(secure, "produce", "secured")...); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, stderr)
	}
	if code, out, stderr := run("", append([]string{"consume", "secured", "--from-beginning", "--max", "1"}, secure...)...); code != 0 || out != "hello\n" {
		t.Fatalf("consume: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	t.Setenv(passwordEnv, "wrong")
	if code, _, stderr := run("", append([]string{"topic", "list"}, secure...)...); code != 1 || strings.Count(stderr, "\n") != 1 ||
		!strings.HasPrefix(stderr, "millrace topic list: cannot reach brokers") {
		t.Errorf("wrong password: exit %d, stderr %q", code, stderr)
	}
	t.Setenv(passwordEnv, "")
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run("", "topic", "list", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "admin", "--sasl-password-file", pwFile); code != 1 ||
		strings.Count(stderr, "\n") != 1 {
		t.Errorf("no client certificate: exit %d, stderr %q", code, stderr)
	}
	if code, out, stderr := run("", "topic", "list", "--tls-cert", clientPEM, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "admin", "--sasl-password-file", pwFile); code != 0 ||
		!strings.Contains(out, "secured") {
		t.Errorf("password from a file: exit %d\n%s%s", code, out, stderr)
	}
}
