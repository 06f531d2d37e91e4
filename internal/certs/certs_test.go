package certs

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIssueServesMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	serverPath, clientPath := filepath.Join(dir, "server.pem"), filepath.Join(dir, "client.pem")
	if _, err := ca.Issue(serverPath, Options{CommonName: "broker", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: Server}); err != nil {
		t.Fatal(err)
	}
	clientCert, err := ca.Issue(clientPath, Options{CommonName: "alice", Organization: "acme", Usage: Client})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := clientCert.Subject.String(), "CN=alice,O=acme"; got != want {
		t.Fatalf("subject %q, want %q", got, want)
	}
	for _, p := range []string{serverPath, clientPath, filepath.Join(dir, CAKeyFile)} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, info.Mode().Perm())
		}
	}

	// The keystore layout is key first, then the chain (leaf, CA).
	data, err := os.ReadFile(clientPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "-----BEGIN PRIVATE KEY-----") || strings.Count(string(data), "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("keystore layout:\n%s", data)
	}

	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(ca.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA file holds no certificate")
	}
	serverPair, err := tls.LoadX509KeyPair(serverPath, serverPath)
	if err != nil {
		t.Fatal(err)
	}
	clientPair, err := tls.LoadX509KeyPair(clientPath, clientPath)
	if err != nil {
		t.Fatal(err)
	}
	serverConn, clientConn := net.Pipe()
	defer serverConn.Close()
	defer clientConn.Close()
	server := tls.Server(serverConn, &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert})
	client := tls.Client(clientConn, &tls.Config{Certificates: []tls.Certificate{clientPair}, RootCAs: roots, ServerName: "127.0.0.1"})
	done := make(chan error, 1)
	go func() {
		err := server.Handshake()
		if err == nil {
			_, err = server.Write([]byte("ok"))
		}
		done <- err
	}()
	buf := make([]byte, 2)
	if _, err := io.ReadFull(client, buf); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if peers := server.ConnectionState().PeerCertificates; len(peers) == 0 || peers[0].Subject.String() != "CN=alice,O=acme" {
		t.Fatalf("server saw peer certificates %v", peers)
	}
}

func TestNewCAReloads(t *testing.T) {
	dir := t.TempDir()
	first, err := NewCA(dir, "one")
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewCA(dir, "ignored when the CA exists")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Certificate().Equal(first.Certificate()) {
		t.Fatal("a second NewCA on the same directory made a new CA")
	}
	issued, err := again.Issue(filepath.Join(dir, "c.pem"), Options{CommonName: "c", Usage: Client})
	if err != nil {
		t.Fatal(err)
	}
	if err := issued.CheckSignatureFrom(first.Certificate()); err != nil {
		t.Fatalf("certificate of the reloaded CA: %v", err)
	}

	if err := os.Remove(filepath.Join(dir, CAFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCA(dir, "half"); err == nil {
		t.Fatal("NewCA replaced a CA whose certificate is missing but key is present")
	}
}

func TestIssueRejects(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]Options{
		"no common name":        {DNSNames: []string{"localhost"}},
		"server without names":  {CommonName: "b", Usage: Server},
		"default usage no name": {CommonName: "b"},
		"unknown usage":         {CommonName: "b", DNSNames: []string{"x"}, Usage: 8},
	} {
		if _, err := ca.Issue(filepath.Join(dir, "x.pem"), opts); err == nil {
			t.Errorf("%s: issued", name)
		}
	}
	if _, err := NewCA(t.TempDir(), ""); err == nil {
		t.Error("a CA without a name was made")
	}
}
