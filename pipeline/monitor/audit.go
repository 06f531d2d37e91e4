package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/internal/clientauth"
	"millrace/pipeline/reconcile"
	"millrace/sinks/iceberg"
	"millrace/sinks/lakeread"
	"millrace/store"
)

// AuditLake is one lake the console audits.
type AuditLake struct {
	// Name is shown on the page: the sink's name, or the lake's URL.
	Name string
	// Store is the lake; the caller opens and closes it.
	Store store.Store
	// URL is the lake's canonical URL (store.CanonicalURL). When set, the
	// topics judged against the lake are the ones sinks announced they land
	// there, and a topic agents feed that no sink lands is reported.
	URL string
	// Topics are the data topics landed in this lake, for a lake without
	// URL; empty means every topic that agents publish counts for.
	Topics []string
	// Tables is the catalog of the lake's Iceberg tables (`format:
	// iceberg` sinks), its Directory the lake's; nil looks for the default
	// catalog (catalog.db, namespace millrace) in a lake directory.
	Tables *iceberg.Config
}

// AuditConfig is an Auditor's settings. Zero values mean the defaults noted.
type AuditConfig struct {
	// Brokers are the seed brokers of the cluster with the audit topic
	// (required).
	Brokers []string
	// Security is the TLS and SASL settings of the connection to Brokers.
	// Default none: PLAINTEXT without authentication.
	Security clientauth.Settings
	// Topic is the audit topic. Default _millrace.audit.
	Topic string
	// Lakes are audited against the topic (at least one).
	Lakes []AuditLake
	// Since is how far back each run audits. Default 24h.
	Since time.Duration
	// Interval is the time between runs; every run reads the audit topic
	// from its start and every footer of the Since window, so it is minutes,
	// not seconds. Default 1m, at least 10s.
	Interval time.Duration
}

// Defaults of AuditConfig.
const (
	DefaultAuditSince    = 24 * time.Hour
	DefaultAuditInterval = time.Minute
	// auditRunTimeout bounds one run, as `millrace audit` does.
	auditRunTimeout = 5 * time.Minute
)

func (c AuditConfig) withDefaults() AuditConfig {
	if c.Topic == "" {
		c.Topic = audit.Topic
	}
	if c.Since == 0 {
		c.Since = DefaultAuditSince
	}
	if c.Interval == 0 {
		c.Interval = DefaultAuditInterval
	}
	return c
}

// Validate rejects settings the auditor cannot run with.
func (c AuditConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("monitor: audit: no brokers given")
	case len(c.Lakes) == 0:
		return errors.New("monitor: audit: no lake given")
	case c.Since < time.Hour:
		return fmt.Errorf("monitor: audit: since %v is below an hour, the audit's unit", c.Since)
	case c.Interval < 10*time.Second:
		return fmt.Errorf("monitor: audit: interval %v is below 10s; each run reads the whole audit topic and the window's footers", c.Interval)
	}
	for i, l := range c.Lakes {
		if l.Store == nil {
			return fmt.Errorf("monitor: audit: lake %d (%s) has no store", i, l.Name)
		}
	}
	if err := c.Security.Validate(); err != nil {
		return fmt.Errorf("monitor: audit: %w", err)
	}
	return nil
}

// AuditLakeReport is the last audit of one lake.
type AuditLakeReport struct {
	Name   string            `json:"name"`
	Report *reconcile.Report `json:"report"`
	// OmittedLines counts the ok lines left out of the page (see
	// maxViewLines); `millrace audit` lists them all.
	OmittedLines int `json:"omitted_lines,omitempty"`
}

// maxViewLines bounds the lines of one lake the console's page gets, so it
// stays fast when agents hold tens of thousands of sources: the lines that
// need a look (not reconciled, unknown, open) come first, then ok ones.
const maxViewLines = 1000

// forView returns the lakes' reports with at most maxViewLines lines each.
func forView(lakes []AuditLakeReport) []AuditLakeReport {
	out := make([]AuditLakeReport, len(lakes))
	for i, l := range lakes {
		out[i] = l
		if l.Report == nil || len(l.Report.Lines) <= maxViewLines {
			continue
		}
		r := *l.Report
		rank := func(line reconcile.Line) int {
			switch line.Status {
			case reconcile.StatusMismatch:
				return 0
			case reconcile.StatusUnknown:
				return 1
			case reconcile.StatusOpen:
				return 2
			}
			return 3
		}
		lines := slices.Clone(r.Lines)
		slices.SortStableFunc(lines, func(a, b reconcile.Line) int { return rank(a) - rank(b) })
		r.Lines = lines[:maxViewLines]
		out[i].Report, out[i].OmittedLines = &r, len(lines)-maxViewLines
	}
	return out
}

