package broker

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"millrace/broker/users"
	"millrace/internal/waitfor"
	"millrace/schemas/registry"
	"millrace/schemas/registry/brokerauth"
	"millrace/schemas/registry/election"
)

// runRegistryBroker runs a broker with cfg (in a new data directory unless
// one is set, on a free port unless a listener is set) until the test ends.
func runRegistryBroker(t *testing.T, cfg Config) *Broker {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Kafka.Listener == DefaultConfig().Kafka.Listener {
		cfg.Kafka.Listener = "127.0.0.1:0"
	}
	b, stop := runBroker(t, cfg, slog.New(slog.DiscardHandler))
	t.Cleanup(stop)
	return b
}

// primaryURL is the URL in the registry's election node, "" while none.
func primaryURL(b *Broker) string {
	data, _, err := b.store.Get(election.DefaultPath)
	if err != nil {
		return ""
	}
	var n struct{ URL string }
	if json.Unmarshal(data, &n) != nil {
		return ""
	}
	return n.URL
}

// elected reports whether b's registry is primary: it won the node and
// its log's claim (the transactional producer's initialisation through
// the broker's own listener) succeeded.
func elected(b *Broker) bool {
	self, _ := b.schemaRegistry.elect.Primary()
	return self
}

// TestSchemaRegistryServes: with schema.registry.listeners set the broker
// binds the registry's listener, requests reach the registry's handler, and
// the registry wins its election, which needs its log's transactional
// producer initialised through the broker's own listener.
func TestSchemaRegistryServes(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	if err := cfg.Set("schema.registry.listeners", "http://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	b := runRegistryBroker(t, cfg)
	addr := b.SchemaRegistryAddr()
	if addr == nil {
		t.Fatal("no schema registry address")
	}
	resp, err := http.Get("http://" + addr.String() + "/subjects")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The listener serves the registry's handler: the same answer as the
	// handler gives in process.
	rec := httptest.NewRecorder()
	b.schemaRegistry.http.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/subjects", nil))
	if resp.StatusCode != rec.Code {
		t.Fatalf("GET /subjects: %d, want the handler's %d", resp.StatusCode, rec.Code)
	}
	self := "http://127.0.0.1:" + strings.Split(addr.String(), ":")[1]
	waitfor.Until(t, 30*time.Second, "the registry to be elected primary", func() bool { return elected(b) })
	if got := primaryURL(b); got != self {
		t.Fatalf("the primary's node holds %q, want %q", got, self)
	}
	if b2 := (&Broker{}); b2.SchemaRegistryAddr() != nil {
		t.Fatal("a broker without a registry reports an address")
	}

	// The hosted registry serves the languages: one Avro schema under two
	// subjects is one ID, kept in _schemas; a change that drops a field
	// without a default is refused under the default BACKWARD.
	v1 := `{"type":"record","name":"click","fields":[{"name":"url","type":"string"}]}`
	for _, subject := range []string{"clicks-value", "views-value"} {
		if code, body := postSchema(t, self, subject, v1); code != http.StatusOK || body != `{"id":1}` {
			t.Fatalf("register under %s: %d %s, want 200 {\"id\":1}", subject, code, body)
		}
	}
	v2 := `{"type":"record","name":"click","fields":[{"name":"url","type":"string"},{"name":"ref","type":"string"}]}`
	if code, body := postSchema(t, self, "clicks-value", v2); code != http.StatusConflict {
		t.Fatalf("register a field without a default: %d %s, want 409", code, body)
	}
	proto := `syntax = "proto3"; message Click { string url = 1; }`
	if code, body := postTyped(t, self, "clicks-proto", "PROTOBUF", proto); code != http.StatusOK || body != `{"id":2}` {
		t.Fatalf("register a Protobuf schema: %d %s, want {\"id\":2}", code, body)
	}
}

// postSchema registers an Avro schema under subject and returns the
// status and the body.
func postSchema(t *testing.T, base, subject, schema string) (int, string) {
	return postTyped(t, base, subject, "", schema)
}

func postTyped(t *testing.T, base, subject, schemaType, schema string) (int, string) {
	t.Helper()
	body := `{"schema":` + strconv.Quote(schema)
	if schemaType != "" {
		body += `,"schemaType":"` + schemaType + `"`
	}
	resp, err := http.Post(base+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", strings.NewReader(body+"}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(out))
}

