package kafka

import (
	"strings"
	"testing"

	"millrace/broker/replica"
	"millrace/internal/settings"
)

// TestReplicaSelectorClassSetting: replica.selector.class takes Kafka's
// rack-aware class name or nothing, and refuses any other class at start
// with a sentence naming the one it has.
func TestReplicaSelectorClassSetting(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.ReplicaSelectorClass != "" {
		t.Fatalf("default replica.selector.class %q, want empty (consumers read from leaders)", cfg.ReplicaSelectorClass)
	}
	if err := cfg.Set("replica.selector.class", replica.RackAwareSelectorClass); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the rack-aware selector refused: %v", err)
	}
	if got := cfg.Values()["replica.selector.class"]; got != replica.RackAwareSelectorClass {
		t.Errorf("read back as %q", got)
	}
	if configType("replica.selector.class") != settings.Class {
		t.Errorf("DescribeConfigs type %d, want CLASS", configType("replica.selector.class"))
	}
	if err := cfg.Set("replica.selector.class", "com.example.NearestSelector"); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), replica.RackAwareSelectorClass) {
		t.Errorf("an unknown selector: Validate said %v, want a refusal naming %s", err, replica.RackAwareSelectorClass)
	}
}