// AuditView is what the console's audit page shows: the last completed
// run, or why there is none.
type AuditView struct {
	// Configured is false when the console has no lake to audit; Message
	// then says how to give it one.
	Configured bool   `json:"configured"`
	Message    string `json:"message,omitempty"`
	// Seq counts completed runs (0 before the first).
	Seq   int               `json:"seq"`
	Lakes []AuditLakeReport `json:"lakes"`
	// Unreconciled counts, per data topic, the hours with a line that does
	// not add up; the millrace_audit_unreconciled_hours gauge has the same.
	Unreconciled map[string]int `json:"unreconciled_hours"`
	// NotLanded lists the topics agents feed that no sink announced it
	// lands; the millrace_audit_topics_not_landed gauge counts them.
	NotLanded []string `json:"not_landed,omitempty"`
	// ComputedAt is when the last successful run ended.
	ComputedAt      time.Time `json:"computed_at,omitzero"`
	IntervalSeconds float64   `json:"interval_seconds"`
	SinceSeconds    float64   `json:"since_seconds"`
	// Error is why the last run failed; the counts are then the previous
	// run's.
	Error string `json:"error,omitempty"`
}

// AuditSource gives the last audit; *Auditor is one.
type AuditSource interface {
	LatestAudit() AuditView
}

// NoAuditMessage is what the page says when the console has no lake.
const NoAuditMessage = "the audit needs a lake: start the console with --lake file:///PATH or s3://BUCKET/PREFIX " +
	"(millrace up audits its sinks' outputs)"

// auditRun computes one audit: a report per configured lake, in order.
type auditRun func(ctx context.Context, now time.Time) ([]AuditLakeReport, error)

// Auditor reconciles the audit topic with the lakes every Interval in a
// goroutine of its own (never per scrape or page load: a run reads the
// whole audit topic and many footers) and keeps the last result for the
// page and the millrace_audit_unreconciled_hours gauge. Start runs it,
// Shutdown stops it; both are called once.
type Auditor struct {
	cfg    AuditConfig
	logger *slog.Logger
	run    auditRun

	unreconciled *prometheus.GaugeVec
	notLanded    prometheus.Gauge
	lastSuccess  prometheus.Gauge

	stop context.CancelFunc
	wg   sync.WaitGroup // the run loop

	mu      sync.Mutex // guards the following
	latest  AuditView
	updated chan struct{} // closed when latest is replaced
	failing bool          // the last run failed (logged once per outage)
}

// NewAuditor makes an auditor and registers its gauges on reg.
func NewAuditor(cfg AuditConfig, reg prometheus.Registerer, logger *slog.Logger) (*Auditor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newAuditor(cfg, reg, logger, cfg.runAudit)
}

func newAuditor(cfg AuditConfig, reg prometheus.Registerer, logger *slog.Logger, run auditRun) (*Auditor, error) {
	a := &Auditor{
		cfg: cfg, logger: logger, run: run,
		unreconciled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "millrace_audit_unreconciled_hours",
			Help: "Complete hours of the audit window whose produced, landed, dead-lettered and deduplicated counts do not add up, per data topic.",
		}, []string{"topic"}),
		notLanded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "millrace_audit_topics_not_landed",
			Help: "Topics agents feed that no sink announced it lands: their events reach no lake.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "millrace_audit_last_success_timestamp_seconds",
			Help: "When the last audit run completed (Unix seconds); an old value means the unreconciled-hours gauge is stale.",
		}),
		latest:  AuditView{Configured: true, IntervalSeconds: cfg.Interval.Seconds(), SinceSeconds: cfg.Since.Seconds()},
		updated: make(chan struct{}),
	}
	for _, c := range []prometheus.Collector{a.unreconciled, a.notLanded, a.lastSuccess} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("monitor: audit: %w", err)
		}
	}
	return a, nil
}

// Start runs an audit now and then every Interval until Shutdown.
func (a *Auditor) Start(context.Context) error {
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.loop(ctx)
	}()
	return nil
}

