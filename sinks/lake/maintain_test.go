package lake

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
	"millrace/sinks/iceberg"
	"millrace/sinks/store"
)

// TestScheduledMaintenanceCompacts: a worker lands ten clicks of one past
// hour in rolls of two rows into a table, while its scheduled maintenance
// runs every 100ms and races the rolls' commits. The hour ends as one
// file, every roll is in the table once (a roll that lost the race to a
// compaction rebased and landed), the offsets are the group's, and the
// maintenance metrics count the runs and the compacted files.
func TestScheduledMaintenanceCompacts(t *testing.T) {
	t.Parallel()
	addr, _ := startBroker(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Brokers: []string{addr}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
		Format: FormatIceberg, RollRows: 2, IdleTimeout: 100 * time.Millisecond, AuditTopic: "off",
		Iceberg: TableConfig{Warehouse: root, Maintenance: MaintenanceConfig{Interval: 100 * time.Millisecond}}}
	produceClicks(ctx, t, addr, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	reg := prometheus.NewRegistry()
	w, err := New(cfg, st, reg, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Shutdown(ctx)
		}
	}()

	groupAt := func() int64 {
		offsets, err := adm.FetchOffsets(ctx, "g")
		if o, ok := offsets.Lookup("clicks", 0); err == nil && ok {
			return o.At
		}
		return -1
	}
	var tbl *table.Table
	waitfor.Until(t, time.Minute, "every click landed and the hour compacted into one file", func() bool {
		select {
		case <-w.Done():
			t.Fatalf("the worker stopped: %v", w.Err())
		default:
		}
		if groupAt() != 10 {
			return false
		}
		tbl, _ = readTable(t, cfg)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(tasks) == 1
	})
	want := []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9"}
	if got := scanEventIDs(t, tbl); !slices.Equal(got, want) {
		t.Errorf("the table holds %v, want %v once each", got, want)
	}
	if _, progress := readTable(t, cfg); progress.Offsets[0] != 10 {
		t.Errorf("the table's offsets %v, want partition 0 at 10", progress.Offsets)
	}
	// Shutdown waits for a maintenance run in progress: the one that
	// compacted may still be expiring and sweeping, its counts not added.
	stopped = true
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	m := w.maintenance.metrics
	if n := testutil.ToFloat64(m.compacted.WithLabelValues("clicks")); n < 5 {
		t.Errorf("files compacted: %v, want at least the 5 rolls' files", n)
	}
	if n := testutil.ToFloat64(m.runs.WithLabelValues("clicks")); n < 1 {
		t.Errorf("maintenance runs: %v, want at least 1", n)
	}
	if n := testutil.ToFloat64(m.failures.WithLabelValues("clicks")); n != 0 {
		t.Errorf("maintenance failures: %v, want 0", n)
	}
	if n, err := testutil.GatherAndCount(reg, "millrace_lake_maintenance_runs_total"); err != nil || n != 0 {
		t.Errorf("after shutdown %d maintenance series are registered (%v), want none", n, err)
	}
}

// TestMaintainerRunsOnlyWherePartitionZeroIsHeld: of two topics, the
// maintainer maintains only the one whose partition 0 its worker holds.
func TestMaintainerRunsOnlyWherePartitionZeroIsHeld(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	looked := map[string]int{}
	m := &maintainer{
		topics: []string{"held", "elsewhere"},
		table: func(topic string) *table.Table {
			mu.Lock()
			defer mu.Unlock()
			looked[topic]++
			return nil // nothing to maintain: only the choice is under test
		},
		deadLetters: func(context.Context, string) (*table.Table, error) { return nil, nil },
		holds:       func(tp topicPartition) bool { return tp == topicPartition{"held", 0} },
		interval:    time.Millisecond,
		metrics:     newMaintenanceMetrics(nil),
	}
	m.start()
	waitfor.Until(t, 10*time.Second, "three runs on the held topic", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return looked["held"] >= 3
	})
	m.shutdown()
	if looked["elsewhere"] != 0 {
		t.Errorf("the topic whose partition 0 is elsewhere was maintained %d times, want 0", looked["elsewhere"])
	}
}

