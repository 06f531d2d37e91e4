package appliance

import (
	"path/filepath"
	"strings"
	"testing"

	"millrace/agents/beacon"
	"millrace/agents/tail"
	"millrace/sinks/lake"
)

func TestConfigDefaultsResolvePaths(t *testing.T) {
	c := Config{
		Data: "/srv/m",
		Tail: []TailConfig{{Name: "app", Config: tail.Config{Topic: "logs", Paths: []string{"/var/log/*.log"}}}},
		Sinks: []SinkConfig{
			{Name: "clicks", Out: "lake", Config: lake.Config{Topics: []string{"clicks"}, Schema: "click"}},
			{Name: "s3", Out: "s3://bucket/prefix", Config: lake.Config{Topics: []string{"clicks"}, Schema: "click", Group: "mine"}},
		},
		Topics: []TopicConfig{{Name: "clicks"}},
	}.withDefaults()
	if c.Broker.Listen != DefaultBrokerListen || c.HTTP.Listen != DefaultHTTPListen || c.OpsMetrics.Topic != DefaultOpsTopic {
		t.Errorf("listen/ops defaults: %+v %+v %+v", c.Broker, c.HTTP, c.OpsMetrics)
	}
	if got := c.Tail[0].DataDir; got != filepath.Join("/srv/m", "tail", "app") {
		t.Errorf("tail data dir %q", got)
	}
	if c.Sinks[0].Out != "/srv/m/lake" || c.Sinks[1].Out != "s3://bucket/prefix" {
		t.Errorf("sink outs %q %q: relative paths go under data, URLs stay", c.Sinks[0].Out, c.Sinks[1].Out)
	}
	if c.Sinks[0].Group != "millrace-sink-clicks" || c.Sinks[1].Group != "mine" {
		t.Errorf("sink groups %q %q", c.Sinks[0].Group, c.Sinks[1].Group)
	}
	if c.Topics[0].Partitions != 3 || c.Topics[0].ReplicationFactor != 1 {
		t.Errorf("topic defaults %+v", c.Topics[0])
	}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

func TestConfigValidateNamesEveryProblem(t *testing.T) {
	c := Config{
		Tail:   []TailConfig{{}, {Name: "a"}, {Name: "a"}},
		Sinks:  []SinkConfig{{Name: "s"}},
		Topics: []TopicConfig{{}},
	}
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"tail[0]: name is required", `tail[2]: name "a" is used twice`, `sinks[0] "s": out is required`, "topics[0]: name is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestMetricsListenKeptOffTheIngestPort(t *testing.T) {
	c := Config{}.withDefaults()
	if c.HTTP.MetricsListen != DefaultMetricsListen || c.HTTP.MetricsListen == c.HTTP.Listen {
		t.Fatalf("http defaults %+v", c.HTTP)
	}
	same := Config{HTTP: HTTPConfig{Listen: "127.0.0.1:8090", MetricsListen: "127.0.0.1:8090"}}.withDefaults()
	if err := same.Validate(); err == nil || !strings.Contains(err.Error(), "metrics_listen must differ") {
		t.Errorf("metrics on the ingest port: %v", err)
	}
	onBeacon := Config{Beacon: &beacon.Config{MetricsListen: "127.0.0.1:9999"}}.withDefaults()
	if err := onBeacon.Validate(); err == nil || !strings.Contains(err.Error(), "set that instead") {
		t.Errorf("beacon.metrics_listen under up: %v", err)
	}
}
