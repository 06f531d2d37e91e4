package appliance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"millrace/agents/beacon"
	"millrace/broker/quota"
	"millrace/internal/waitfor"
	"millrace/sinks/lake"
)

// TestQuotasConfig: quotas: off sets none; a group given replaces its
// defaults ({} and an empty group none), the others keep theirs; the
// entities are client IDs with security off and the parts' users with it
// on; names, values and groups are checked; with brokers: a quotas
// section is refused.
func TestQuotasConfig(t *testing.T) {
	t.Parallel()
	sink, console := quotaEntity{ClientID: sinkClientID}, quotaEntity{ClientID: consoleClientID}
	defaults := map[quotaEntity]quotaValues{
		sink:    {quota.ConsumerByteRate: DefaultSinkConsumerByteRate, quota.RequestPercentage: DefaultSinkRequestPercentage},
		console: {quota.RequestPercentage: DefaultConsoleRequestPercentage},
	}
	for _, tc := range []struct {
		doc  string
		want map[quotaEntity]quotaValues
	}{
		{"data: x\n", defaults},
		{"quotas: on\n", defaults},
		{"quotas: off\n", map[quotaEntity]quotaValues{}},
		{"quotas: {sinks: {consumer_byte_rate: 1024}, console: {}}\n", map[quotaEntity]quotaValues{sink: {quota.ConsumerByteRate: 1024}}},
		{"quotas:\n  console:\n  agents: {producer_byte_rate: 5}\nship: {client_id: app}\n", map[quotaEntity]quotaValues{
			sink: defaults[sink], {ClientID: "app"}: {quota.ProducerByteRate: 5}}},
		{"security: on\nquotas: {agents: {request_percentage: 50}}\n", map[quotaEntity]quotaValues{
			{User: SinkUser}: defaults[sink], {User: ConsoleUser}: defaults[console],
			{User: BeaconUser}: {quota.RequestPercentage: 50}, {User: TailUser}: {quota.RequestPercentage: 50}}},
	} {
		c := decodeConfig(t, tc.doc).withDefaults()
		if got := c.wantedQuotas(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: wanted %v, want %v", tc.doc, got, tc.want)
		}
		if errs := c.Quotas.validate(false); len(errs) > 0 {
			t.Errorf("%s: %v", tc.doc, errs)
		}
	}
	for _, tc := range []struct{ doc, err string }{
		{"quotas: {sink: {}}\n", `"sink" is no group`},
		{"quotas: {sinks: {byte_rate: 1}}\n", `quotas.sinks: "byte_rate" is not a quota`},
		{"quotas: {console: {request_percentage: -1}}\n", "quotas.console.request_percentage: -1 is not a quota"},
		{"quotas: {sinks: {consumer_byte_rate: 1.5}}\n", "not a whole number of bytes"},
		{"brokers: [k:9092]\nquotas: {sinks: {}}\n", "embedded broker only"},
	} {
		var c Config
		dec := yaml.NewDecoder(strings.NewReader(tc.doc))
		dec.KnownFields(true)
		err := dec.Decode(&c)
		if err == nil {
			err = c.withDefaults().Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want an error with %q", tc.doc, err, tc.err)
		}
	}
}

// TestQuotasConfigRoundTrip: a config written as YAML (as the e2e tests
// write theirs) reads back with the same quotas.
func TestQuotasConfigRoundTrip(t *testing.T) {
	t.Parallel()
	for _, q := range []QuotasConfig{{}, {Off: true}, {Sinks: map[string]float64{"consumer_byte_rate": 1024}, Console: map[string]float64{}}} {
		out, err := yaml.Marshal(Config{Quotas: q})
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		dec := yaml.NewDecoder(strings.NewReader(string(out)))
		dec.KnownFields(true)
		if err := dec.Decode(&back); err != nil || !reflect.DeepEqual(back.Quotas, q) {
			t.Errorf("%+v wrote\n%s\nand read back %+v, %v", q, out, back.Quotas, err)
		}
	}
}

