package log

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CleanerConfig is the log cleaner's broker-wide configuration, named
// after Kafka's broker configs.
type CleanerConfig struct {
	// Enable (log.cleaner.enable, default true): run the cleaner; without
	// it compacted topics are never compacted.
	Enable bool
	// Threads (log.cleaner.threads, default 1): logs cleaned at once.
	Threads int
	// IOMaxBytesPerSecond (log.cleaner.io.max.bytes.per.second, default
	// unlimited, Kafka's Double.MAX_VALUE): the bytes all cleaner threads
	// together read and write per second.
	IOMaxBytesPerSecond float64
	// DedupeBufferSize (log.cleaner.dedupe.buffer.size, default 128 MiB):
	// the memory the offset maps of all threads may take, 24 bytes a slot
	// whatever the key's size (cleaner_offset_map.go); a pass whose dirty
	// keys do not fit stops at the first record that does not, even inside
	// a segment, and the next pass goes on from there. At least 1 MiB per
	// thread.
	DedupeBufferSize int64
	// Backoff (log.cleaner.backoff.ms, default 15 s): how long a thread
	// sleeps when no log needs cleaning.
	Backoff time.Duration
}

// DefaultCleanerConfig returns Kafka's defaults.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{Enable: true, Threads: 1, IOMaxBytesPerSecond: math.MaxFloat64, DedupeBufferSize: 128 << 20, Backoff: 15 * time.Second}
}

// Validate rejects impossible settings with a sentence that says why.
func (c CleanerConfig) Validate() error {
	var errs []error
	if c.Threads < 1 || c.Threads > 64 {
		errs = append(errs, fmt.Errorf("log.cleaner.threads %d must be between 1 and 64", c.Threads))
	}
	if !(c.IOMaxBytesPerSecond > 0) {
		errs = append(errs, fmt.Errorf("log.cleaner.io.max.bytes.per.second %v must be positive", c.IOMaxBytesPerSecond))
	}
	if c.Threads > 0 && c.DedupeBufferSize < int64(c.Threads)<<20 {
		errs = append(errs, fmt.Errorf("log.cleaner.dedupe.buffer.size %d must give each of the %d cleaner threads at least 1 MiB", c.DedupeBufferSize, c.Threads))
	}
	if c.Backoff <= 0 {
		errs = append(errs, fmt.Errorf("log.cleaner.backoff.ms %v must be positive", c.Backoff))
	}
	return errors.Join(errs...)
}

// Throttle paces I/O to a rate shared by all its users: the cleaner's
// threads, tiered storage's uploads. A nil Throttle does not pace.
type Throttle struct {
	rate float64 // bytes per second

	mu   sync.Mutex // guards the following
	next time.Time  // when the bytes granted so far have been paid for
}

// NewThrottle paces to bytesPerSecond; math.MaxFloat64 (or +Inf) means
// unlimited, and yields nil.
func NewThrottle(bytesPerSecond float64) *Throttle {
	if bytesPerSecond >= math.MaxFloat64 {
		return nil
	}
	return &Throttle{rate: bytesPerSecond}
}

// Wait blocks until n more bytes fit the rate, or ctx ends.
func (t *Throttle) Wait(ctx context.Context, n int) error {
	if t == nil {
		return ctx.Err()
	}
	t.mu.Lock()
	now := time.Now()
	// Idle time is not saved up beyond a tenth of a second of burst.
	t.next = maxTime(t.next, now.Add(-100*time.Millisecond))
	t.next = t.next.Add(time.Duration(float64(n) / t.rate * float64(time.Second)))
	delay := t.next.Sub(now)
	t.mu.Unlock()
	if delay <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// bind returns wait bound to ctx, as scanBatches takes it.
func (t *Throttle) bind(ctx context.Context) func(int) error {
	return func(n int) error { return t.Wait(ctx, n) }
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// cleanerMetrics are the cleaner's Prometheus metrics.
type cleanerMetrics struct {
	runs      prometheus.Counter
	reclaimed prometheus.Counter
	removed   prometheus.Counter
	mapFull   prometheus.Counter
	// Set after each round of choosing a log, read at scrape time.
	maxDirtyRatio atomic.Uint64 // math.Float64bits
	maxLagSeconds atomic.Uint64 // math.Float64bits
}

func newCleanerMetrics(reg prometheus.Registerer) (*cleanerMetrics, error) {
	m := &cleanerMetrics{
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_log_cleaner_runs_total", Help: "Cleaning passes that rewrote segments of a compacted log.",
		}),
		reclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_log_cleaner_bytes_reclaimed_total", Help: "Bytes of segments the cleaner freed (size before minus size after).",
		}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_log_cleaner_records_removed_total", Help: "Records the cleaner removed: superseded by a later record of their key, or expired tombstones.",
		}),
		mapFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_log_cleaner_map_full_total", Help: "Cleaning passes whose offset map (log.cleaner.dedupe.buffer.size) filled before the cleanable end; the next pass goes on from where it stopped.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	collectors := []prometheus.Collector{m.runs, m.reclaimed, m.removed, m.mapFull,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "millrace_log_cleaner_max_dirty_ratio", Help: "The largest dirty ratio (uncleaned share of the cleanable segments) of the compacted logs at the cleaner's last look.",
		}, func() float64 { return math.Float64frombits(m.maxDirtyRatio.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "millrace_log_cleaner_max_lag_seconds", Help: "Age of the oldest record not yet cleaned in a cleanable segment of any compacted log, at the cleaner's last look.",
		}, func() float64 { return math.Float64frombits(m.maxLagSeconds.Load()) }),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("log: registering cleaner metrics: %w", err)
		}
	}
	return m, nil
}

