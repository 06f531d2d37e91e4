package intake

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

func TestParseExpositionExpandsFamilies(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	body := `# TYPE reqs counter
reqs{code="200"} 12
# TYPE temp gauge
temp 21.5 1700000000000
# TYPE lat histogram
lat_bucket{le="0.1"} 3
lat_bucket{le="1"} 5
lat_bucket{le="+Inf"} 6
lat_sum 4.2
lat_count 6
# TYPE rpc summary
rpc{quantile="0.5"} 0.2
rpc_sum 9
rpc_count 30
free 7
`
	got, err := ParseExposition([]byte(body), now)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range got {
		lines = append(lines, s.Name+" "+s.Kind+" "+formatBound(s.Value)+" "+s.Labels["le"]+s.Labels["quantile"]+s.Labels["code"]+" "+s.TS.Format(time.RFC3339))
	}
	want := []string{
		"free untyped 7  2026-11-30T12:00:00Z",
		"lat_bucket histogram 3 0.1 2026-11-30T12:00:00Z",
		"lat_bucket histogram 5 1 2026-11-30T12:00:00Z",
		"lat_bucket histogram 6 +Inf 2026-11-30T12:00:00Z",
		"lat_sum histogram 4.2  2026-11-30T12:00:00Z",
		"lat_count histogram 6  2026-11-30T12:00:00Z",
		"reqs counter 12 200 2026-11-30T12:00:00Z",
		"rpc summary 0.2 0.5 2026-11-30T12:00:00Z",
		"rpc_sum summary 9  2026-11-30T12:00:00Z",
		"rpc_count summary 30  2026-11-30T12:00:00Z",
		"temp gauge 21.5  2023-11-14T22:13:20Z",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("samples:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if _, err := ParseExposition([]byte("not { a metric\n"), now); err == nil {
		t.Fatal("garbage parsed")
	}
}

// recorder is a Producer that keeps what it is given.
type recorder struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func (r *recorder) Produce(_ context.Context, rec *kgo.Record, ack ship.AckFunc) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	if ack != nil {
		ack(rec, nil)
	}
}

func TestPublisherWritesOneBatchPerComponent(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "millrace_tail_lines_read_total"}, []string{"input"})
	c.WithLabelValues("a").Add(3)
	c.WithLabelValues("b").Add(4)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "go_goroutines"})
	g.Set(12)
	nan := prometheus.NewGauge(prometheus.GaugeOpts{Name: "millrace_ship_fill"})
	nan.Set(math.NaN())
	reg.MustRegister(c, g, nan)
	rec := &recorder{}
	p := &Publisher{Gatherer: reg, Producer: rec, Topic: "_millrace.metrics", Source: "h:test", Interval: time.Hour}
	now := time.Unix(1800000000, 0).UTC()
	if err := p.PublishOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	// runtime, ship, tail: one record each, in component order.
	if len(rec.recs) != 3 {
		t.Fatalf("%d records, want 3 (one per component)", len(rec.recs))
	}
	var got []Batch
	for i, want := range []string{"runtime", "ship", "tail"} {
		r := rec.recs[i]
		if r.Topic != "_millrace.metrics" || string(r.Key) != want {
			t.Fatalf("record %d: %s/%s, want key %s", i, r.Topic, r.Key, want)
		}
		var b Batch
		if err := json.Unmarshal(r.Value, &b); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, r.Value)
		}
		if b.Source != "h:test" || b.Component != want || !b.TS.Equal(now) {
			t.Fatalf("record %d: %s", i, r.Value)
		}
		got = append(got, b)
	}
	tail := got[2].Samples
	if len(tail) != 2 || tail[0].Value != 3 || tail[0].Labels["input"] != "a" || tail[1].Value != 4 || tail[0].Kind != "counter" {
		t.Fatalf("tail batch %+v", tail)
	}
	if v := got[1].Samples[0].Value; !math.IsNaN(float64(v)) {
		t.Fatalf("NaN came back as %v", v)
	}
}

// An idle process writes one record per component per interval, however
// many series it has.
func TestPublisherIdleRecordCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectorsForTest()...)
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "millrace_ship_ack_seconds", Buckets: prometheus.DefBuckets}, []string{"producer"})
	for _, p := range []string{"a", "b", "c"} {
		h.WithLabelValues(p).Observe(0.1)
	}
	reg.MustRegister(h)
	rec := &recorder{}
	p := &Publisher{Gatherer: reg, Producer: rec, Topic: "_millrace.metrics", Source: "h:test", Interval: time.Hour}
	const intervals = 5
	start := time.Unix(1800000000, 0)
	series := 0
	for i := range intervals {
		if err := p.PublishOnce(context.Background(), start.Add(time.Duration(i)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	components := map[string]bool{}
	for _, r := range rec.recs {
		var b Batch
		if err := json.Unmarshal(r.Value, &b); err != nil {
			t.Fatal(err)
		}
		components[b.Component] = true
		series += len(b.Samples)
	}
	if len(components) != 2 {
		t.Fatalf("components %v, want runtime and ship", components)
	}
	if len(rec.recs) != intervals*len(components) {
		t.Fatalf("%d records over %d intervals, want %d (one per component and interval)", len(rec.recs), intervals, intervals*len(components))
	}
	if series/intervals < 50 {
		t.Fatalf("only %d series per interval: the test should have many more series than records", series/intervals)
	}
}

func TestBatchesSplitLargeComponents(t *testing.T) {
	samples := make([]Sample, MaxBatchSamples+1)
	for i := range samples {
		samples[i] = Sample{Name: "millrace_broker_x", Kind: "gauge", Value: float64(i)}
	}
	b := Batches(samples, "s", time.Now())
	if len(b) != 2 || len(b[0].Samples) != MaxBatchSamples || len(b[1].Samples) != 1 || b[1].Samples[0].Value != MaxBatchSamples {
		t.Fatalf("batches %d", len(b))
	}
}

func TestComponentOf(t *testing.T) {
	for name, want := range map[string]string{
		"millrace_tail_lines_read_total": "tail", "millrace_lake_rows_total": "lake", "go_goroutines": "runtime",
		"process_cpu_seconds_total": "runtime", "myapp_queue_depth": "other", "millrace_": "other",
	} {
		if got := ComponentOf(name); got != want {
			t.Errorf("ComponentOf(%q) = %q, want %q", name, got, want)
		}
	}
}

func collectorsForTest() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}
