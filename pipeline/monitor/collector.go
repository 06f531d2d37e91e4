package monitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/clientauth"
)

// DefaultMetricsTopic is the ops topic the components publish to.
const DefaultMetricsTopic = "_millrace.metrics"

// Config is a Collector's settings. Zero values mean the defaults noted.
type Config struct {
	// Brokers are the seed brokers (required).
	Brokers []string
	// Security is the TLS and SASL settings of the connections to
	// Brokers. Default none: PLAINTEXT without authentication.
	Security clientauth.Settings
	// Interval is the time between cluster reads. Default 2s.
	Interval time.Duration
	// MetricsTopic is the ops topic the components publish their own
	// metrics to. Default _millrace.metrics.
	MetricsTopic string
	// SampleTopics are further topics of metric-sample events, charted
	// with the components' metrics. Default ops.metrics, where the
	// beacon's POST /v1/metrics writes.
	SampleTopics []string
	// Lookback is how far back the metrics topic is read at start, so
	// component rates exist at once (the components publish every 10 s by
	// default). Default 5m.
	Lookback time.Duration
	// StaleAfter marks a component stale when its last sample is older.
	// Default 1m (several missed publications).
	StaleAfter time.Duration
	// MaxSeries bounds the counter series kept. Default 10000.
	MaxSeries int
	// HistorySeries bounds the series of the metric history. Default
	// 4000: at most about 46 MB with full rings of 720 points of 16 bytes.
	HistorySeries int
	// HistoryWindow is how far back the metric history goes. Default 1h.
	// Give Lookback as much to fill it at start.
	HistoryWindow time.Duration
	// HistoryPoints is the most points kept per series. Default 720: an
	// hour at a 5 s interval, twice the components' default rate.
	HistoryPoints int
}

// DefaultSampleTopic is where the beacon writes posted metric samples.
const DefaultSampleTopic = "ops.metrics"

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = 2 * time.Second
	}
	if c.MetricsTopic == "" {
		c.MetricsTopic = DefaultMetricsTopic
	}
	if c.Lookback == 0 {
		c.Lookback = 5 * time.Minute
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = time.Minute
	}
	if c.MaxSeries == 0 {
		c.MaxSeries = 10000
	}
	if c.SampleTopics == nil {
		c.SampleTopics = []string{DefaultSampleTopic}
	}
	if c.HistoryWindow == 0 {
		c.HistoryWindow = time.Hour
	}
	if c.HistoryPoints == 0 {
		c.HistoryPoints = 720
	}
	if c.HistorySeries == 0 {
		c.HistorySeries = 4000
	}
	return c
}

// Validate rejects settings the collector cannot run with.
func (c Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("monitor: no brokers given")
	case c.Interval < 100*time.Millisecond:
		return fmt.Errorf("monitor: interval %v is below 100ms, which would load the brokers for no visible gain", c.Interval)
	case c.Lookback < 0 || c.StaleAfter < 0 || c.MaxSeries < 0 || c.HistoryWindow < 0 || c.HistoryPoints < 0 || c.HistorySeries < 0:
		return errors.New("monitor: lookback, stale_after, max_series and the history's window and points cannot be negative")
	}
	if err := c.Security.Validate(); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	return nil
}

// Collector reads the cluster every Interval and follows the ops metrics
// topic; Latest returns the newest Snapshot. Start runs it, Shutdown stops
// it; both are called once.
type Collector struct {
	cfg      Config
	logger   *slog.Logger
	admin    *kgo.Client
	adm      *kadm.Client
	follower *kgo.Client
	counters *counters
	history  *History
	problems *problemSet
	quotas   *quotaSet

	stop context.CancelFunc
	wg   sync.WaitGroup // the refresh loop and the metrics follower

	mu      sync.Mutex // guards the following
	prev    *clusterRead
	latest  Snapshot
	updated chan struct{} // closed when latest is replaced
	failing bool          // the last read failed (logged once per outage)
}

// New makes a collector; it connects lazily, so brokers that are not up
// yet are no error (Ping checks them).
func New(cfg Config, logger *slog.Logger) (*Collector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	security, err := cfg.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("monitor: %w", err)
	}
	opts := append(append(ClientOpts(), security...), kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("millrace-monitor"))
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	// Reading from a timestamp needs no group: the follower lists offsets
	// by time (ListOffsets) and fetches from there.
	follower, err := kgo.NewClient(append(opts,
		kgo.ConsumeTopics(append([]string{cfg.MetricsTopic}, cfg.SampleTopics...)...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(time.Now().Add(-cfg.Lookback).UnixMilli())))...)
	if err != nil {
		admin.Close()
		return nil, err
	}
	return &Collector{
		cfg: cfg, logger: logger, admin: admin, adm: kadm.NewClient(admin), follower: follower,
		counters: newCounters(cfg.MaxSeries),
		history:  NewHistory(cfg.HistoryPoints, cfg.HistoryWindow, cfg.HistorySeries),
		problems: newProblemSet(cfg.MaxSeries),
		quotas:   newQuotaSet(cfg.MaxSeries),
		latest:   Snapshot{Controller: -1, MetricsTopic: cfg.MetricsTopic},
		updated:  make(chan struct{}),
	}, nil
}

