package appliance

import (
	"bytes"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"millrace/broker/acl"
	"millrace/broker/coord/embedded"
	"millrace/broker/users"
	"millrace/internal/certs"
)

// TestSecureMaterialMadeOnceAndReused: the first start makes the CA, the
// broker's keystore and a password per user with private modes; the second
// reuses every file unchanged.
func TestSecureMaterialMadeOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "security")
	hosts := []string{"localhost", "127.0.0.1", "broker.example"}
	m, err := ensureSecureMaterial(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if !m.created {
		t.Error("first start: created = false")
	}
	mode := func(path string) os.FileMode {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	if got := mode(dir); got != 0o700 {
		t.Errorf("directory mode %v, want 0700", got)
	}
	private := []string{certs.CAKeyFile, BrokerKeystoreFile}
	seen := map[string]bool{}
	for _, u := range SecureUsers {
		private = append(private, u+PasswordFileSuffix)
		pw := m.passwords[u]
		if len(pw) != 2*passwordBytes || seen[pw] {
			t.Errorf("user %s: password of %d characters (want %d, each user's own)", u, len(pw), 2*passwordBytes)
		}
		seen[pw] = true
	}
	for _, name := range private {
		if got := mode(filepath.Join(dir, name)); got != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, got)
		}
	}
	// The keystore is the CA's server certificate for every host.
	data, err := os.ReadFile(m.keystoreFile())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := keystoreLeaf(data)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(m.caFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: h}); err != nil {
			t.Errorf("broker certificate for %s: %v", h, err)
		}
	}

	before := readAll(t, dir)
	again, err := ensureSecureMaterial(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if again.created {
		t.Error("second start: created = true")
	}
	for _, u := range SecureUsers {
		if again.passwords[u] != m.passwords[u] {
			t.Errorf("user %s: password changed on the second start", u)
		}
	}
	after := readAll(t, dir)
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s changed on the second start", name)
		}
	}
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestSecureMaterialIncompleteOrMismatched: a directory missing one
// password or the CA key is refused naming what is missing; a missing
// keystore is issued again by the kept CA; a keystore for other hosts is
// refused.
func TestSecureMaterialIncompleteOrMismatched(t *testing.T) {
	hosts := []string{"localhost", "127.0.0.1"}
	for _, missing := range []string{SinkUser + PasswordFileSuffix, certs.CAKeyFile} {
		dir := filepath.Join(t.TempDir(), "security")
		if _, err := ensureSecureMaterial(dir, hosts); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, missing)); err != nil {
			t.Fatal(err)
		}
		_, err := ensureSecureMaterial(dir, hosts)
		if err == nil || !strings.Contains(err.Error(), "missing "+missing) {
			t.Errorf("without %s: %v, want a refusal naming it", missing, err)
		}
		if _, statErr := os.Stat(filepath.Join(dir, missing)); statErr == nil {
			t.Errorf("%s was made again", missing)
		}
	}

	dir := filepath.Join(t.TempDir(), "security")
	m, err := ensureSecureMaterial(dir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(m.caFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.keystoreFile()); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureSecureMaterial(dir, append(hosts, "10.1.2.3")); err != nil {
		t.Fatalf("keystore issued again: %v", err)
	}
	if now, _ := os.ReadFile(m.caFile()); !bytes.Equal(now, ca) {
		t.Error("the CA changed when the keystore was issued again")
	}
	_, err = ensureSecureMaterial(dir, append(hosts, "kafka.example"))
	if err == nil || !strings.Contains(err.Error(), "not valid for kafka.example") {
		t.Errorf("keystore without the listen host: %v, want a refusal", err)
	}
}

