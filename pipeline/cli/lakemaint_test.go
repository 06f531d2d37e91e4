package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/pipeline/appliance"
	"millrace/schemas"
	"millrace/sinks/iceberg"
	"millrace/sinks/lake"
)

// TestLakeMaintenanceCommands: compact, expire and orphans find a sink's
// table from its --out (or its --config file), name each table they
// worked on, and refuse what would be unsafe or meaningless with a usage
// error. The operations themselves are sinks/iceberg's, tested there and
// in e2e's TestIcebergCompaction.
func TestLakeMaintenanceCommands(t *testing.T) {
	dir := t.TempDir()
	cat, err := iceberg.Open(t.Context(), iceberg.Config{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	click, err := schemas.ByName("click")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Table(t.Context(), "clicks", click, iceberg.TableConfig{}); err != nil {
		t.Fatal(err)
	}
	cat.Close()
	config := filepath.Join(t.TempDir(), "sink.yaml")
	if err := os.WriteFile(config, []byte("out: file://"+dir+"\nlake:\n  format: iceberg\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		args []string
		code int
		want string // in stdout, or in stderr when code != 0
	}{
		{[]string{"lake", "compact", "clicks", "--out", dir, "--dry-run"}, 0, "millrace.clicks: would merge 0 files into 0, in 0 closed partitions\n"},
		{[]string{"lake", "compact", "--out", "file://" + dir}, 0, "millrace.clicks: merged 0 files into 0, in 0 closed partitions\n"},
		{[]string{"lake", "expire", "-c", config, "--dry-run"}, 0, "millrace.clicks: would expire 0 snapshots\n"},
		{[]string{"lake", "orphans", "clicks", "-c", config, "--older-than", "2h"}, 0, "millrace.clicks: removed 0 orphan files (0 bytes)\n"},
		{[]string{"lake", "compact", "clicks"}, 2, "--out is required"},
		{[]string{"lake", "compact", "a", "b", "--out", dir}, 2, "expected 0 to 1 argument(s), got 2"},
		{[]string{"lake", "compact", "clicks", "--out", dir, "--target-size", "0"}, 2, "--target-size must be positive"},
		{[]string{"lake", "expire", "--out", dir, "--keep-days", "0"}, 2, "--keep-days must be 1 or more"},
		{[]string{"lake", "orphans", "--out", dir, "--older-than", "10m"}, 2, "--older-than 10m0s: want 1h or more"},
		{[]string{"lake", "compact", "views", "--out", dir}, 1, "table millrace.views"},
		{[]string{"lake", "compact", "--out", dir, "--namespace", "web"}, 1, "no tables in namespace web"},
	} {
		code, out, errOut := runMain(c.args...)
		got := out
		if c.code != 0 {
			got = errOut
		}
		if code != c.code || !strings.Contains(got, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
}

// TestUpSinkMaintenanceSettings: a sink of `millrace up`'s configuration
// takes the maintenance settings under its iceberg: key, as `millrace
// sink --config` does (the sink's worker checks them when it starts).
func TestUpSinkMaintenanceSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "up.yaml")
	yaml := `sinks:
  - name: clicks
    out: lake
    topics: [clicks]
    schema: click
    format: iceberg
    iceberg:
      maintenance:
        interval: 10m
        target_file_size: 1048576
        keep_snapshots_days: 2
        orphan_age: 24h
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg appliance.Config
	if err := loadYAML(path, &cfg); err != nil {
		t.Fatal(err)
	}
	got := cfg.Sinks[0].Iceberg.Maintenance
	if want := (lake.MaintenanceConfig{Interval: 10 * time.Minute, TargetFileSize: 1 << 20, KeepSnapshotsDays: 2, OrphanAge: 24 * time.Hour}); got != want {
		t.Errorf("maintenance %+v, want %+v", got, want)
	}
}
