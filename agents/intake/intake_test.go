package intake

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/schemas"
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

func TestPublisherWritesValidMetricEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jobs_total"}, []string{"kind"})
	c.WithLabelValues("a").Add(3)
	reg.MustRegister(c)
	rec := &recorder{}
	p := &Publisher{Gatherer: reg, Producer: rec, Topic: "_millrace.metrics", Source: "h:test", Interval: time.Hour}
	if err := p.PublishOnce(context.Background(), time.Unix(1800000000, 0)); err != nil {
		t.Fatal(err)
	}
	if len(rec.recs) != 1 {
		t.Fatalf("%d records, want 1", len(rec.recs))
	}
	r := rec.recs[0]
	if r.Topic != "_millrace.metrics" || string(r.Key) != "jobs_total" {
		t.Fatalf("record %s/%s", r.Topic, r.Key)
	}
	if err := schemas.Validate(schemas.Metric, r.Value); err != nil {
		t.Fatalf("event does not fit the metric schema: %v: %s", err, r.Value)
	}
	var ev map[string]any
	json.Unmarshal(r.Value, &ev)
	if ev["value"] != 3.0 || ev["kind"] != "counter" || ev["source"] != "h:test" || ev["labels"].(map[string]any)["kind"] != "a" {
		t.Fatalf("event %s", r.Value)
	}
}
