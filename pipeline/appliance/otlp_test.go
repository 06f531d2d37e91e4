package appliance

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"millrace/agents/otlp"
	"millrace/audit"
	"millrace/internal/httpserver"
)

// otlpOnFreePorts is the receiver on ports of its own, for tests that
// start the appliance in parallel (the defaults are fixed ports).
var otlpOnFreePorts = OTLPConfig{Config: otlp.Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"}}

// TestOTLPConfig: the receiver is on by default on OTLP's loopback ports,
// serves with http.tls unless it has a TLS of its own, creates its topics,
// and is turned off whole by enabled: false or a transport by "off".
func TestOTLPConfig(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	oc := c.otlpConfig()
	if !c.OTLP.On() || oc.HTTPAddr != "127.0.0.1:4318" || oc.GRPCAddr != "127.0.0.1:4317" || oc.TLS != nil {
		t.Fatalf("default receiver: on %v, %+v", c.OTLP.On(), oc)
	}
	var used []string
	for _, tc := range c.usedTopics() {
		used = append(used, tc.Name)
	}
	for _, topic := range []string{"otlp_logs", "otlp_metrics", "otlp_spans"} {
		if !slices.Contains(used, topic) {
			t.Errorf("topic %s is not created at start: %v", topic, used)
		}
	}

	webTLS := &httpserver.TLSConfig{Cert: "web.pem"}
	c = decodeConfig(t, "http: {tls: {cert: web.pem}}\notlp: {grpc_addr: \"off\", logs_topic: l}\n").withDefaults()
	if oc := c.otlpConfig(); *oc.TLS != *webTLS || oc.GRPCAddr != "" || oc.HTTPAddr != "127.0.0.1:4318" || oc.LogsTopic != "l" {
		t.Errorf("otlp with http.tls and grpc off: %+v", oc)
	}
	c = decodeConfig(t, "http: {tls: {cert: web.pem}}\notlp: {tls: {cert: otlp.pem}}\n").withDefaults()
	if oc := c.otlpConfig(); oc.TLS.Cert != "otlp.pem" {
		t.Errorf("otlp.tls of its own: %+v", oc.TLS)
	}

	c = decodeConfig(t, "otlp: {enabled: false}\n").withDefaults()
	if c.OTLP.On() || len(c.otlpTopics()) != 0 || c.Validate() != nil {
		t.Errorf("enabled: false: on %v, topics %v, %v", c.OTLP.On(), c.otlpTopics(), c.Validate())
	}
	c = decodeConfig(t, "otlp: {http_addr: \"off\", grpc_addr: \"off\"}\n").withDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "enabled: false") {
		t.Errorf("both transports off: %v, want an error that names enabled: false", err)
	}
	c = decodeConfig(t, "otlp: {encoding: avro}\n").withDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `encoding "avro"`) {
		t.Errorf("a bad encoding: %v", err)
	}
}

// TestOTLPUnderSecureUp starts the appliance with security on and the
// receiver on free ports: a log record posted over OTLP/HTTP is answered
// 200, lands on otlp_logs through the beacon's user and its ACLs with an
// event_id, and is counted for the audit under its service.name.
func TestOTLPUnderSecureUp(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Data:           t.TempDir(),
		Secure:         true,
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Listen: "127.0.0.1:0"},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		OTLP:           otlpOnFreePorts,
		Syslog:         syslogOff(),
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
	}
	a, ctx := startAppliance(t, cfg, 60*time.Second)
	httpAddr, grpcAddr := a.OTLPAddrs()
	if httpAddr == nil || grpcAddr == nil || a.OTLPScheme() != "http" {
		t.Fatalf("receiver at %v and %v over %s", httpAddr, grpcAddr, a.OTLPScheme())
	}

	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "checkout")
	rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("paid")
	body, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+httpAddr.String()+"/v1/logs", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/logs: %d", resp.StatusCode)
	}

	opts, err := a.secure.clientSettings(AdminUser).Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(a.Brokers()...), kgo.ConsumeTopics(otlp.DefaultLogsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rec *kgo.Record
	for rec == nil && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 && ctx.Err() == nil {
			t.Fatalf("consuming %s as admin: %v", otlp.DefaultLogsTopic, errs)
		}
		if recs := fetches.Records(); len(recs) > 0 {
			rec = recs[0]
		}
	}
	if rec == nil {
		t.Fatal("nothing landed on otlp_logs")
	}
	got, err := new(plog.ProtoUnmarshaler).UnmarshalLogs(rec.Value)
	if err != nil {
		t.Fatalf("the record is not OTLP LogsData: %v", err)
	}
	if got.LogRecordCount() != 1 {
		t.Fatalf("%d log records, want 1", got.LogRecordCount())
	}
	if id, ok := got.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().Get(otlp.EventIDAttribute); !ok || id.Str() == "" {
		t.Error("the log record has no event_id")
	}

	counted := false
	for _, c := range a.audits {
		for _, r := range c.Snapshot() {
			if r.Topic == otlp.DefaultLogsTopic {
				counted = r.Source == "checkout" && r.Accepted == 1 && r.Role == audit.RoleIntake && strings.HasSuffix(r.Instance, "@127.0.0.1:0")
			}
		}
	}
	if !counted {
		t.Error("the log record is not counted for the audit under service.name checkout")
	}
}

// TestOTLPPortTaken: when the receiver's port is taken (a Collector on the
// same host), Start fails with an error that says how to move or turn off
// the receiver, and stops what it started.
func TestOTLPPortTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := Config{
		Data:           t.TempDir(),
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Listen: "127.0.0.1:0"},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		OTLP:           OTLPConfig{Config: otlp.Config{HTTPAddr: taken.Addr().String(), GRPCAddr: "127.0.0.1:0"}},
		Syslog:         syslogOff(),
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil || a != nil || !strings.Contains(err.Error(), "otlp: {enabled: false}") {
		t.Fatalf("Start with the OTLP port taken: %v, %v; want an error that says how to turn the receiver off", a, err)
	}
}
