package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An agent's --config keeps its layout with the shared sections inlined:
// ship:, audit: and the agent's own section decode where they did, and an
// unknown key is still an error, not a silently ignored setting.
func TestAgentFileLayout(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text, unknown string
	}{
		{text: "ship:\n  brokers: [a:1]\naudit:\n  instance: i1\ntail:\n  topic: logs\n"},
		{text: "ship:\n  brokers: [a:1]\nshipp: {}\n", unknown: "shipp"},
	}
	path := filepath.Join(t.TempDir(), "agent.yaml")
	for _, tc := range cases {
		if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg tailFile
		err := loadYAML(path, &cfg)
		if tc.unknown != "" {
			if err == nil || !strings.Contains(err.Error(), tc.unknown) {
				t.Errorf("unknown key: err %v, want one naming %s", err, tc.unknown)
			}
			continue
		}
		shipConfig, auditConfig := cfg.sections()
		if err != nil || !slices.Equal(shipConfig.Brokers, []string{"a:1"}) || auditConfig.Instance != "i1" || cfg.Tail.Topic != "logs" {
			t.Errorf("decoded ship %+v, audit %+v, tail %+v (err %v)", *shipConfig, *auditConfig, cfg.Tail, err)
		}
	}
}
