package broker

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTopicDefaultSettings: Kafka's broker-wide topic defaults in a
// properties file reach the log defaults or the cluster's, bad values name
// the setting, and every one is a name Set accepts.
func TestTopicDefaultSettings(t *testing.T) {
	c := DefaultConfig()
	c.DataDir = t.TempDir()
	props := strings.Join([]string{
		"min.insync.replicas=2",
		"unclean.leader.election.enable=true",
		"log.cleanup.policy=delete",
		"compression.type=producer",
		"log.retention.ms=60000",
		"log.segment.delete.delay.ms=1000",
	}, "\n")
	if err := c.LoadProperties(strings.NewReader(props)); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cc := c.clusterConfig()
	if cc.TopicDefaults["min.insync.replicas"] != "2" || cc.TopicDefaults["unclean.leader.election.enable"] != "true" {
		t.Fatalf("cluster topic defaults %v", cc.TopicDefaults)
	}
	if c.Log.Retention != time.Minute || c.Log.FileDeleteDelay != time.Second {
		t.Fatalf("log defaults: retention %v, delete delay %v", c.Log.Retention, c.Log.FileDeleteDelay)
	}
	// A copy's change does not reach the original.
	copied := c
	if err := copied.Set("min.insync.replicas", "3"); err != nil {
		t.Fatal(err)
	}
	if c.Cluster.TopicDefaults["min.insync.replicas"] != "2" {
		t.Fatal("Set on a copy changed the original's topic defaults")
	}
	for _, bad := range []string{"min.insync.replicas=0", "unclean.leader.election.enable=maybe", "log.cleanup.policy=shred", "compression.type=brotli"} {
		name, value, _ := strings.Cut(bad, "=")
		if err := c.Set(name, value); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	names := Names()
	for _, name := range []string{"min.insync.replicas", "unclean.leader.election.enable", "log.cleanup.policy", "compression.type", "log.retention.ms", "message.max.bytes"} {
		if !slices.Contains(names, name) {
			t.Errorf("Names lacks %s", name)
		}
	}
}
