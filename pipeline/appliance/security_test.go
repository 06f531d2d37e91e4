package appliance

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.yaml.in/yaml/v3"

	"millrace/agents/tail"
	"millrace/audit"
	"millrace/internal/clientauth"
	"millrace/sinks/lake"
)

func decodeConfig(t *testing.T, doc string) Config {
	t.Helper()
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConfigSecurityInherited: tls: and sasl: next to brokers: apply to
// every client; ship: and a sink may set their own, and what they leave
// unset comes from the top.
func TestConfigSecurityInherited(t *testing.T) {
	c := decodeConfig(t, `
brokers: [kafka-1:9093]
tls: {ca: /etc/millrace/ca.pem}
sasl: {mechanism: SCRAM-SHA-512, username: admin, password_file: /etc/millrace/admin.pass}
ship:
  sasl: {mechanism: SCRAM-SHA-512, username: agents, password_file: /etc/millrace/agents.pass}
sinks:
  - name: clicks
    out: lake
    topics: [clicks]
    schema: click
    tls: {ca: /etc/millrace/ca.pem, cert: /etc/millrace/sink.pem}
  - name: logs
    out: logs
    topics: [logs]
    schema: log
`).withDefaults()
	top := clientauth.Settings{
		TLS:  &clientauth.TLS{CA: "/etc/millrace/ca.pem"},
		SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-512", Username: "admin", PasswordFile: "/etc/millrace/admin.pass"},
	}
	if !reflect.DeepEqual(c.Security, top) {
		t.Errorf("top-level security %+v %+v", c.Security.TLS, c.Security.SASL)
	}
	if *c.Ship.Security.TLS != *top.TLS || c.Ship.Security.SASL.Username != "agents" {
		t.Errorf("ship security %+v %+v: want the top's tls and its own user", c.Ship.Security.TLS, c.Ship.Security.SASL)
	}
	if s := c.Sinks[0].Security; s.TLS.Cert != "/etc/millrace/sink.pem" || s.SASL.Username != "admin" {
		t.Errorf("sink clicks security %+v %+v: want its own tls and the top's user", s.TLS, s.SASL)
	}
	if s := c.Sinks[1].Security; !reflect.DeepEqual(s, top) {
		t.Errorf("sink logs security %+v %+v: want the top's", s.TLS, s.SASL)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

func TestConfigSecurityValidated(t *testing.T) {
	c := decodeConfig(t, `
brokers: [kafka-1:9093]
sasl: {mechanism: SCRAM-SHA-512, password: x}
ship:
  sasl: {mechanism: OAUTHBEARER, username: agents, password: x}
sinks:
  - name: clicks
    out: lake
    topics: [clicks]
    schema: click
    tls: {key: /etc/millrace/sink.key}
`).withDefaults()
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid security settings accepted")
	}
	for _, want := range []string{
		"sasl: username is empty",
		`ship: sasl: mechanism "OAUTHBEARER" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`,
		`sinks[0] "clicks": tls: key is set without cert`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// The sink inherits the top's sasl: its problem is reported once.
	if n := strings.Count(err.Error(), "username is empty"); n != 1 {
		t.Errorf("the top's sasl problem reported %d times:\n%v", n, err)
	}
}

// TestStartAuthenticates runs the appliance against an external cluster
// that requires SASL: its topic creation, the tailer's producer, the sink
// and the console's collector all authenticate, and a line written to the
// tailed file lands in the lake.
func TestStartAuthenticates(t *testing.T) {
	t.Parallel()
	// The sink commits by topic name: the cluster must not offer the
	// versions that take topic ids instead.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	versions.SetMaxKeyVersion(int16(kmsg.OffsetFetch), 9)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(versions),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "millrace", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the appliance shuts down (startAppliance)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "app.log")
	if err := os.WriteFile(logFile, []byte("first line\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	passFile := filepath.Join(dir, "pass")
	if err := os.WriteFile(passFile, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Data:     dir,
		Brokers:  c.ListenAddrs(),
		Security: clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-512", Username: "millrace", PasswordFile: passFile}},
		HTTP:     HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:   syslogOff(),
		OTLP:     otlpOnFreePorts,
		// The external cluster creates no topic on demand; the appliance
		// creates the listed ones.
		Topics: []TopicConfig{{Name: "logs", Partitions: 1}, {Name: audit.Topic, Partitions: 1}, {Name: DefaultOpsTopic, Partitions: 1}},
		Tail:   []TailConfig{{Name: "app", Config: tail.Config{Topic: "logs", Paths: []string{logFile}, StartPosition: "beginning"}}},
		Sinks: []SinkConfig{{Name: "logs", Out: "lake",
			Config: lake.Config{Topics: []string{"logs"}, Schema: "log", IdleTimeout: 100 * time.Millisecond, SessionTimeout: 6 * time.Second}}},
		OpsMetrics: OpsMetricsConfig{Interval: -1},
	}
	a, ctx := startAppliance(t, cfg, 30*time.Second)
	var files []string
	for len(files) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("nothing landed")
		case <-time.After(50 * time.Millisecond):
		}
		// The logs table's data files (up lands tables by default).
		files, _ = filepath.Glob(filepath.Join(dir, "lake", "millrace.db", "logs", "data", "dt=*", "hr=*", "*.parquet"))
	}
	if err := a.console.Ping(ctx); err != nil {
		t.Errorf("the console's collector: %v", err)
	}
}

// TestStartFailureStopsWhatStarted: a start that fails part way (its
// HTTP address is taken) returns the error and stops what it started,
// instead of panicking on the appliance it no longer returns.
func TestStartFailureStopsWhatStarted(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := Config{
		Data:       t.TempDir(),
		Brokers:    c.ListenAddrs(),
		HTTP:       HTTPConfig{Listen: taken.Addr().String(), MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:     syslogOff(),
		OTLP:       otlpOnFreePorts,
		OpsMetrics: OpsMetricsConfig{Interval: -1},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil || a != nil {
		t.Fatalf("Start on a taken address: %v, %v; want an error and no appliance", a, err)
	}
}