// TestMaintenanceConfig: the maintenance settings are checked, each
// mistake with a sentence naming the key, and the defaults are those the
// docs give.
func TestMaintenanceConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    MaintenanceConfig
		want string // "" for valid
	}{
		{MaintenanceConfig{}, ""},
		{MaintenanceConfig{Disabled: true}, ""},
		{MaintenanceConfig{Interval: 10 * time.Minute, TargetFileSize: 64 << 20, KeepSnapshotsDays: 2, OrphanAge: time.Hour}, ""},
		{MaintenanceConfig{Interval: -time.Second}, "iceberg.maintenance.interval -1s: want a positive duration"},
		{MaintenanceConfig{TargetFileSize: -1}, "iceberg.maintenance.target_file_size -1"},
		{MaintenanceConfig{KeepSnapshotsDays: -1}, "iceberg.maintenance.keep_snapshots_days -1"},
		{MaintenanceConfig{OrphanAge: time.Minute}, "iceberg.maintenance.orphan_age 1m0s: want 1h0m0s or more"},
	} {
		c := Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
			Format: FormatIceberg, Iceberg: TableConfig{Warehouse: "/lake", Maintenance: tc.m}}
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.m, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: got %v, want an error with %q", tc.m, err, tc.want)
		}
	}
	var m MaintenanceConfig
	o := m.options()
	got := fmt.Sprint(m.interval(), o.Compact.TargetSize, o.Expire.Keep, o.Orphans.SafetyAge)
	if want := "1h0m0s 0 168h0m0s 72h0m0s"; got != want {
		t.Errorf("defaults: interval, target size (0: iceberg's 128 MiB), keep, orphan age = %s, want %s", got, want)
	}
}

// TestMaintainerSweepsDeadLetterTables: the scheduled run maintains a
// topic's dead-letter table too, when it exists: an old file no snapshot
// lists (a dead-letter commit that lost its race) is swept from it, and
// the run is counted under the table's name; a topic without one is
// skipped without a failure.
func TestMaintainerSweepsDeadLetterTables(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := t.TempDir()
	cat, err := iceberg.Open(ctx, iceberg.Config{Directory: root, Namespace: "millrace"})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.DeadLetterTable(ctx, "clicks"); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(root, "millrace.db", "clicks~dlq", "data", "part-0-5-5.parquet")
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("not committed"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(orphan, old, old); err != nil {
		t.Fatal(err)
	}
	m := &maintainer{
		catalog:     cat,
		topics:      []string{"clicks", "views"},
		table:       func(string) *table.Table { return nil }, // only the dead-letter tables are under test
		deadLetters: deadLetterLoader(cat),
		holds:       func(topicPartition) bool { return true },
		interval:    time.Millisecond,
		opts:        iceberg.MaintainOptions{Orphans: iceberg.OrphanOptions{SafetyAge: time.Hour}},
		metrics:     newMaintenanceMetrics(nil),
		logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	m.start()
	waitfor.Until(t, 30*time.Second, "the dead-letter table's orphan swept", func() bool {
		_, err := os.Stat(orphan)
		return os.IsNotExist(err)
	})
	m.shutdown()
	if n := testutil.ToFloat64(m.metrics.orphans.WithLabelValues("clicks~dlq")); n != 1 {
		t.Errorf("orphans removed from clicks~dlq: %v, want 1", n)
	}
	for _, name := range []string{"clicks~dlq", "views~dlq"} {
		if n := testutil.ToFloat64(m.metrics.failures.WithLabelValues(name)); n != 0 {
			t.Errorf("failures of %s: %v, want 0", name, n)
		}
	}
	if n := testutil.ToFloat64(m.metrics.runs.WithLabelValues("views~dlq")); n != 0 {
		t.Errorf("runs on views~dlq, which does not exist: %v, want 0", n)
	}
}