// TestSchemaRegistryBasicAuth: with BASIC authentication on a broker whose
// listener needs SASL, the registry writes as the inter-broker user (it is
// elected, so its claim authenticated), and its Auth checks the broker's
// own users and ACLs.
func TestSchemaRegistryBasicAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "admin.password")
	if err := os.WriteFile(passwordFile, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	for name, value := range map[string]string{
		"listeners":                                "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":                  users.SCRAMSHA512,
		"millrace.inter.broker.sasl.username":      "admin",
		"millrace.inter.broker.sasl.password.file": passwordFile,
		"authorizer.class.name":                    "millrace",
		"super.users":                              "User:admin",
		"schema.registry.listeners":                "http://127.0.0.1:0",
		"schema.registry.authentication.method":    "basic",
	} {
		if err := cfg.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	b := runRegistryBroker(t, cfg)
	for user, password := range map[string]string{"admin": "admin-secret", "alice": "alice-secret"} {
		cred, err := users.NewCredential(users.SCRAMSHA512, password, users.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := users.Upsert(b.store, user, cred); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Until(t, 30*time.Second, "the registry to be elected primary as the inter-broker user", func() bool { return elected(b) })

	auth := b.schemaRegistry.auth
	request := func(user, password string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/subjects", nil)
		r.SetBasicAuth(user, password)
		return r
	}
	waitfor.Until(t, 10*time.Second, "alice's credential in the registry's cache", func() bool {
		_, err := auth.Authenticate(request("alice", "alice-secret"))
		return err == nil
	})
	if _, err := auth.Authenticate(request("alice", "wrong")); !errors.Is(err, brokerauth.ErrInvalid) {
		t.Fatalf("wrong password: %v, want ErrInvalid", err)
	}
	if !auth.Authorize("User:alice", registry.OpRead, "s") || auth.Authorize("User:alice", registry.OpWrite, "s") {
		t.Fatal("alice, without grants, must read and not write")
	}
	if !auth.Authorize("User:admin", registry.OpWrite, "s") || !auth.Authorize("User:admin", registry.OpConfig, "") {
		t.Fatal("the super user must pass")
	}
	// Requests reach the registry over HTTP.
	resp, err := http.Get("http://" + b.SchemaRegistryAddr().String() + "/subjects")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestSchemaRegistryConfigValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		settings map[string]string
		want     string // in the error; "" for none
	}{
		{map[string]string{"schema.registry.listeners": "http://127.0.0.1:8081"}, ""},
		{map[string]string{"schema.registry.listeners": "https://127.0.0.1:8081", "ssl.keystore.location": "/k.pem"}, ""},
		{map[string]string{"schema.registry.listeners": "https://127.0.0.1:8081", "schema.registry.ssl.keystore.location": "/k.pem"}, ""},
		{map[string]string{"schema.registry.listeners": "https://127.0.0.1:8081"}, "keystore"},
		{map[string]string{"schema.registry.listeners": "127.0.0.1:8081"}, "not http://host:port"},
		{map[string]string{"schema.registry.listeners": "ftp://127.0.0.1:8081"}, "not http://host:port"},
		{map[string]string{"schema.registry.listeners": "http://a:1,http://b:2"}, "one listener"},
		{map[string]string{"schema.registry.listeners": "http://127.0.0.1:99999"}, "port"},
		{map[string]string{"schema.registry.authentication.method": "DIGEST"}, "NONE or BASIC"},
	} {
		cfg := DefaultConfig()
		cfg.DataDir = "/data"
		for name, value := range c.settings {
			if err := cfg.Set(name, value); err != nil {
				t.Fatal(err)
			}
		}
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: Validate() = %v, want an error containing %q", c.settings, err, c.want)
		}
	}
}
