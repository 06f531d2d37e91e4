package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer sends audit records; the agents' *ship.Shipper is one. The ack
// is called once per record, with nil once the broker acknowledged it.
type Producer interface {
	Produce(ctx context.Context, rec *kgo.Record, ack func(*kgo.Record, error))
	Flush(ctx context.Context) error
}

// countKey identifies one count: the data topic, the source key and the
// hour as hours since the Unix epoch (cheaper than the formatted hour on
// the agents' hot paths).
type countKey struct {
	topic  string
	source string
	hour   int64
}

// count is one key's cumulative total and what of it was published.
type count struct {
	total     int64 // cumulative accepted events
	published int64 // the total of the last record the broker acknowledged
	sending   bool  // a record is in flight: wait for its answer before the next
}

// Counter accumulates an agent's cumulative counts per (topic, source,
// hour) and publishes the ones that changed as audit records, every
// Config.Interval and at Shutdown. Each record carries the absolute total,
// so for one key the latest record wins and a republished value never
// counts twice. Memory is bounded: an hour older than Config.Retention is
// dropped once its last total is published, and at most Config.MaxKeys
// keys are held.
//
// A counter that is not distinct keeps its totals in memory only, so each
// process run publishes under its own run id (Record.Run) and announces
// itself with Run records: a restart adds a run instead of overwriting the
// earlier run's totals, and a run killed before its last publication is
// known to the reconciler as such (see Run).
type Counter struct {
	cfg      Config
	role     string
	instance string
	distinct bool
	producer Producer
	logger   *slog.Logger
	now      func() time.Time // the clock; tests replace it

	// run is this process run's id, empty for a distinct counter.
	run     string
	started time.Time
	skew    time.Duration

	mu       sync.Mutex // guards the following
	counts   map[countKey]*count
	refused  int64 // events not counted: hour beyond retention, or a Set past MaxKeys
	folded   int64 // new keys counted in OtherSource instead
	lastWarn time.Time
	lastRun  time.Time // when the run was last announced

	cancel context.CancelFunc
	done   chan struct{}
}

// NewCounter makes a counter publishing for (role, instance); distinct
// says whether its totals count each event once across crashes and
// re-sends (see Record.Distinct). cfg gets its defaults and is checked.
func NewCounter(cfg Config, role, instance string, distinct bool, producer Producer, logger *slog.Logger) (*Counter, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if instance == "" {
		return nil, errors.New("audit: an instance id is required")
	}
	if producer == nil {
		return nil, errors.New("audit: a producer is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Counter{
		cfg: cfg, role: role, instance: instance, distinct: distinct, producer: producer,
		now:    time.Now,
		counts: map[countKey]*count{},
		skew:   DefaultEventSkew,
	}
	if !distinct {
		c.started = c.now()
		c.run = NewRunID(c.started)
		logger = logger.With("run", c.run)
	}
	c.logger = logger.With("component", "audit", "role", role, "instance", instance)
	return c, nil
}

// DefaultEventSkew is how far an event's time may be from its
// acknowledgement unless SetEventSkew says otherwise: the beacon's default
// bound on a client's clock.
const DefaultEventSkew = 24 * time.Hour

// SetEventSkew says how far the time of a counted event may be from the
// moment the broker acknowledged it (the beacon's max_clock_skew). The
// reconciler widens the hours a killed run may have left uncounted by it.
// Call it before Start.
func (c *Counter) SetEventSkew(d time.Duration) { c.skew = d }

// Run is the counter's process run id ("" for a distinct counter).
func (c *Counter) Run() string { return c.run }

// heartbeat is how often a run is announced while it runs.
func (c *Counter) heartbeat() time.Duration { return max(c.cfg.Interval, time.Minute) }

// HourOf is the hour key of t: whole hours since the Unix epoch, UTC.
func HourOf(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		return (s - 3599) / 3600
	}
	return s / 3600
}

// hourString formats an hour key as HourLayout.
func hourString(h int64) string { return Hour(time.Unix(h*3600, 0)) }

// Add counts n more events of (topic, source) at event time at. It is
// safe for concurrent use and cheap enough for every acknowledged event.
func (c *Counter) Add(topic, source string, at time.Time, n int64) {
	c.AddFrom(topic, source, at, n, nil)
}