// Ping checks that a seed broker answers.
func (c *Collector) Ping(ctx context.Context) error { return Ping(ctx, c.admin) }

// Interval is the time between cluster reads.
func (c *Collector) Interval() time.Duration { return c.cfg.Interval }

// Start runs the refresh loop (a read now, then every Interval) and the
// metrics follower until Shutdown.
func (c *Collector) Start(context.Context) error {
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		c.follow(ctx)
	}()
	go func() {
		defer c.wg.Done()
		c.loop(ctx)
	}()
	return nil
}

// Shutdown stops the loops and closes the clients.
func (c *Collector) Shutdown(ctx context.Context) error {
	if c.stop != nil {
		c.stop()
	}
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.follower.Close()
	c.admin.Close()
	if err == nil {
		// Close unblocked any poll still running; now the loops are done.
		<-done
	}
	return err
}

// Latest is the newest snapshot (Seq 0 before the first read).
func (c *Collector) Latest() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest
}

// MetricSeries lists the metric series read so far (History.Series).
func (c *Collector) MetricSeries(match string, limit int) SeriesList {
	return c.history.Series(match, limit)
}

// MetricPoints returns one series' recent points (History.Points).
func (c *Collector) MetricPoints(id string) (SeriesPoints, bool) { return c.history.Points(id) }

// Updated returns a channel closed when the next snapshot replaces Latest.
func (c *Collector) Updated() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updated
}

func (c *Collector) loop(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		c.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refresh reads the cluster once and publishes the new snapshot. A failed
// read keeps the last cluster view, with the failure in Errors.
func (c *Collector) refresh(ctx context.Context) {
	// The metadata may wait AnswerTimeout on a hung broker before another
	// broker answers; the other reads take up to ReadTimeout.
	readCtx, cancel := context.WithTimeout(ctx, max(2*AnswerTimeout+ReadTimeout, c.cfg.Interval))
	defer cancel()
	read, err := readCluster(readCtx, c.adm, time.Now())
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var s Snapshot
	if err != nil {
		if !c.failing {
			c.logger.Warn("reading the cluster failed", "err", err)
		}
		c.failing = true
		s = c.latest
		s.Errors = []string{err.Error()}
	} else {
		if c.failing {
			c.logger.Info("reading the cluster works again")
		}
		c.failing = false
		s = buildSnapshot(c.prev, read)
		c.prev = read
	}
	s.Seq = c.latest.Seq + 1
	s.MetricsTopic = c.cfg.MetricsTopic
	s.Components = c.counters.components(time.Now(), c.cfg.StaleAfter)
	s.Inputs = c.counters.inputs(time.Now(), c.cfg.StaleAfter)
	s.Problems = c.problems.current(time.Now(), c.cfg.StaleAfter)
	s.Quotas = c.quotas.current(time.Now(), c.cfg.StaleAfter)
	c.latest = s
	close(c.updated)
	c.updated = make(chan struct{})
}

// follow reads the ops topics into the counters and the history until ctx
// ends.
func (c *Collector) follow(ctx context.Context) {
	logger := c.logger
	bad := 0
	for {
		fetches := c.follower.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			// A missing metrics topic is normal until a component
			// publishes; the client keeps looking for it.
			logger.Debug("reading an ops topic", "topic", topic, "partition", partition, "err", err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			samples, ok := decodeOps(r.Value)
			if !ok {
				bad++
				return
			}
			// Components, inputs and problems are what the processes
			// publish about themselves on the ops topic. A sample topic
			// holds what senders post or remote-write, which is charted
			// only: a Prometheus that scrapes millrace's /metrics and
			// remote-writes them back must not show as a component.
			own := r.Topic == c.cfg.MetricsTopic
			for _, s := range samples {
				c.history.add(s)
				if own {
					c.counters.add(s)
					c.problems.add(s)
					c.quotas.add(s)
				}
			}
		})
		if bad > 0 {
			logger.Debug("skipped values that are no metric samples", "count", bad)
			bad = 0
		}
	}
}