// Shutdown stops the loop, cancelling a run in flight, and waits for it.
func (a *Auditor) Shutdown(ctx context.Context) error {
	if a.stop != nil {
		a.stop()
	}
	done := make(chan struct{})
	go func() {
		a.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LatestAudit is the last run's view.
func (a *Auditor) LatestAudit() AuditView {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.latest
}

// Updated returns a channel closed when the next run replaces LatestAudit.
func (a *Auditor) Updated() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.updated
}

func (a *Auditor) loop(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		a.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refresh runs one audit and publishes it. A failed run keeps the previous
// counts (and gauge values), with the failure in Error.
func (a *Auditor) refresh(ctx context.Context) {
	runCtx, cancel := context.WithTimeout(ctx, max(auditRunTimeout, a.cfg.Interval))
	defer cancel()
	lakes, err := a.run(runCtx, time.Now())
	if ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.latest
	v.Seq++
	if err != nil {
		if !a.failing {
			a.logger.Warn("auditing the lake failed", "err", err)
		}
		a.failing = true
		v.Error = err.Error()
	} else {
		if a.failing {
			a.logger.Info("auditing the lake works again")
		}
		a.failing = false
		v.Error, v.Lakes, v.ComputedAt = "", forView(lakes), time.Now()
		v.Unreconciled = unreconciledHours(lakes)
		v.NotLanded = notLanded(lakes)
		a.notLanded.Set(float64(len(v.NotLanded)))
		// Reset drops the topics no longer audited; every audited topic
		// has a series, 0 when it reconciles, so an alert sees it.
		a.unreconciled.Reset()
		for topic, n := range v.Unreconciled {
			a.unreconciled.WithLabelValues(topic).Set(float64(n))
		}
		a.lastSuccess.Set(float64(v.ComputedAt.UnixNano()) / 1e9)
	}
	a.latest = v
	close(a.updated)
	a.updated = make(chan struct{})
}

// unreconciledHours counts per topic the distinct hours with a MISMATCH
// line, with 0 for audited topics that reconcile.
func unreconciledHours(lakes []AuditLakeReport) map[string]int {
	bad := map[[2]string]bool{}
	out := map[string]int{}
	for _, l := range lakes {
		for _, line := range l.Report.Lines {
			if _, ok := out[line.Topic]; !ok {
				out[line.Topic] = 0
			}
			k := [2]string{line.Topic, line.Hour}
			if line.Status == reconcile.StatusMismatch && !bad[k] {
				bad[k] = true
				out[line.Topic]++
			}
		}
	}
	return out
}

// notLanded lists, sorted and once each, the topics a lake's report found
// no sink for.
func notLanded(lakes []AuditLakeReport) []string {
	set := map[string]bool{}
	for _, l := range lakes {
		for _, n := range l.Report.NotLanded {
			set[n.Topic] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// runAudit reads the audit topic once and reconciles every lake against
// the records of its own topics (records of a topic landed elsewhere
// would otherwise show as events lost in this lake).
func (c AuditConfig) runAudit(ctx context.Context, now time.Time) ([]AuditLakeReport, error) {
	// The files are read every run, so a rotated password or
	// certificate is taken up without a restart.
	security, err := c.Security.Opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(append(ClientOpts(), security...), kgo.SeedBrokers(c.Brokers...), kgo.ClientID("millrace-audit"))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	log, err := audit.Read(ctx, cl, c.Topic)
	if err != nil {
		return nil, err
	}
	latest := audit.Latest(log.Entries)
	now = now.UTC()
	since := now.Add(-c.Since).Truncate(time.Hour)
	out := make([]AuditLakeReport, 0, len(c.Lakes))
	for _, l := range c.Lakes {
		records := latest
		if l.URL == "" && len(l.Topics) > 0 {
			records = maps.Clone(latest)
			maps.DeleteFunc(records, func(_ string, e audit.Entry) bool { return !slices.Contains(l.Topics, e.Topic) })
		}
		in := reconcile.Input{Records: records, Runs: log.Runs, LakeURL: l.URL, Since: since, Now: now}
		tables, closeTables, err := lakeTables(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("lake %s: %w", l.Name, err)
		}
		tables.EndOffsets = reconcile.EndOffsets(cl)
		// A day past now: events may carry times a little ahead of the clock.
		lake, err := reconcile.ReadLakeTables(ctx, l.Store, tables, in.Topics(), since, now.Add(24*time.Hour), now)
		closeTables()
		if err != nil {
			return nil, fmt.Errorf("lake %s: %w", l.Name, err)
		}
		in.Lake = lake
		r := reconcile.Reconcile(in)
		r.SkippedRecords, r.At = log.Skipped, now
		out = append(out, AuditLakeReport{Name: l.Name, Report: r})
	}
	return out, nil
}

// lakeTables opens the Iceberg catalog of a lake (catalogOf), whose
// tables' topics the audit reads from their current snapshots; a lake
// without one has only Hive directories.
func lakeTables(ctx context.Context, l AuditLake) (reconcile.Tables, func(), error) {
	cfg, ok := catalogOf(l)
	if !ok {
		return reconcile.Tables{}, func() {}, nil
	}
	cat, err := lakeread.OpenCatalog(ctx, cfg)
	if err != nil {
		return reconcile.Tables{}, nil, err
	}
	return reconcile.Tables{Catalog: cat}, func() { cat.Close() }, nil
}

// catalogOf is the catalog of l's tables: l.Tables, else the default
// catalog.db of a lake directory that holds one; false when l has none.
func catalogOf(l AuditLake) (iceberg.Config, bool) {
	if l.Tables != nil {
		return *l.Tables, true
	}
	dir, ok := strings.CutPrefix(l.URL, "file://")
	if !ok || !lakeread.HasDefaultCatalog(dir) {
		return iceberg.Config{}, false
	}
	return iceberg.Config{Directory: dir}, true
}