// logCleaner runs the cleaner threads of a Manager.
type logCleaner struct {
	m        *Manager
	cfg      CleanerConfig
	bound    func(TopicPartition) (int64, bool)
	throttle *Throttle
	metrics  *cleanerMetrics

	mu       sync.Mutex // guards the following
	cleaning map[*Log]bool
}

// StartCleaner starts cfg.Threads cleaner threads that compact the
// manager's logs whose cleanup.policy includes compact, until Close.
// bound, if set, gives the offset a partition's cleaning must stay below
// (its high watermark); a partition it reports false for is not cleaned.
// Metrics go to reg when it is set. Without cfg.Enable it does nothing.
func (m *Manager) StartCleaner(cfg CleanerConfig, bound func(TopicPartition) (int64, bool), reg prometheus.Registerer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if !cfg.Enable {
		return nil
	}
	metrics, err := newCleanerMetrics(reg)
	if err != nil {
		return err
	}
	c := &logCleaner{m: m, cfg: cfg, bound: bound, throttle: NewThrottle(cfg.IOMaxBytesPerSecond), metrics: metrics, cleaning: map[*Log]bool{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.wg.Add(cfg.Threads + 1)
	go func() {
		defer m.wg.Done()
		<-m.stop
		cancel()
	}()
	for range cfg.Threads {
		go func() {
			defer m.wg.Done()
			c.run(ctx)
		}()
	}
	return nil
}

func (c *logCleaner) run(ctx context.Context) {
	for {
		cleaned := c.cleanDirtiest(ctx)
		if cleaned {
			continue
		}
		t := time.NewTimer(c.cfg.Backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// cleanDirtiest cleans the due log with the highest dirty ratio that no
// other thread is cleaning, and reports whether it cleaned one.
func (c *logCleaner) cleanDirtiest(ctx context.Context) bool {
	now := time.Now()
	if c.m.opts.now != nil {
		now = c.m.opts.now()
	}
	var (
		best                 *Log
		bestTP               TopicPartition
		bestRatio            = -1.0
		bestBound            int64
		maxRatio, maxLagSecs float64
	)
	c.mu.Lock()
	defer func() {
		if best != nil {
			c.mu.Lock()
			delete(c.cleaning, best)
			c.mu.Unlock()
		}
	}()
	busy := make(map[*Log]bool, len(c.cleaning))
	for l := range c.cleaning {
		busy[l] = true
	}
	c.mu.Unlock()
	for tp, l := range c.m.All() {
		cfg := l.Config()
		if !cfg.Compacts() || busy[l] {
			continue
		}
		bound := int64(-1)
		if c.bound != nil {
			b, ok := c.bound(tp)
			if !ok {
				continue
			}
			bound = b
		}
		st, err := l.CleanerStats(now, bound)
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				c.m.logger.Error("cleaner cannot assess a log", "component", "log", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
			continue
		}
		maxRatio = max(maxRatio, st.DirtyRatio())
		if st.OldestDirty >= 0 {
			maxLagSecs = max(maxLagSecs, float64(now.UnixMilli()-st.OldestDirty)/1000)
		}
		if st.due(cfg, now) && st.DirtyRatio() > bestRatio {
			best, bestTP, bestRatio, bestBound = l, tp, st.DirtyRatio(), bound
		}
	}
	c.metrics.maxDirtyRatio.Store(math.Float64bits(maxRatio))
	c.metrics.maxLagSeconds.Store(math.Float64bits(maxLagSecs))
	if best == nil {
		return false
	}
	c.mu.Lock()
	if c.cleaning[best] {
		c.mu.Unlock()
		best = nil // another thread took it meanwhile
		return true
	}
	c.cleaning[best] = true
	c.mu.Unlock()
	res, err := best.Clean(ctx, CleanOptions{Now: now, Bound: bestBound, MapBytes: c.cfg.DedupeBufferSize / int64(c.cfg.Threads), Throttle: c.throttle})
	switch {
	case err == nil:
	case errors.Is(err, ErrClosed), errors.Is(err, ErrReplaceConflict), errors.Is(err, ErrOffsetOutOfRange), ctx.Err() != nil:
		// The log changed under the pass (deleted, truncated, retention)
		// or the broker is stopping: the next round starts again.
		return false
	default:
		c.m.logger.Error("cleaning failed", "component", "log", "topic", bestTP.Topic, "partition", bestTP.Partition, "err", err)
		return false
	}
	if res.Cleaned {
		c.metrics.runs.Inc()
		c.metrics.reclaimed.Add(float64(max(res.BytesBefore-res.BytesAfter, 0)))
		c.metrics.removed.Add(float64(res.RecordsRemoved))
	}
	if res.MapFull {
		c.metrics.mapFull.Inc()
	}
	return res.Cleaned
}
