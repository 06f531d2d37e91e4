package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus"

	"millrace/sinks/iceberg"
	"millrace/store"
)

// MaintenanceConfig is the scheduled table maintenance of Format iceberg,
// the maintenance: key under iceberg:. Every interval, the worker that
// holds partition 0 of a topic compacts the topic's table, expires its old
// snapshots and sweeps its orphan files (iceberg.Catalog.Maintain).
type MaintenanceConfig struct {
	// Disabled turns the scheduled maintenance off (`millrace lake
	// compact|expire|orphans` still run it by hand).
	Disabled bool `yaml:"disabled"`
	// Interval is the time between two runs; the first runs one interval
	// after the worker starts. Default 1h.
	Interval time.Duration `yaml:"interval"`
	// TargetFileSize is the size, in bytes, compaction packs a closed
	// hour's (or day's) small files up to. Default 128 MiB.
	TargetFileSize int64 `yaml:"target_file_size"`
	// KeepSnapshotsDays is how many days of snapshots expiry keeps (time
	// travel reaches that far back); the snapshot holding each group's
	// offsets is kept however old, under its tag. Default 7.
	KeepSnapshotsDays int `yaml:"keep_snapshots_days"`
	// MaxSnapshots also expires younger snapshots while a table holds more
	// than about this many (the offsets snapshots are kept all the same):
	// each commit costs more the more snapshots the table keeps, about
	// 0.15 ms per snapshot here, and a topic of a few partitions rolled
	// every minute makes thousands a day. Default 500; -1 for no bound.
	MaxSnapshots int `yaml:"max_snapshots"`
	// OrphanAge is how old a file no snapshot references must be before
	// the sweep deletes it. Default 72h, Iceberg's own default for
	// remove_orphan_files; at least 1h (see validate).
	OrphanAge time.Duration `yaml:"orphan_age"`
}

// Defaults of MaintenanceConfig.
const (
	defaultMaintenanceInterval = time.Hour
	defaultKeepSnapshotsDays   = 7
	defaultMaxSnapshots        = 500
	defaultOrphanAge           = 72 * time.Hour
	// minOrphanAge bounds OrphanAge from below: a worker publishes a
	// roll's files before it commits them, and until the commit they are
	// orphans. A worker paused between the two (a long GC, a SIGSTOP)
	// still commits them when it resumes if no other worker committed its
	// partitions meanwhile (the fence in doc.go only stops it when one
	// did). It opens each file (tableCommitter.dataFile) just before the
	// commit, so a file swept during a pause before that fails the commit
	// and the window is landed again; only a pause between that open and
	// the commit (milliseconds of work) that outlasts the age could commit
	// a swept file. The age must exceed any such pause: Iceberg's 3 days
	// by default, an hour at the least.
	minOrphanAge = time.Hour
)

func (m MaintenanceConfig) validate() []error {
	var errs []error
	if m.Interval < 0 {
		errs = append(errs, fmt.Errorf("lake: iceberg.maintenance.interval %v: want a positive duration (disabled: true turns it off)", m.Interval))
	}
	if m.TargetFileSize < 0 {
		errs = append(errs, fmt.Errorf("lake: iceberg.maintenance.target_file_size %d: want a positive size in bytes", m.TargetFileSize))
	}
	if m.KeepSnapshotsDays < 0 {
		errs = append(errs, fmt.Errorf("lake: iceberg.maintenance.keep_snapshots_days %d: want a positive number of days", m.KeepSnapshotsDays))
	}
	if m.MaxSnapshots < -1 {
		errs = append(errs, fmt.Errorf("lake: iceberg.maintenance.max_snapshots %d: want a positive number (-1 for no bound)", m.MaxSnapshots))
	}
	if m.OrphanAge != 0 && m.OrphanAge < minOrphanAge {
		errs = append(errs, fmt.Errorf("lake: iceberg.maintenance.orphan_age %v: want %v or more: a younger unreferenced file "+
			"may be a roll about to be committed", m.OrphanAge, minOrphanAge))
	}
	return errs
}

// interval is Interval or its default.
func (m MaintenanceConfig) interval() time.Duration {
	if m.Interval <= 0 {
		return defaultMaintenanceInterval
	}
	return m.Interval
}