// AddFrom is Add for events of a client whose new sources are rate
// limited: when (topic, source, hour) has no count yet, newSource (when not
// nil) says whether the client may open one. If it may not, or
// Config.MaxKeys counts are held, the events are counted in the topic's
// OtherSource count of the hour instead: exactly, only coarser. So a client
// sending many made-up sources can neither make the table grow without
// bound nor make a legitimate source's count wrong.
func (c *Counter) AddFrom(topic, source string, at time.Time, n int64, newSource func() bool) {
	k := countKey{topic, source, HourOf(at)}
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.counts[k]
	if ct == nil {
		ct = c.newCountLocked(k, newSource)
	}
	if ct != nil {
		ct.total += n
	}
}

// Set sets the cumulative total of (topic, source, hour) to total, for an
// agent that keeps its totals itself (the tailer, with its checkpoint). A
// total below the one held is ignored: totals only grow.
func (c *Counter) Set(topic, source string, hour int64, total int64) {
	k := countKey{topic, source, hour}
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.counts[k]
	if ct == nil {
		// A folded total could not be set again next time (it adds up
		// several sources): the tailer's sources are few and its own.
		if len(c.counts) >= c.cfg.MaxKeys || k.hour < c.oldestHour(c.now()) {
			c.refuseLocked(k, "audit.max_keys is reached or the hour is past audit.retention")
			return
		}
		ct = &count{}
		c.counts[k] = ct
	}
	ct.total = max(ct.total, total)
}

// newCountLocked makes the count of k, or finds the hour's OtherSource count
// the events of k go to instead, or returns nil for an hour past retention.
func (c *Counter) newCountLocked(k countKey, newSource func() bool) *count {
	// A key dropped after its retention would start again from zero, and
	// its smaller total would win over the one published: refuse it.
	if k.hour < c.oldestHour(c.now()) {
		c.refuseLocked(k, "their hour is past audit.retention")
		return nil
	}
	if k.source != OtherSource && (len(c.counts) >= c.cfg.MaxKeys || newSource != nil && !newSource()) {
		c.folded++
		k.source = OtherSource
		if ct := c.counts[k]; ct != nil {
			return ct
		}
		// The other counts are at most one per topic and hour held, so
		// they may pass MaxKeys.
	}
	ct := &count{}
	c.counts[k] = ct
	return ct
}

// refuseLocked counts and logs, at most once a minute, events not counted.
func (c *Counter) refuseLocked(k countKey, why string) {
	c.refused++
	if now := c.now(); now.Sub(c.lastWarn) >= time.Minute {
		c.lastWarn = now
		c.logger.Warn("events not audited: "+why,
			"topic", k.topic, "source", k.source, "hour", hourString(k.hour), "keys", len(c.counts), "refused_total", c.refused)
	}
}

// oldestHour is the first hour still kept at now.
func (c *Counter) oldestHour(now time.Time) int64 {
	return HourOf(now.Add(-c.cfg.Retention))
}

// Retention is how long an hour's counts are kept (Config.Retention).
func (c *Counter) Retention() time.Duration { return c.cfg.Retention }

// Refused is the number of events not counted (see Config.Retention).
func (c *Counter) Refused() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// Folded is the number of times a new source was counted in OtherSource
// instead of a count of its own (see AddFrom).
func (c *Counter) Folded() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.folded
}

// Keys is the number of counts held.
func (c *Counter) Keys() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.counts)
}

// Start announces the run (for a counter that is not distinct) and
// publishes every Config.Interval until Shutdown.
func (c *Counter) Start(ctx context.Context) {
	if c.run != "" {
		c.mu.Lock()
		c.lastRun = c.now()
		c.mu.Unlock()
		c.announce(ctx, c.lastRun, false, nil)
	}
	ctx, c.cancel = context.WithCancel(ctx)
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		tick := time.NewTicker(c.cfg.Interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c.Publish(ctx)
			}
		}
	}()
}

