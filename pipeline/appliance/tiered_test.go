package appliance

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/agents/tail"
	"millrace/broker/log"
	"millrace/sinks/lake"
)

// TestTieredStorageConfig: tiered_storage: enabled turns on the embedded
// broker's tiering with the remote storage under the chosen sink's out
// (its S3 endpoint and region too), and gives the topics up creates
// Kafka's tiered settings: remote.storage.enable=true and
// local.retention.ms, capped at the topic's retention.ms (Kafka's
// LogConfig refuses a local retention above the total), never on a
// compacted topic (Kafka refuses tiering one), and never over what a
// topic's config says itself.
func TestTieredStorageConfig(t *testing.T) {
	t.Parallel()
	c := Config{
		Data:          "/srv/m",
		TieredStorage: TieredStorageConfig{Enabled: true, LocalRetention: time.Hour, Retention: 90 * 24 * time.Hour},
		Sinks: []SinkConfig{
			{Name: "files", Out: "lake", Config: lake.Config{Topics: []string{"clicks"}, Schema: "click"}},
			{Name: "bucket", Out: "s3://bucket/lake", S3Endpoint: "http://127.0.0.1:17070", S3Region: "eu-west-1",
				Config: lake.Config{Topics: []string{"clicks"}, Schema: "click"}},
		},
	}.withDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	bc, err := c.brokerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !bc.Tier.Enable || bc.Tier.URL != "file:///srv/m/lake/_tiered" {
		t.Errorf("tier %+v, want on at file:///srv/m/lake/_tiered (the first sink's out)", bc.Tier)
	}
	c.TieredStorage.Sink = "bucket"
	if bc, err = c.brokerConfig(); err != nil || bc.Tier.URL != "s3://bucket/lake/_tiered" ||
		bc.Tier.S3Endpoint != "http://127.0.0.1:17070" || bc.Tier.S3Region != "eu-west-1" {
		t.Errorf("tier %+v (%v), want s3://bucket/lake/_tiered through the sink's endpoint and region", bc.Tier, err)
	}

	defaults := log.DefaultConfig()
	topics := c.tieredTopics([]TopicConfig{
		{Name: "clicks"},
		{Name: "short", Config: map[string]string{"retention.ms": "600000"}},
		{Name: "state", Config: map[string]string{"cleanup.policy": "compact"}},
		{Name: "local", Config: map[string]string{"remote.storage.enable": "false"}},
		{Name: "mine", Config: map[string]string{"local.retention.ms": "60000", "min.insync.replicas": "1"}},
	}, defaults)
	want := []map[string]string{
		{"remote.storage.enable": "true", "local.retention.ms": "3600000", "retention.ms": "7776000000"},
		{"remote.storage.enable": "true", "local.retention.ms": "600000", "retention.ms": "600000"},
		{"cleanup.policy": "compact"},
		{"remote.storage.enable": "false"},
		{"remote.storage.enable": "true", "local.retention.ms": "60000", "retention.ms": "7776000000", "min.insync.replicas": "1"},
	}
	for i, tc := range topics {
		if !maps.Equal(tc.Config, want[i]) {
			t.Errorf("%s: config %v, want %v", tc.Name, tc.Config, want[i])
		}
		// What the broker would create must pass its own checks.
		cfg := defaults
		for name, value := range tc.Config {
			if name != "min.insync.replicas" {
				if err := cfg.Set(name, value); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: the broker would refuse %v: %v", tc.Name, tc.Config, err)
		}
	}

	// Off: nothing changes.
	c.TieredStorage.Enabled = false
	if bc, err := c.brokerConfig(); err != nil || bc.Tier.Enable {
		t.Errorf("tiered_storage off: tier %+v, err %v", bc.Tier, err)
	}
	if got := c.tieredTopics([]TopicConfig{{Name: "clicks"}}, defaults); got[0].Config != nil {
		t.Errorf("tiered_storage off: clicks config %v", got[0].Config)
	}
}

// TestTieredStorageRefusals: what tiered_storage cannot work with is
// refused with a sentence naming it.
func TestTieredStorageRefusals(t *testing.T) {
	t.Parallel()
	sink := SinkConfig{Name: "files", Out: "lake", Config: lake.Config{Topics: []string{"clicks"}, Schema: "click"}}
	on := TieredStorageConfig{Enabled: true}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no sink", Config{TieredStorage: on}, "no sink is configured"},
		{"unknown sink", Config{TieredStorage: TieredStorageConfig{Enabled: true, Sink: "other"}, Sinks: []SinkConfig{sink}}, `no sink is named "other"`},
		{"external brokers", Config{TieredStorage: on, Sinks: []SinkConfig{sink}, Brokers: []string{"k:9092"}}, "no embedded broker"},
		{"owned setting", Config{TieredStorage: on, Sinks: []SinkConfig{sink},
			Broker: BrokerConfig{Settings: map[string]string{"millrace.remote.storage.url": "file:///x"}}}, "set by tiered_storage"},
		{"local above total", Config{TieredStorage: TieredStorageConfig{Enabled: true, LocalRetention: 2 * time.Hour, Retention: time.Hour},
			Sinks: []SinkConfig{sink}}, "exceeds retention"},
		{"a topic named like the prefix", Config{TieredStorage: on, Sinks: []SinkConfig{{Name: "files", Out: "lake",
			Config: lake.Config{Topics: []string{TieredPrefix}, Schema: "click"}}}}, "directory of the tiered segments"},
	}
	for _, c := range cases {
		err := c.cfg.withDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestTieredStorageOnTheLake: `millrace up` with tiered_storage on keeps
// the closed segments of the topics it creates under the lake's _tiered
// directory, beside the tables the sink lands, which never see them; a
// compacted topic is created untiered.
func TestTieredStorageOnTheLake(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "app.log")
	var lines strings.Builder
	for i := range 200 {
		lines.WriteString(`{"level":"info","msg":"request ` + strings.Repeat("x", i%50) + `"}` + "\n")
	}
	if err := os.WriteFile(logFile, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Data: dir,
		Broker: BrokerConfig{Listen: "127.0.0.1:0", Settings: map[string]string{
			"remote.log.manager.task.interval.ms": "50", "log.segment.bytes": "2048"}},
		SchemaRegistry: SchemaRegistryConfig{Enabled: new(bool)},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:         syslogOff(),
		OTLP:           otlpOnFreePorts,
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
		// Batches well under a segment, so the lines fill several.
		Ship:          ship.Config{MaxBatchBytes: 1024, Compression: "none"},
		TieredStorage: TieredStorageConfig{Enabled: true, LocalRetention: time.Hour},
		Topics:        []TopicConfig{{Name: "logs", Partitions: 1}, {Name: "state", Partitions: 1, Config: map[string]string{"cleanup.policy": "compact"}}},
		Tail:          []TailConfig{{Name: "app", Config: tail.Config{Topic: "logs", Paths: []string{logFile}, StartPosition: "beginning"}}},
		Sinks: []SinkConfig{{Name: "logs", Out: "lake",
			Config: lake.Config{Topics: []string{"logs"}, Schema: "log", IdleTimeout: 100 * time.Millisecond, SessionTimeout: 6 * time.Second}}},
	}
	a, ctx := startAppliance(t, cfg, 60*time.Second)
	tiered := filepath.Join(dir, "lake", TieredPrefix)
	var segments, tables []string
	for len(segments) == 0 || len(tables) == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("segments in %s: %v; table files: %v", tiered, segments, tables)
		case <-time.After(50 * time.Millisecond):
		}
		segments, _ = filepath.Glob(filepath.Join(tiered, "logs-*", "0", "*.log"))
		tables, _ = filepath.Glob(filepath.Join(dir, "lake", "millrace.db", "logs", "data", "dt=*", "hr=*", "*.parquet"))
	}
	for _, f := range tables {
		if strings.Contains(f, TieredPrefix) {
			t.Errorf("the table holds %s", f)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	configs, err := kadm.NewClient(cl).DescribeTopicConfigs(context.Background(), "logs", "state")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"logs": "true", "state": "false"} {
		rc, err := configs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == "remote.storage.enable" && c.MaybeValue() != want {
				t.Errorf("%s: remote.storage.enable=%s, want %s", topic, c.MaybeValue(), want)
			}
		}
	}
}
