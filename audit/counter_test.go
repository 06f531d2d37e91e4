package audit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// fakeProducer keeps what was produced; answer decides each ack.
type fakeProducer struct {
	mu      sync.Mutex
	records []*kgo.Record
	answer  func(*kgo.Record) error
	held    []func() // acks delayed until release
	hold    bool
	runs    []Run // run records taken out by take
}

func (p *fakeProducer) Produce(_ context.Context, rec *kgo.Record, ack func(*kgo.Record, error)) {
	p.mu.Lock()
	p.records = append(p.records, rec)
	var err error
	if p.answer != nil {
		err = p.answer(rec)
	}
	if p.hold {
		p.held = append(p.held, func() { ack(rec, err) })
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	ack(rec, err)
}

func (p *fakeProducer) Flush(context.Context) error { return nil }

func (p *fakeProducer) release() {
	p.mu.Lock()
	held := p.held
	p.held, p.hold = nil, false
	p.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (p *fakeProducer) take(t *testing.T) []Record {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Record
	for _, r := range p.records {
		if run, ok, err := decodeRun(r.Value); ok {
			if err != nil || string(r.Key) != run.Key() {
				t.Fatalf("run record %s: %v", r.Value, err)
			}
			p.runs = append(p.runs, run)
			continue
		}
		rec, err := ParseRecord(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != rec.Key() || r.Topic != Topic {
			t.Fatalf("record key %q topic %q, want %q on %s", r.Key, r.Topic, rec.Key(), Topic)
		}
		out = append(out, rec)
	}
	p.records = nil
	return out
}

func newTestCounter(t *testing.T, p *fakeProducer, now *time.Time, cfg Config) *Counter {
	t.Helper()
	c, err := NewCounter(cfg, RoleBeacon, "b1", false, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return *now }
	return c
}

var h3 = time.Date(2026, 12, 2, 3, 10, 0, 0, time.UTC)

func TestCounterPublishesCumulativeChangedOnly(t *testing.T) {
	p := &fakeProducer{}
	now := h3
	c := newTestCounter(t, p, &now, Config{})
	c.Add("clicks", "a.example", h3, 2)
	c.Add("clicks", "a.example", h3.Add(30*time.Minute), 1)
	c.Add("clicks", "b.example", h3.Add(time.Hour), 1)
	c.Publish(context.Background())
	got := p.take(t)
	want := map[string]int64{"a.example/2026-12-02T03": 3, "b.example/2026-12-02T04": 1}
	if len(got) != len(want) {
		t.Fatalf("published %d records, want %d: %+v", len(got), len(want), got)
	}
	for _, r := range got {
		if want[r.Source+"/"+r.Hour] != r.Accepted || r.Role != RoleBeacon || r.Instance != "b1" || r.Distinct {
			t.Errorf("record %+v, want accepted %d", r, want[r.Source+"/"+r.Hour])
		}
	}
	// Nothing changed: nothing published.
	c.Publish(context.Background())
	if got := p.take(t); len(got) != 0 {
		t.Fatalf("unchanged counts published again: %+v", got)
	}
	// One key changed: only it, with the cumulative total.
	c.Add("clicks", "a.example", h3, 4)
	c.Publish(context.Background())
	got = p.take(t)
	if len(got) != 1 || got[0].Source != "a.example" || got[0].Accepted != 7 {
		t.Fatalf("after 4 more: %+v, want a.example with 7", got)
	}
}

func TestCounterRepublishesWhatFailed(t *testing.T) {
	fail := true
	p := &fakeProducer{answer: func(*kgo.Record) error {
		if fail {
			return errors.New("broker down")
		}
		return nil
	}}
	now := h3
	c := newTestCounter(t, p, &now, Config{})
	c.Add("clicks", "a", h3, 1)
	c.Publish(context.Background())
	fail = false
	c.Add("clicks", "a", h3, 1)
	c.Publish(context.Background())
	got := p.take(t)
	if len(got) != 2 || got[0].Accepted != 1 || got[1].Accepted != 2 {
		t.Fatalf("got %+v, want the failed total 1 then the latest 2", got)
	}
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown with everything acknowledged: %v", err)
	}
}

func TestCounterOneRecordInFlightPerKey(t *testing.T) {
	p := &fakeProducer{hold: true}
	now := h3
	c := newTestCounter(t, p, &now, Config{})
	c.Add("clicks", "a", h3, 1)
	c.Publish(context.Background())
	c.Add("clicks", "a", h3, 1)
	c.Publish(context.Background()) // the first is unanswered: wait
	if got := p.take(t); len(got) != 1 {
		t.Fatalf("%d records in flight for one key, want 1", len(got))
	}
	p.release()
	c.Publish(context.Background())
	if got := p.take(t); len(got) != 1 || got[0].Accepted != 2 {
		t.Fatalf("after the answer: %+v, want the total 2", got)
	}
}

func TestCounterBounded(t *testing.T) {
	p := &fakeProducer{}
	now := h3
	c := newTestCounter(t, p, &now, Config{Retention: 2 * time.Hour, MaxKeys: 3})
	c.Add("clicks", "a", h3, 1)
	c.Add("clicks", "b", h3, 1)
	c.Add("clicks", "c", h3, 1)
	c.Add("clicks", "d", h3, 1) // beyond max_keys: counted in (other)
	c.Add("clicks", "e", h3, 2) // the same (other) count
	c.Add("clicks", "a", h3, 1) // an existing key still counts
	if c.Keys() != 4 || c.Refused() != 0 || c.Folded() != 2 {
		t.Fatalf("keys %d refused %d folded %d, want 4 (3 and other), 0 and 2", c.Keys(), c.Refused(), c.Folded())
	}
	// Past retention, an unpublished hour is kept until published…
	now = h3.Add(4 * time.Hour)
	c.Publish(context.Background())
	if c.Keys() != 4 {
		t.Fatalf("keys dropped before their last total was published: %d", c.Keys())
	}
	got := p.take(t)
	totals := map[string]int64{}
	for _, r := range got {
		totals[r.Source] = r.Accepted
	}
	if len(got) != 4 || totals["a"] != 2 || totals[OtherSource] != 3 {
		t.Fatalf("published %+v, want a 2, b 1, c 1 and (other) 3", got)
	}
	// …then dropped, and a late event of that hour is refused instead of
	// starting a smaller total that would win over the published one.
	c.Publish(context.Background())
	if c.Keys() != 0 {
		t.Fatalf("keys past retention kept after publishing: %d", c.Keys())
	}
	c.Add("clicks", "a", h3, 1)
	if c.Keys() != 0 || c.Refused() != 1 {
		t.Fatalf("late event: keys %d refused %d, want 0 and 1", c.Keys(), c.Refused())
	}
}

func TestCounterSetOnlyGrows(t *testing.T) {
	p := &fakeProducer{}
	now := h3
	c := newTestCounter(t, p, &now, Config{})
	c.Set("logs", "h:/a.log", HourOf(h3), 5)
	c.Set("logs", "h:/a.log", HourOf(h3), 3)
	c.Publish(context.Background())
	if got := p.take(t); len(got) != 1 || got[0].Accepted != 5 {
		t.Fatalf("got %+v, want 5", got)
	}
}

func TestCounterPublishesPeriodicallyAndAtShutdown(t *testing.T) {
	p := &fakeProducer{}
	c, err := NewCounter(Config{Interval: 100 * time.Millisecond}, RoleIntake, "i", false, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Start(context.Background())
	c.Add("metrics", "node", time.Now(), 1)
	waitfor.Until(t, 5*time.Second, "a publication at a 100ms interval", func() bool { return len(p.take(t)) > 0 })
	c.Add("metrics", "node", time.Now(), 1)
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := p.take(t)
	if len(got) == 0 || got[len(got)-1].Accepted != 2 {
		t.Fatalf("at shutdown: %+v, want the total 2", got)
	}
}

func TestInstanceIDStable(t *testing.T) {
	dir := t.TempDir()
	a, err := InstanceID(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := InstanceID(dir)
	if err != nil || a != b || a == "" {
		t.Fatalf("ids %q, %q (%v): want one stable id", a, b, err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	c := Config{}.WithDefaults()
	if !c.On() || c.Topic != Topic || c.Interval != 10*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	for name, bad := range map[string]Config{
		"interval":  {Interval: time.Millisecond},
		"retention": {Retention: time.Hour},
		"max_keys":  {MaxKeys: -1},
	} {
		if err := bad.WithDefaults().Validate(); err == nil {
			t.Errorf("%s: accepted %+v", name, bad)
		}
	}
}

// TestCounterRunsAddUp restarts a beacon's counter as a new process would:
// each run publishes under its own key, so the second run's smaller total
// does not replace the first's, and each run is announced at start, on its
// heartbeat and, once every count is acknowledged, as stopped.
func TestCounterRunsAddUp(t *testing.T) {
	p := &fakeProducer{}
	now := h3
	var totals []Record
	var runIDs []string
	for run, n := range []int64{4, 1} {
		c := newTestCounter(t, p, &now, Config{})
		c.Start(context.Background())
		c.Add("clicks", "shop", h3, n)
		c.Publish(context.Background())
		now = now.Add(2 * time.Minute) // past the heartbeat
		c.Publish(context.Background())
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := p.take(t)
		if len(got) != 1 || got[0].Run != c.Run() || got[0].Accepted != n {
			t.Fatalf("run %d published %+v, want one record of run %s with %d", run, got, c.Run(), n)
		}
		totals = append(totals, got...)
		runIDs = append(runIDs, c.Run())
		states := []bool{}
		for _, r := range p.runs {
			if r.ID != c.Run() || r.Role != RoleBeacon || r.Instance != "b1" || r.SkewSeconds != int64(DefaultEventSkew/time.Second) {
				t.Fatalf("run record %+v of run %s", r, c.Run())
			}
			states = append(states, r.Stopped)
		}
		// Start, the heartbeat two minutes on, the end.
		if len(states) != 3 || states[0] || states[1] || !states[2] {
			t.Fatalf("run %d announced stopped states %v, want false, false, true", run, states)
		}
		p.runs = nil
	}
	if runIDs[0] == runIDs[1] || totals[0].Key() == totals[1].Key() {
		t.Fatalf("two runs share run id %q or key %q", runIDs[0], totals[0].Key())
	}
	latest := map[string]int64{}
	for _, r := range totals {
		latest[r.Key()] = r.Accepted
	}
	var sum int64
	for _, n := range latest {
		sum += n
	}
	if sum != 5 {
		t.Fatalf("the runs' latest totals add up to %d, want 5", sum)
	}
}

// TestCounterNotStoppedWhenCountsFail: a run whose last counts were not
// acknowledged must not say it stopped cleanly.
func TestCounterNotStoppedWhenCountsFail(t *testing.T) {
	p := &fakeProducer{answer: func(r *kgo.Record) error {
		if _, ok, _ := decodeRun(r.Value); ok {
			return nil
		}
		return errors.New("broker down")
	}}
	now := h3
	c := newTestCounter(t, p, &now, Config{})
	c.Start(context.Background())
	c.Add("clicks", "shop", h3, 1)
	if err := c.Shutdown(context.Background()); err == nil {
		t.Fatal("shutdown succeeded with its last count refused")
	}
	p.take(t)
	for _, r := range p.runs {
		if r.Stopped {
			t.Fatalf("run announced stopped although its count was refused: %+v", r)
		}
	}
}

// TestCounterNewSourcesLimited: a client that may open no more sources has
// its new ones counted in (other), its known ones as before.
func TestCounterNewSourcesLimited(t *testing.T) {
	p := &fakeProducer{}
	now := h3
	c := newTestCounter(t, p, &now, Config{})
	allow := 2
	limited := func() bool { allow--; return allow >= 0 }
	for _, src := range []string{"a", "b", "c", "d", "a"} {
		c.AddFrom("clicks", src, h3, 1, limited)
	}
	c.Publish(context.Background())
	totals := map[string]int64{}
	for _, r := range p.take(t) {
		totals[r.Source] = r.Accepted
	}
	if len(totals) != 3 || totals["a"] != 2 || totals["b"] != 1 || totals[OtherSource] != 2 {
		t.Fatalf("totals %v, want a 2, b 1, (other) 2", totals)
	}
}