// Shutdown stops the periodic publishing, waits for the producer's records
// in flight (their acknowledgements may still count), publishes what
// changed since the last time and waits for the broker's answers until ctx
// ends. Stop the agent first, the producer after.
func (c *Counter) Shutdown(ctx context.Context) error {
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	if err := c.producer.Flush(ctx); err != nil {
		return fmt.Errorf("audit: waiting for the last acknowledgements: %w", err)
	}
	c.Publish(ctx)
	if err := c.producer.Flush(ctx); err != nil {
		return fmt.Errorf("audit: publishing the last counts: %w", err)
	}
	c.mu.Lock()
	for k, ct := range c.counts {
		if ct.total != ct.published {
			c.mu.Unlock()
			return fmt.Errorf("audit: the last count of %s %s %s was not acknowledged", k.topic, k.source, hourString(k.hour))
		}
	}
	c.mu.Unlock()
	if c.run == "" {
		return nil
	}
	// Every count is acknowledged: say so, so that the reconciler takes
	// this run's totals as final.
	stopErr := errors.New("not acknowledged")
	var stopMu sync.Mutex // guards stopErr, set on the producer's goroutine
	c.announce(ctx, c.now(), true, func(err error) {
		stopMu.Lock()
		defer stopMu.Unlock()
		stopErr = err
	})
	if err := c.producer.Flush(ctx); err != nil {
		return fmt.Errorf("audit: publishing the end of run %s: %w", c.run, err)
	}
	stopMu.Lock()
	defer stopMu.Unlock()
	if stopErr != nil {
		return fmt.Errorf("audit: publishing the end of run %s: %w", c.run, stopErr)
	}
	return nil
}

// announce publishes the run's record stamped at; done, when not nil, gets
// the broker's answer. A lost announcement is made up by the next one.
func (c *Counter) announce(ctx context.Context, at time.Time, stopped bool, done func(error)) {
	r := Run{Role: c.role, Instance: c.instance, ID: c.run, StartedAt: c.started.UTC(), SeenAt: at.UTC(), Stopped: stopped,
		SkewSeconds: int64(c.skew / time.Second), HeartbeatSeconds: int64(c.heartbeat() / time.Second)}
	value, err := r.Marshal()
	if err != nil { // a Run always marshals
		if done != nil {
			done(err)
		}
		return
	}
	c.producer.Produce(ctx, &kgo.Record{Topic: c.cfg.Topic, Key: []byte(r.Key()), Value: value}, func(_ *kgo.Record, err error) {
		if err != nil {
			c.logger.Debug("audit run record not acknowledged", "err", err)
		}
		if done != nil {
			done(err)
		}
	})
}

// Publish produces a record for every count whose total changed since its
// last acknowledged record (and has none in flight), and drops the hours
// past retention whose last total is published. It does not wait for the
// acknowledgements: a record that fails is produced again next time.
func (c *Counter) Publish(ctx context.Context) {
	now := c.now()
	oldest := c.oldestHour(now)
	type out struct {
		k     countKey
		total int64
	}
	var send []out
	c.mu.Lock()
	for k, ct := range c.counts {
		switch {
		case ct.sending:
		case ct.total != ct.published:
			ct.sending = true
			send = append(send, out{k, ct.total})
		case k.hour < oldest:
			delete(c.counts, k)
		}
	}
	heartbeat := c.run != "" && now.Sub(c.lastRun) >= c.heartbeat()
	if heartbeat {
		c.lastRun = now
	}
	c.mu.Unlock()
	for _, o := range send {
		r := Record{Role: c.role, Instance: c.instance, Run: c.run, Topic: o.k.topic, Source: o.k.source, Hour: hourString(o.k.hour),
			Accepted: o.total, Distinct: c.distinct, UpdatedAt: now.UTC()}
		value, err := r.Marshal()
		if err != nil { // a Record always marshals; keep the key retryable regardless
			c.settle(o.k, o.total, err)
			continue
		}
		k, total := o.k, o.total
		c.producer.Produce(ctx, &kgo.Record{Topic: c.cfg.Topic, Key: []byte(r.Key()), Value: value}, func(_ *kgo.Record, err error) {
			c.settle(k, total, err)
		})
	}
	if heartbeat {
		c.announce(ctx, now, false, nil)
	}
}

// settle records the broker's answer for the record of k carrying total.
func (c *Counter) settle(k countKey, total int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.counts[k]
	if ct == nil {
		return
	}
	ct.sending = false
	if err != nil {
		c.logger.Debug("audit record not acknowledged; publishing it again next interval", "topic", k.topic, "source", k.source, "err", err)
		return
	}
	ct.published = max(ct.published, total)
}

// Snapshot returns the cumulative totals held, as records stamped now
// (for tests and for a status page).
func (c *Counter) Snapshot() []Record {
	now := c.now().UTC()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Record, 0, len(c.counts))
	for k, ct := range c.counts {
		out = append(out, Record{Role: c.role, Instance: c.instance, Run: c.run, Topic: k.topic, Source: k.source,
			Hour: hourString(k.hour), Accepted: ct.total, Distinct: c.distinct, UpdatedAt: now})
	}
	return out
}