// options are the sinks/iceberg options of m, defaults applied.
func (m MaintenanceConfig) options() iceberg.MaintainOptions {
	days, maxSnapshots, age := m.KeepSnapshotsDays, m.MaxSnapshots, m.OrphanAge
	if days <= 0 {
		days = defaultKeepSnapshotsDays
	}
	switch maxSnapshots {
	case 0:
		maxSnapshots = defaultMaxSnapshots
	case -1:
		maxSnapshots = 0 // no bound
	}
	if age <= 0 {
		age = defaultOrphanAge
	}
	return iceberg.MaintainOptions{
		Compact: iceberg.CompactOptions{TargetSize: m.TargetFileSize}, // 0: iceberg.DefaultTargetSize
		Expire:  iceberg.ExpireOptions{Keep: time.Duration(days) * 24 * time.Hour, MaxSnapshots: maxSnapshots},
		Orphans: iceberg.OrphanOptions{SafetyAge: age},
	}
}

// maintainer runs a worker's scheduled table maintenance in a goroutine of
// its own, off the landing path: it takes none of the worker's locks but
// w.mu for a lookup, and its commits meet the rolls' only at the catalog.
//
// Of a group's workers, only the one holding partition 0 of a topic
// maintains the topic's table. Two maintainers at once lose nothing (each
// maintenance commit asserts the branch's head, so one commit wins and the
// other plans again on the table it left), but both would read and merge
// the same hour's files for nothing (the loser, merging the same inputs,
// replaces the winner's file with the same bytes under the same name).
// During a rebalance two workers may both believe they hold partition 0
// for a moment; that overlap, and `millrace lake compact` run by hand
// while the sinks run, cost work, never rows.
//
// A maintenance commit and a roll commit race like two rolls: whichever
// commits second fails its assertion on the head. A roll then rebases
// (tablecommit.go): compaction and expiry carry or keep every group's
// offsets, so no partition moved and the roll commits again; a
// maintenance commit that loses plans again on the fresh table, up to a
// few times, and is otherwise skipped until the next run.
type maintainer struct {
	catalog *iceberg.Catalog
	topics  []string
	table   func(topic string) *table.Table // the worker's copy; reloaded before use
	// deadLetters loads topic's dead-letter table: nil (and no error) when
	// it does not exist, no record of the topic having been dead-lettered.
	deadLetters func(ctx context.Context, topic string) (*table.Table, error)
	holds       func(tp topicPartition) bool
	interval    time.Duration
	opts        iceberg.MaintainOptions
	metrics     *maintenanceMetrics
	logger      *slog.Logger

	stop context.CancelFunc
	done chan struct{}
}

// start runs m until shutdown.
func (m *maintainer) start() {
	ctx, stop := context.WithCancel(context.Background())
	m.stop, m.done = stop, make(chan struct{})
	go m.run(ctx)
}

// shutdown stops m and waits for a run in progress to end: a compaction
// cut short leaves its merged file uncommitted, for the orphan sweep.
func (m *maintainer) shutdown() {
	m.stop()
	<-m.done
}

func (m *maintainer) run(ctx context.Context) {
	defer close(m.done)
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, topic := range m.topics {
			if ctx.Err() != nil {
				return
			}
			if m.holds(topicPartition{topic, 0}) {
				m.maintain(ctx, topic, m.table(topic))
				m.maintainDeadLetters(ctx, topic)
			}
		}
	}
}

// deadLetterLoader is a maintainer's deadLetters on cat: a topic's
// dead-letter table is created by its first dead letter, and may not exist.
func deadLetterLoader(cat *iceberg.Catalog) func(ctx context.Context, topic string) (*table.Table, error) {
	return func(ctx context.Context, topic string) (*table.Table, error) {
		tbl, err := cat.Catalog().LoadTable(ctx, cat.Identifier(topic+iceberg.DeadLetterSuffix))
		if errors.Is(err, catalog.ErrNoSuchTable) {
			return nil, nil
		}
		return tbl, err
	}
}

// maintainDeadLetters maintains topic's dead-letter table, when it exists:
// a dead-letter commit that lost its race leaves a file only the sweep
// removes, and its snapshots age like the topic's. It is unpartitioned,
// so compaction leaves it as it is.
func (m *maintainer) maintainDeadLetters(ctx context.Context, topic string) {
	name := topic + iceberg.DeadLetterSuffix
	tbl, err := m.deadLetters(ctx, topic)
	if err != nil {
		if ctx.Err() == nil {
			m.metrics.failures.WithLabelValues(name).Inc()
			m.logger.Warn("loading the dead-letter table for maintenance failed", "table", name, "err", err)
		}
		return
	}
	m.maintain(ctx, name, tbl)
}