// TestPlanQuotas: up changes a quota only while it is up's (unset and
// never set by up, still up's last value, or already the wanted value);
// one an operator changed or removed is left and reported, and stays
// recorded as up's last value so it is recognised next time.
func TestPlanQuotas(t *testing.T) {
	t.Parallel()
	e := quotaEntity{ClientID: "millrace-sink"}
	const k = quota.ConsumerByteRate
	v := func(x float64) map[quotaEntity]quotaValues { return map[quotaEntity]quotaValues{e: {k: x}} }
	none := map[quotaEntity]quotaValues{}
	set := func(x float64) []quotaChange { return []quotaChange{{Entity: e, Kind: k, Value: x}} }
	remove := []quotaChange{{Entity: e, Kind: k, Remove: true}}
	for _, tc := range []struct {
		name                string
		want, last, current map[quotaEntity]quotaValues
		changes             []quotaChange
		record              map[quotaEntity]quotaValues
		kept                bool
	}{
		{"first start", v(100), none, none, set(100), v(100), false},
		{"restart: nothing to do", v(100), v(100), v(100), nil, v(100), false},
		{"config changed", v(200), v(100), v(100), set(200), v(200), false},
		{"operator changed it", v(200), v(100), v(50), nil, v(100), true},
		{"operator removed it", v(100), v(100), none, nil, v(100), true},
		{"operator's before up's first start", v(100), none, v(50), nil, none, true},
		{"operator set it to up's value: up's again", v(200), v(100), v(200), nil, v(200), false},
		{"quotas off: up's removed", none, v(100), v(100), remove, none, false},
		{"quotas off: the operator's stays", none, v(100), v(50), nil, v(100), false},
		{"quotas off after the operator removed it", none, v(100), none, nil, none, false},
		{"someone else's entity untouched", none, none, v(50), nil, none, false},
	} {
		changes, record, kept := planQuotas(tc.want, tc.last, tc.current)
		if !reflect.DeepEqual(changes, tc.changes) || !reflect.DeepEqual(record, tc.record) || (len(kept) > 0) != tc.kept {
			t.Errorf("%s: changes %v, record %v, kept %q; want %v, %v, kept %v", tc.name, changes, record, kept, tc.changes, tc.record, tc.kept)
		}
	}
}

// TestUpSetsQuotas starts the appliance: its default quotas are on the
// broker, as kadm's DescribeClientQuotas shows them. An operator's change
// made with AlterClientQuotas (what millrace quota set sends) outlives a
// restart, and quotas: off then removes only what is still up's.
func TestUpSetsQuotas(t *testing.T) {
	t.Parallel()
	off := false
	cfg := Config{
		Data:           t.TempDir(),
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Enabled: &off},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:         syslogOff(),
		OTLP:           otlpOnFreePorts,
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// describe starts the appliance with cfg, returns the broker's quotas
	// by entity, and stops it.
	describe := func(cfg Config, alter func(*kadm.Client)) map[string]map[string]float64 {
		t.Helper()
		a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Shutdown(context.Background())
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if alter != nil {
			alter(adm)
		}
		described, err := adm.DescribeClientQuotas(ctx, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return quotasByEntity(described)
	}
	sink, console := "{client-id=millrace-sink}", "{client-id=millrace-monitor}"
	got := describe(cfg, func(adm *kadm.Client) {
		entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: new(sinkClientID)}}
		altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1 << 20}}}})
		if err != nil || altered[0].Err != nil {
			t.Fatalf("the operator's change: %v %+v", err, altered)
		}
	})
	// got is read after the operator's change.
	want := map[string]map[string]float64{
		sink:    {"consumer_byte_rate": 1 << 20, "request_percentage": DefaultSinkRequestPercentage},
		console: {"request_percentage": DefaultConsoleRequestPercentage},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the first start and the operator's change: %v, want %v", got, want)
	}
	if got := describe(cfg, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("after a restart: %v, want the operator's change kept %v", got, want)
	}
	cfg.Quotas = QuotasConfig{Off: true}
	want = map[string]map[string]float64{sink: {"consumer_byte_rate": 1 << 20}}
	if got := describe(cfg, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("with quotas: off: %v, want only the operator's %v", got, want)
	}
}

