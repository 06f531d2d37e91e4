package appliance

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestSchemaRegistryBrokerConfig: the embedded broker hosts the registry at
// 127.0.0.1:8081 unless the file moves or disables it; secure mode serves
// it over HTTPS with basic auth, writing as admin.
func TestSchemaRegistryBrokerConfig(t *testing.T) {
	off := false
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"default", Config{}, "http://127.0.0.1:8081"},
		{"moved", Config{SchemaRegistry: SchemaRegistryConfig{Listen: "0.0.0.0:18081"}}, "http://0.0.0.0:18081"},
		{"off", Config{SchemaRegistry: SchemaRegistryConfig{Enabled: &off}}, ""},
	} {
		bc, err := c.cfg.withDefaults().brokerConfig()
		if err != nil {
			t.Fatal(err)
		}
		if bc.SchemaRegistry.Listeners != c.want {
			t.Errorf("%s: schema.registry.listeners %q, want %q", c.name, bc.SchemaRegistry.Listeners, c.want)
		}
	}

	secure := Config{Secure: true}.withDefaults()
	bc, err := secure.brokerConfig()
	if err != nil {
		t.Fatal(err)
	}
	m := secureMaterial{dir: t.TempDir()}
	if err := secureBrokerConfig(&bc, m, secure.Broker.Listen); err != nil {
		t.Fatal(err)
	}
	values := bc.Values()
	for name, want := range map[string]string{
		"schema.registry.listeners":             "https://127.0.0.1:8081",
		"schema.registry.authentication.method": "BASIC",
		"millrace.inter.broker.sasl.username":   AdminUser,
	} {
		if values[name] != want {
			t.Errorf("secure: %s = %q, want %q", name, values[name], want)
		}
	}

	for _, bad := range []Config{
		{Broker: BrokerConfig{Settings: map[string]string{"schema.registry.listeners": "http://127.0.0.1:1"}}},
		{SchemaRegistry: SchemaRegistryConfig{Listen: "8081"}},
		{Secure: true, Broker: BrokerConfig{Settings: map[string]string{"schema.registry.authentication.method": "NONE"}}},
	} {
		if err := bad.withDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%+v: Validate() = %v, want an error about the schema registry's settings", bad, err)
		}
	}
}

// TestSchemaRegistrySecure starts `millrace up` with security on and the
// registry on a free port: it serves HTTPS with the broker's certificate,
// and its log (the `_schemas` topic) is created through the broker's
// SASL_SSL listener as admin.
func TestSchemaRegistrySecure(t *testing.T) {
	t.Parallel()
	off := false
	cfg := Config{
		Data:           t.TempDir(),
		Secure:         true,
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Listen: "127.0.0.1:0"},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:         syslogOff(),
		OTLP:           otlpOnFreePorts,
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
	}
	cfg.Audit.Enabled = &off
	a, ctx := startAppliance(t, cfg, 60*time.Second)
	addr := a.SchemaRegistryAddr()
	if addr == nil || a.SchemaRegistryScheme() != "https" {
		t.Fatalf("schema registry at %v over %s, want one over https", addr, a.SchemaRegistryScheme())
	}
	pem, err := os.ReadFile(a.secure.caFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := client.Get("https://" + addr.String() + "/subjects")
	if err != nil {
		t.Fatalf("the registry's certificate is not the broker's CA's: %v", err)
	}
	resp.Body.Close()

	opts, err := a.secure.clientSettings(AdminUser).Opts()
	if err != nil {
		t.Fatal(err)
	}
	// A fresh answer at each look: the topic appears within milliseconds.
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(a.Brokers()...), kgo.MetadataMinAge(10*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitfor.Until(t, 30*time.Second, "the registry's _schemas topic", func() bool {
		topics, err := adm.ListTopics(ctx, "_schemas")
		return err == nil && topics.Has("_schemas") && topics["_schemas"].Err == nil
	})
}