func TestBrokerHosts(t *testing.T) {
	for listen, want := range map[string][]string{
		"127.0.0.1:9092":      {"localhost", "127.0.0.1"},
		"0.0.0.0:9092":        {"localhost", "127.0.0.1"},
		":9092":               {"localhost", "127.0.0.1"},
		"[::]:9092":           {"localhost", "127.0.0.1"},
		"10.1.2.3:9092":       {"localhost", "127.0.0.1", "10.1.2.3"},
		"kafka.example:19092": {"localhost", "127.0.0.1", "kafka.example"},
	} {
		got, err := brokerHosts(listen)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("brokerHosts(%q) = %v, %v; want %v", listen, got, err, want)
		}
	}
	if _, err := brokerHosts("9092"); err == nil {
		t.Error("brokerHosts(\"9092\") accepted an address without a host part")
	}
}

const secureTestConfig = `
security: on
tail:
  - name: app
    paths: [/var/log/app.log]
    topic: logs
beacon: {}
sinks:
  - name: clicks
    out: lake
    topics: [clicks]
    schema: click
  - name: logs
    out: logs
    topics: [logs]
    schema: log
`

// TestSecureACLs is the whole ACL set of a configuration with a tailer, the
// beacon, the syslog receiver and the OTLP receiver (on by default), two
// sinks, the ops publisher and the audit: each user gets what
// its component does and nothing more.
func TestSecureACLs(t *testing.T) {
	c := decodeConfig(t, secureTestConfig).withDefaults()
	var got []string
	for _, b := range secureACLs(c) {
		got = append(got, b.Entry.Principal+" "+b.Entry.Operation.String()+" "+b.Pattern.Type.String()+":"+b.Pattern.Name)
		if b.Pattern.PatternType != acl.Literal || b.Entry.Host != acl.Wildcard || b.Entry.Permission != acl.Allow {
			t.Errorf("%v: want LITERAL, any host, Allow", b)
		}
	}
	slices.Sort(got)
	want := []string{
		"User:millrace-beacon IdempotentWrite Cluster:kafka-cluster",
		"User:millrace-beacon Write Topic:_millrace.audit",
		"User:millrace-beacon Write Topic:_millrace.metrics",
		"User:millrace-beacon Write Topic:clicks",
		"User:millrace-beacon Write Topic:clicks.dlq",
		"User:millrace-beacon Write Topic:ops.metrics",
		"User:millrace-beacon Write Topic:ops.metrics.dlq",
		"User:millrace-beacon Write Topic:otlp_logs",
		"User:millrace-beacon Write Topic:otlp_metrics",
		"User:millrace-beacon Write Topic:otlp_spans",
		"User:millrace-beacon Write Topic:syslog",
		"User:millrace-console Describe Cluster:kafka-cluster",
		"User:millrace-console Describe Group:*",
		"User:millrace-console Describe Topic:*",
		"User:millrace-console Read Topic:_millrace.audit",
		"User:millrace-console Read Topic:_millrace.metrics",
		"User:millrace-console Read Topic:ops.metrics",
		"User:millrace-sink Create Topic:_millrace.audit",
		"User:millrace-sink Create Topic:clicks.dlq",
		"User:millrace-sink Create Topic:logs.dlq",
		"User:millrace-sink IdempotentWrite Cluster:kafka-cluster",
		"User:millrace-sink Read Group:millrace-sink-clicks",
		"User:millrace-sink Read Group:millrace-sink-logs",
		"User:millrace-sink Read Topic:_millrace.audit",
		"User:millrace-sink Read Topic:clicks",
		"User:millrace-sink Read Topic:logs",
		"User:millrace-sink Write Topic:_millrace.audit",
		"User:millrace-sink Write Topic:clicks.dlq",
		"User:millrace-sink Write Topic:logs.dlq",
		"User:millrace-tail IdempotentWrite Cluster:kafka-cluster",
		"User:millrace-tail Write Topic:_millrace.audit",
		"User:millrace-tail Write Topic:logs",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ACLs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestProvisionStore: users and ACLs are written once (a second run
// changes nothing), and a component's ACLs for a topic no longer
// configured are removed.
func TestProvisionStore(t *testing.T) {
	data := t.TempDir()
	m, err := ensureSecureMaterial(filepath.Join(data, SecurityDirName), []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(data, "broker", "coord")
	logger := slog.New(slog.DiscardHandler)
	c := decodeConfig(t, secureTestConfig).withDefaults()
	if err := provisionStore(storeDir, m, secureACLs(c), logger); err != nil {
		t.Fatal(err)
	}
	first := readStore(t, storeDir)
	for _, u := range SecureUsers {
		cred, ok := first.creds[u]
		if !ok || !cred.Verify(m.passwords[u]) {
			t.Errorf("user %s: no credential that verifies the password file", u)
		}
	}
	if !slices.Equal(first.acls, bindingStrings(secureACLs(c))) {
		t.Errorf("stored ACLs %v, want %v", first.acls, bindingStrings(secureACLs(c)))
	}
	if err := provisionStore(storeDir, m, secureACLs(c), logger); err != nil {
		t.Fatal(err)
	}
	second := readStore(t, storeDir)
	for _, u := range SecureUsers {
		if !bytes.Equal(second.creds[u].Salt, first.creds[u].Salt) {
			t.Errorf("user %s: credential rewritten on the second run", u)
		}
	}
	if !slices.Equal(second.acls, first.acls) {
		t.Errorf("second run changed the ACLs: %v", second.acls)
	}

	c.Sinks = c.Sinks[:1] // the logs sink goes
	c.Tail = nil
	if err := provisionStore(storeDir, m, secureACLs(c), logger); err != nil {
		t.Fatal(err)
	}
	third := readStore(t, storeDir)
	if !slices.Equal(third.acls, bindingStrings(secureACLs(c))) {
		t.Errorf("after dropping a sink and the tailer: %v, want %v", third.acls, bindingStrings(secureACLs(c)))
	}
}

type storeContent struct {
	creds map[string]users.Credential
	acls  []string
}

func readStore(t *testing.T, dir string) storeContent {
	t.Helper()
	server, err := embedded.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	s, err := server.Session()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := storeContent{creds: map[string]users.Credential{}}
	for _, u := range SecureUsers {
		creds, err := users.Get(s, u)
		if err != nil {
			t.Fatalf("user %s: %v", u, err)
		}
		out.creds[u] = creds[SecureMechanism]
	}
	cache, err := acl.OpenCache(s, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	out.acls = bindingStrings(cache.Snapshot().Select(acl.Filter{Type: acl.AnyResource, PatternType: acl.AnyPattern,
		Operation: acl.AnyOperation, Permission: acl.AnyPermission}))
	return out
}

func bindingStrings(bs []acl.Binding) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Pattern.String()+" "+b.Entry.Principal+" "+b.Entry.Operation.String())
	}
	slices.Sort(out)
	return out
}

// TestSecureValidate: security: on refuses what it would override.
func TestSecureValidate(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"security: on\nbrokers: [kafka:9092]\n", "secures the embedded broker"},
		{"security: on\ntls: {ca: /ca.pem}\n", "makes every client's tls: and sasl: itself"},
		{"security: on\nship:\n  sasl: {mechanism: PLAIN, username: u, password: p}\n", "makes every client's tls: and sasl: itself"},
		{"security: on\nbroker:\n  settings: {listeners: 'PLAINTEXT://:9092', super.users: 'User:x'}\n", "listeners, super.users are set by security: on"},
	} {
		err := decodeConfig(t, tc.doc).withDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
	c := decodeConfig(t, "security: on\n").withDefaults()
	if err := c.Validate(); err != nil {
		t.Errorf("security: on alone: %v", err)
	}
	if c.HTTP.Auth.Token != TokenGenerate {
		t.Errorf("http.auth.token = %q, want %q under security: on", c.HTTP.Auth.Token, TokenGenerate)
	}
	c = decodeConfig(t, "security: on\nhttp: {auth: {token_file: /etc/token}}\n").withDefaults()
	if c.HTTP.Auth.Token != "" {
		t.Errorf("with a token_file, http.auth.token = %q, want none generated", c.HTTP.Auth.Token)
	}
}
