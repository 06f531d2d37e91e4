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
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var cfg tailFile
	if err := loadYAML(write("tail.yaml", "ship:\n  brokers: [a:1]\naudit:\n  instance: i1\ntail:\n  topic: logs\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	shipConfig, auditConfig := cfg.sections()
	if !slices.Equal(shipConfig.Brokers, []string{"a:1"}) || auditConfig.Instance != "i1" || cfg.Tail.Topic != "logs" {
		t.Errorf("decoded ship %+v, audit %+v, tail %+v", *shipConfig, *auditConfig, cfg.Tail)
	}
	var other syslogFile
	err := loadYAML(write("typo.yaml", "ship:\n  brokers: [a:1]\nshipp: {}\n"), &other)
	if err == nil || !strings.Contains(err.Error(), "shipp") {
		t.Errorf("unknown key: err %v, want one naming shipp", err)
	}
}
