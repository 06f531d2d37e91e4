package cluster

import (
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"millrace/broker/log"
	"millrace/internal/waitfor"
)

// reopenWith restarts the broker with these settings and static log
// defaults.
func (e *env) reopenWith(cfg Config, defaults log.Config) {
	e.t.Helper()
	if err := e.c.Close(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.logs.Close(); err != nil {
		e.t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	var err error
	if e.logs, err = log.OpenManager(e.dir+"/data", defaults, logger); err != nil {
		e.t.Fatal(err)
	}
	if e.c, err = Open(cfg, e.store, e.logs, defaults, logger); err != nil {
		e.t.Fatal(err)
	}
}

func sourceOf(t *testing.T, c *Cluster, topic, name string) ConfigValue {
	t.Helper()
	entries, err := c.TopicConfigSources(topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("%s: no config %s in %+v", topic, name, entries)
	return ConfigValue{}
}

// TestBrokerConfigLayers walks one topic's settings through every layer
// Kafka has: built-in default, properties file, cluster-wide dynamic,
// per-broker dynamic and topic override, each named in the synonyms; the
// open log and the above-log settings follow at once, and the dynamic
// layers survive a restart.
func TestBrokerConfigLayers(t *testing.T) {
	e := openEnv(t, t.TempDir())
	cfg := DefaultConfig()
	cfg.TopicDefaults = map[string]string{"min.insync.replicas": "2"}
	static := log.DefaultConfig()
	if err := static.Set("retention.ms", "3600000"); err != nil {
		t.Fatal(err)
	}
	e.reopenWith(cfg, static)
	if err := e.c.Register("h", 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1, Config: map[string]string{"segment.ms": "1000"}}, false); err != nil {
		t.Fatal(err)
	}
	topic, _ := e.c.Topic("t")
	_, l, _ := e.c.Partition("t", 0)

	want := func(name, value string, synonyms ...ConfigSynonym) {
		t.Helper()
		got := sourceOf(t, e.c, "t", name)
		if got.Value != value || got.Source != synonyms[0].Source || !reflect.DeepEqual(got.Synonyms, synonyms) {
			t.Fatalf("%s: got %+v, want value %s synonyms %+v", name, got, value, synonyms)
		}
	}
	want("min.insync.replicas", "2", ConfigSynonym{"min.insync.replicas", "2", SourceStaticBroker}, ConfigSynonym{"min.insync.replicas", "1", SourceDefault})
	want("retention.ms", "3600000", ConfigSynonym{"log.retention.ms", "3600000", SourceStaticBroker}, ConfigSynonym{"log.retention.ms", "604800000", SourceDefault})
	want("segment.ms", "1000", ConfigSynonym{"segment.ms", "1000", SourceTopic}, ConfigSynonym{"log.roll.ms", "604800000", SourceDefault})
	want("unclean.leader.election.enable", "false", ConfigSynonym{"unclean.leader.election.enable", "false", SourceDefault})

	// Cluster-wide dynamic defaults.
	if err := e.c.SetBrokerConfig("", map[string]string{"min.insync.replicas": "3", "log.retention.ms": "60000", "unclean.leader.election.enable": "true"}, false); err != nil {
		t.Fatal(err)
	}
	want("min.insync.replicas", "3", ConfigSynonym{"min.insync.replicas", "3", SourceDynamicDefaultBroker},
		ConfigSynonym{"min.insync.replicas", "2", SourceStaticBroker}, ConfigSynonym{"min.insync.replicas", "1", SourceDefault})
	if got := l.Config().Retention; got != time.Minute {
		t.Fatalf("the open log's retention is %v after the cluster-wide change, want 1m", got)
	}
	if got := e.c.TopicSetting(topic, "min.insync.replicas"); got != "3" {
		t.Fatalf("TopicSetting min.insync.replicas = %s", got)
	}
	if !e.c.controllerView(1).UncleanTopics["t"] {
		t.Fatal("the controller does not see the cluster-wide unclean.leader.election.enable")
	}
	if got := e.c.DefaultTopicConfigValues()["retention.ms"]; got != "60000" {
		t.Fatalf("a new topic's retention.ms default is %s", got)
	}

	// This broker's own value wins over the cluster-wide one.
	if err := e.c.SetBrokerConfig("0", map[string]string{"min.insync.replicas": "1"}, false); err != nil {
		t.Fatal(err)
	}
	want("min.insync.replicas", "1", ConfigSynonym{"min.insync.replicas", "1", SourceDynamicBroker}, ConfigSynonym{"min.insync.replicas", "3", SourceDynamicDefaultBroker},
		ConfigSynonym{"min.insync.replicas", "2", SourceStaticBroker}, ConfigSynonym{"min.insync.replicas", "1", SourceDefault})
	broker, err := e.c.BrokerConfigSources("0")
	if err != nil {
		t.Fatal(err)
	}
	wide, err := e.c.BrokerConfigSources("")
	if err != nil {
		t.Fatal(err)
	}
	if len(wide) != 3 || wide[0].Name != "log.retention.ms" || wide[0].Source != SourceDynamicDefaultBroker {
		t.Fatalf("the default resource describes %+v, want its three dynamic configs", wide)
	}
	if len(broker) != len(DynamicBrokerConfigNames()) {
		t.Fatalf("broker 0 describes %d configs, want every changeable one (%d)", len(broker), len(DynamicBrokerConfigNames()))
	}

	// The store holds Kafka's nodes and a change notification.
	data, _, err := e.store.Get("/config/brokers/<default>")
	if err != nil {
		t.Fatal(err)
	}
	var node configZnode
	if err := json.Unmarshal(data, &node); err != nil || node.Version != 1 || node.Config["log.retention.ms"] != "60000" {
		t.Fatalf("/config/brokers/<default> = %s (%v)", data, err)
	}
	changes, err := e.store.Children("/config/changes")
	if err != nil || len(changes) != 2 || !strings.HasPrefix(changes[0], "config_change_") {
		t.Fatalf("/config/changes: %v %v", changes, err)
	}
	data, _, _ = e.store.Get("/config/changes/" + max(changes[0], changes[1]))
	if string(data) != `{"version":2,"entity_path":"brokers/0"}` {
		t.Fatalf("latest change notification %s", data)
	}

	// Restart: the dynamic layers come back from the store.
	e.reopenWith(cfg, static)
	want("min.insync.replicas", "1", ConfigSynonym{"min.insync.replicas", "1", SourceDynamicBroker}, ConfigSynonym{"min.insync.replicas", "3", SourceDynamicDefaultBroker},
		ConfigSynonym{"min.insync.replicas", "2", SourceStaticBroker}, ConfigSynonym{"min.insync.replicas", "1", SourceDefault})
	if _, l, _ := e.c.Partition("t", 0); l.Config().Retention != time.Minute {
		t.Fatalf("after a restart the log's retention is %v", l.Config().Retention)
	}

	// An empty config removes the broker's own values.
	if err := e.c.SetBrokerConfig("0", nil, false); err != nil {
		t.Fatal(err)
	}
	if got := sourceOf(t, e.c, "t", "min.insync.replicas"); got.Value != "3" || got.Source != SourceDynamicDefaultBroker {
		t.Fatalf("after removing broker 0's value: %+v", got)
	}
}

// TestBrokerConfigRefusals: only the broker-wide topic defaults change at
// runtime, with values a topic could hold, and only for this broker or
// cluster-wide; a refusal or validate_only changes nothing.
func TestBrokerConfigRefusals(t *testing.T) {
	e := openEnv(t, t.TempDir())
	for _, tc := range []struct {
		resource string
		configs  map[string]string
	}{
		{"", map[string]string{"num.partitions": "3"}},                        // read-only in Kafka
		{"", map[string]string{"log.retention.hours": "1"}},                   // read-only in Kafka (log.retention.ms is not)
		{"", map[string]string{"retention.ms": "1"}},                          // a topic name, not the broker's
		{"", map[string]string{"no.such.config": "1"}},                        // unknown
		{"", map[string]string{"min.insync.replicas": "0"}},                   // bad value
		{"", map[string]string{"log.segment.bytes": "x"}},                     // bad value
		{"", map[string]string{"log.cleanup.policy": "shred"}},                // bad value
		{"", map[string]string{"message.max.bytes": "100000000"}},             // above millrace.log.max.decompressed.bytes
		{"7", map[string]string{"min.insync.replicas": "2"}},                  // another broker
		{"broker", map[string]string{"min.insync.replicas": "2"}},             // not an ID
		{"-1", map[string]string{"min.insync.replicas": "2"}},                 // not an ID
		{"0", map[string]string{"leader.replication.throttled.rate": "-1"}},   // a negative rate
		{"", map[string]string{"follower.replication.throttled.rate": "1.5"}}, // not whole bytes
	} {
		if err := e.c.SetBrokerConfig(tc.resource, tc.configs, false); !errors.Is(err, ErrInvalidBrokerConfig) {
			t.Errorf("%q %v: %v, want ErrInvalidBrokerConfig", tc.resource, tc.configs, err)
		}
	}
	if err := e.c.SetBrokerConfig("", map[string]string{"min.insync.replicas": "2"}, true); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := e.store.Exists("/config/brokers/<default>"); ok {
		t.Fatal("a refused or validate-only change wrote the store")
	}
	if got := e.c.DefaultTopicConfigValues()["min.insync.replicas"]; got != "1" {
		t.Fatalf("min.insync.replicas default is %s after refusals", got)
	}
}

// TestBrokerConfigReachesOtherBrokers: a cluster-wide change written by one
// broker is applied by another through its watch, open logs included,
// without a restart.
func TestBrokerConfigReachesOtherBrokers(t *testing.T) {
	e := openEnv(t, t.TempDir())
	cfg := DefaultConfig()
	cfg.Replicated = true
	e.reopen(cfg)
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}

	other := &env{t: t, dir: t.TempDir(), server: e.server}
	logger := slog.New(slog.DiscardHandler)
	var err error
	if other.store, err = e.server.Session(); err != nil {
		t.Fatal(err)
	}
	if other.logs, err = log.OpenManager(other.dir+"/data", log.DefaultConfig(), logger); err != nil {
		t.Fatal(err)
	}
	otherCfg := cfg
	otherCfg.BrokerID = 1
	if other.c, err = Open(otherCfg, other.store, other.logs, log.DefaultConfig(), logger); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		other.c.Close()
		other.logs.Close()
		other.store.Close()
	})
	if err := other.c.Register("h1", 9093, ""); err != nil {
		t.Fatal(err)
	}
	if err := other.c.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitBrokers(2)
	if _, err := e.c.CreateTopic(TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 2}, false); err != nil {
		t.Fatal(err)
	}
	var l *log.Log
	waitfor.Until(t, 10*time.Second, "broker 1 opens its replica", func() bool { _, l, _ = other.c.Partition("t", 0); return l != nil })

	var notified atomic.Bool
	other.c.OnBrokerSettings(func() { notified.Store(true) })
	if err := e.c.SetBrokerConfig("", map[string]string{"log.retention.ms": "60000", "min.insync.replicas": "2", "leader.replication.throttled.rate": "1000"}, false); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 10*time.Second, "broker 1 applies the cluster-wide change", func() bool {
		topic, ok := other.c.Topic("t")
		rate, _ := other.c.BrokerSetting("leader.replication.throttled.rate")
		return ok && other.c.TopicSetting(topic, "min.insync.replicas") == "2" && l.Config().Retention == time.Minute &&
			rate == "1000" && notified.Load()
	})
	if got := sourceOf(t, other.c, "t", "retention.ms"); got.Source != SourceDynamicDefaultBroker {
		t.Fatalf("broker 1 describes retention.ms as %+v", got)
	}
}

// topicOnly are the topic configs Kafka gives no broker-wide default: the
// replicas a replication throttle holds name one topic's partitions, and
// tiering is chosen per topic (KIP-405: remote.storage.enable is absent
// from Kafka's ServerTopicConfigSynonyms).
var topicOnly = map[string]bool{"leader.replication.throttled.replicas": true, "follower.replication.throttled.replicas": true, "remote.storage.enable": true}

// TestEveryTopicConfigHasABrokerDefault: each topic config but the
// topicOnly ones has a broker-wide default under a broker name, so
// operators can set and change it for the whole cluster.
func TestEveryTopicConfigHasABrokerDefault(t *testing.T) {
	for _, name := range TopicConfigNames() {
		broker, ok := BrokerSynonym(name)
		if topicOnly[name] {
			if ok {
				t.Errorf("topic config %s has the broker-wide default %s; Kafka has none", name, broker)
			}
			continue
		}
		if !ok {
			t.Errorf("topic config %s has no broker-wide default in topicConfigSynonyms", name)
			continue
		}
		if back, _ := TopicConfigOfBroker(broker); back != name {
			t.Errorf("%s -> %s -> %s", name, broker, back)
		}
	}
}