// maintain runs the maintenance of tbl, the table named name, and counts
// what it did under name.
func (m *maintainer) maintain(ctx context.Context, name string, tbl *table.Table) {
	if tbl == nil {
		return
	}
	m.metrics.runs.WithLabelValues(name).Inc()
	started := time.Now()
	// Planned on the catalog's head, not the worker's copy, which may be a
	// roll behind: a plan on a stale table merges files only to lose the
	// commit race.
	var res iceberg.MaintainResult
	fresh, err := m.catalog.Reload(ctx, tbl)
	if err == nil {
		res, err = m.catalog.Maintain(ctx, fresh, m.opts)
	}
	m.metrics.compacted.WithLabelValues(name).Add(float64(res.Compact.FilesRemoved))
	m.metrics.expired.WithLabelValues(name).Add(float64(res.Expire.Expired))
	m.metrics.orphans.WithLabelValues(name).Add(float64(len(res.Orphans.Files)))
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down
		}
		m.metrics.failures.WithLabelValues(name).Inc()
		m.logger.Warn("table maintenance failed; it runs again at the next interval", "table", name, "err", err, "next_in", m.interval)
		return
	}
	m.logger.Info("table maintenance done", "table", name, "took", time.Since(started),
		"files_compacted", res.Compact.FilesRemoved, "files_written", res.Compact.FilesAdded,
		"snapshots_expired", res.Expire.Expired, "orphans_removed", len(res.Orphans.Files))
}

// maintenanceMetrics are the scheduled maintenance's Prometheus series.
type maintenanceMetrics struct {
	runs      *prometheus.CounterVec // table: the topic, or the topic's dead-letter table
	compacted *prometheus.CounterVec // table
	expired   *prometheus.CounterVec // table
	orphans   *prometheus.CounterVec // table
	failures  *prometheus.CounterVec // table

	reg prometheus.Registerer // where they are registered, or nil
}

func newMaintenanceMetrics(reg prometheus.Registerer) *maintenanceMetrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
			Name: name, Help: help}, []string{"table"})
	}
	m := &maintenanceMetrics{
		runs:      counter("maintenance_runs_total", "Scheduled maintenance runs of an Iceberg table, a topic's or its dead-letter table (compact, expire, orphan sweep)."),
		compacted: counter("maintenance_files_compacted_total", "Small data files replaced by merged files in a closed hour or day."),
		expired:   counter("maintenance_snapshots_expired_total", "Table snapshots expired."),
		orphans:   counter("maintenance_orphans_removed_total", "Files no snapshot referenced, removed by the orphan sweep."),
		failures:  counter("maintenance_failures_total", "Scheduled maintenance runs that failed (retried at the next interval)."),
	}
	if reg != nil {
		reg.MustRegister(m.all()...)
		m.reg = reg
	}
	return m
}

func (m *maintenanceMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.runs, m.compacted, m.expired, m.orphans, m.failures}
}

// unregister removes the series, as metrics.unregister does.
func (m *maintenanceMetrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.all() {
		m.reg.Unregister(c)
	}
}

// newMaintainer is the worker's scheduled maintenance of the tables tc
// commits to.
func (w *Worker) newMaintainer(tc *tableCommitter) *maintainer {
	mc := w.cfg.Iceberg.Maintenance
	return &maintainer{
		catalog: tc.catalog,
		topics:  w.cfg.Topics,
		table: func(topic string) *table.Table {
			tc.mu.Lock()
			defer tc.mu.Unlock()
			return tc.tables[topic]
		},
		deadLetters: deadLetterLoader(tc.catalog),
		holds:       func(tp topicPartition) bool { return w.partition(tp) != nil },
		interval:    mc.interval(),
		opts:        mc.options(),
		metrics:     newMaintenanceMetrics(w.metrics.reg),
		logger:      w.logger.With("maintenance", true),
	}
}

// OpenCatalog opens the catalog of tc as a sink of Format iceberg whose
// store is st does, for tools that work on its tables (`millrace lake
// compact|expire|orphans`): an S3 warehouse's file IO takes st's settings.
func OpenCatalog(ctx context.Context, tc TableConfig, st store.Store, logger *slog.Logger) (*iceberg.Catalog, error) {
	if err := errors.Join(tc.validate()...); err != nil {
		return nil, err
	}
	cc, err := tc.catalogConfig(st, logger)
	if err != nil {
		return nil, err
	}
	cat, err := iceberg.Open(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("lake: %w", err)
	}
	return cat, nil
}