// TestUpThrottlesASinkReplay: a sink replaying a topic faster than its
// consumer_byte_rate is throttled (its throttle time shows on /metrics
// under its client ID) while the beacon's produce path, which has no
// quota, still answers at once.
func TestUpThrottlesASinkReplay(t *testing.T) {
	t.Parallel()
	off := false
	cfg := Config{
		Data:           t.TempDir(),
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Enabled: &off},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Beacon:         &beacon.Config{},
		Syslog:         syslogOff(),
		OTLP:           otlpOnFreePorts,
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
		Topics:         []TopicConfig{{Name: "replay", Partitions: 1}},
		Sinks: []SinkConfig{{Name: "replay", Out: "lake",
			Config: lake.Config{Topics: []string{"replay"}, Schema: "log", IdleTimeout: 100 * time.Millisecond, SessionTimeout: 6 * time.Second}}},
		// 32 KiB/s: the sink's first fetch, the whole backlog of 410 KB,
		// is over it even spread over Kafka's minimum measuring window of
		// 10 s, by little, so that the throttle (about 2.5 s, which the
		// sink's shutdown waits out) keeps the test short.
		Quotas: QuotasConfig{Sinks: map[string]float64{"consumer_byte_rate": 32 << 10}},
	}
	cfg.Audit.Enabled = &off
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())

	// A day's backlog, in small: 400 log lines of 1 KiB, by a client
	// without a quota.
	loader, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...), kgo.ClientID("loader"), kgo.DefaultProduceTopic("replay"),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // the bytes fetched are the bytes written
	if err != nil {
		t.Fatal(err)
	}
	defer loader.Close()
	line := strings.Repeat("x", 1024)
	var records []*kgo.Record
	for i := range 400 {
		records = append(records, &kgo.Record{Value: fmt.Appendf(nil,
			`{"event_id":"%032x","ts":%q,"source":"/var/log/replay.log","offset":%d,"line":%q}`, i, time.Now().UTC().Format(time.RFC3339Nano), i*1025, line)})
	}
	if err := loader.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	throttled := regexp.MustCompile(`(?m)^millrace_broker_quota_throttle_ratio\{client_id="millrace-sink",kind="consumer_byte_rate",user=""\} (\S+)$`)
	metrics := "http://" + a.MetricsAddr().String() + "/metrics"
	waitfor.Until(t, 30*time.Second, "the sink's throttle time on /metrics", func() bool {
		resp, err := http.Get(metrics)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := throttled.FindSubmatch(body)
		return m != nil && string(m[1]) != "0"
	})

	// The beacon's produce path meanwhile: each POST is answered once the
	// broker acknowledged its events.
	events := "http://" + a.HTTPAddr().String() + "/v1/events"
	for i := range 5 {
		start := time.Now()
		resp, err := http.Post(events, "application/json", strings.NewReader(fmt.Sprintf(`[{"type":"click","title":"during replay %d"}]`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The agents have no quota: nothing holds the beacon's
		// connection, and the broker answers it as if the sink were idle.
		if took := time.Since(start); resp.StatusCode != http.StatusOK || took > 2*time.Second {
			t.Errorf("beacon POST %d during the replay: %d after %v, want 200 at once", i, resp.StatusCode, took)
		}
	}
	resp, err := http.Get(metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), `client_id="millrace-agent"`) {
		t.Errorf("the agents' client ID has quota series: up set it a quota")
	}
}

// TestUpSetsQuotasOnUsersWhenSecure: with security on, the quotas go on
// the users the parts authenticate as (set by the admin through the
// broker's ACLs), and the console's own user may not read them.
func TestUpSetsQuotasOnUsersWhenSecure(t *testing.T) {
	t.Parallel()
	off := false
	cfg := Config{
		Data:           t.TempDir(),
		Secure:         true,
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Enabled: &off},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:         syslogOff(),
		OTLP:           otlpOnFreePorts,
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	describe := func(user string) ([]kadm.DescribedClientQuota, error) {
		opts, err := a.secure.clientSettings(user).Opts()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(a.Brokers()...))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return kadm.NewClient(cl).DescribeClientQuotas(ctx, false, nil)
	}
	described, err := describe(AdminUser)
	if err != nil {
		t.Fatal(err)
	}
	got := quotasByEntity(described)
	want := map[string]map[string]float64{
		"{user=" + SinkUser + "}":    {"consumer_byte_rate": DefaultSinkConsumerByteRate, "request_percentage": DefaultSinkRequestPercentage},
		"{user=" + ConsoleUser + "}": {"request_percentage": DefaultConsoleRequestPercentage},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("quotas under security on: %v, want %v", got, want)
	}
	if _, err := describe(ConsoleUser); err == nil {
		t.Error("the console's user read the quotas: it has no DescribeConfigs on the cluster")
	}
}

// quotasByEntity maps a DescribeClientQuotas answer by entity, as
// "{user=...}", to its quotas' values by key.
func quotasByEntity(described []kadm.DescribedClientQuota) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, d := range described {
		values := map[string]float64{}
		for _, v := range d.Values {
			values[v.Key] = v.Value
		}
		out[fmt.Sprint(d.Entity)] = values
	}
	return out
}
