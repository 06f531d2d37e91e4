package beacon

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"millrace/agents/promwrite"
	"millrace/agents/ship"
	"millrace/audit"
)

// rwSeries is a series of one sample for remoteWriteBody: label name and
// value pairs, the value and its time in milliseconds.
type rwSeries struct {
	labels []string
	value  float64
	ms     int64
}

// remoteWriteBody is a snappy-compressed remote write 1.0 WriteRequest as
// prompb marshals it (remote.proto, types.proto): WriteRequest {
// TimeSeries timeseries = 1 { Label labels = 1 {name = 1, value = 2};
// Sample samples = 2 {double value = 1; int64 timestamp = 2} };
// MetricMetadata metadata = 3 {type = 1; metric_family_name = 2} }.
func remoteWriteBody(series []rwSeries, metadata map[string]promwrite.MetricType) []byte {
	var req []byte
	for _, ts := range series {
		var b []byte
		for i := 0; i+1 < len(ts.labels); i += 2 {
			var l []byte
			l = protowire.AppendTag(l, 1, protowire.BytesType)
			l = protowire.AppendString(l, ts.labels[i])
			l = protowire.AppendTag(l, 2, protowire.BytesType)
			l = protowire.AppendString(l, ts.labels[i+1])
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendBytes(b, l)
		}
		var sm []byte
		sm = protowire.AppendTag(sm, 1, protowire.Fixed64Type)
		sm = protowire.AppendFixed64(sm, math.Float64bits(ts.value))
		sm = protowire.AppendTag(sm, 2, protowire.VarintType)
		sm = protowire.AppendVarint(sm, uint64(ts.ms))
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, sm)
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, b)
	}
	for family, typ := range metadata {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(typ))
		m = protowire.AppendTag(m, 2, protowire.BytesType)
		m = protowire.AppendString(m, family)
		req = protowire.AppendTag(req, 3, protowire.BytesType)
		req = protowire.AppendBytes(req, m)
	}
	return snappy.Encode(nil, req)
}

// postRemoteWrite sends body as a Prometheus server does and returns the
// status.
func postRemoteWrite(t *testing.T, url string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A remote-written sample lands in the beacon's metrics topic as the event
// /v1/metrics makes, its labels kept, and the metrics audit counts it by
// the request's source.
func TestRemoteWriteLandsInMetricsTopic(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Topic: topic, DLQTopic: dlqTopic, MetricsTopic: opsTopic, MetricsDLQTopic: opsDLQ}, ship.Config{})
	metrics := newAuditCounter(t, audit.RoleIntake)
	h.server.SetAudit(nil, metrics)
	at := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	body := remoteWriteBody([]rwSeries{{[]string{"__name__", "node_load1", "job", "node", "instance", "host-1:9100"}, 42, at.UnixMilli()}}, nil)
	if code := postRemoteWrite(t, h.http.URL+promwrite.Path+"?source=prom-a", body); code != http.StatusNoContent {
		t.Fatalf("remote write answered %d, want 204", code)
	}
	evs := h.events(opsTopic)
	if len(evs) != 1 {
		t.Fatalf("%d events in %s, want 1: %v", len(evs), opsTopic, evs)
	}
	ev := evs[0]
	labels, _ := ev["labels"].(map[string]any)
	if ev["name"] != "node_load1" || ev["value"] != 42.0 || ev["source"] != "prom-a" || ev["kind"] != "untyped" ||
		labels["job"] != "node" || labels["instance"] != "host-1:9100" || len(labels) != 2 {
		t.Fatalf("event %v", ev)
	}
	if ts, _ := time.Parse(time.RFC3339Nano, ev["ts"].(string)); !ts.Equal(at) {
		t.Fatalf("ts %v, want the sample's %v", ev["ts"], at)
	}
	want := map[string]int64{opsTopic + " prom-a " + audit.Hour(at): 1}
	if got := totals(metrics); !equalTotals(got, want) {
		t.Fatalf("audit totals %v, want %v", got, want)
	}
	var out strings.Builder
	rec := httptest.NewRecorder()
	h.server.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out.WriteString(rec.Body.String())
	for _, line := range []string{"millrace_promwrite_samples_produced_total 1", `millrace_promwrite_requests_total{code="204"} 1`,
		`millrace_beacon_requests_total{code="204",route="/api/v1/write"} 1`} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

// remote_write.enabled: false leaves the route out; the defaults send the
// samples to the metrics topic with the metrics source and the beacon's
// acknowledgement timeout.
func TestRemoteWriteConfig(t *testing.T) {
	t.Parallel()
	cfg := Config{MetricsTopic: "m", MetricsSource: "edge", AckTimeout: 3 * time.Second}.WithDefaults()
	if rw := cfg.RemoteWrite; !rw.On() || rw.Topic != "m" || rw.Source != "edge" || rw.AckTimeout != 3*time.Second || rw.MaxSamples != promwrite.DefaultMaxSamples {
		t.Fatalf("remote write defaults %+v", rw)
	}
	bad := Config{WriteTimeout: 5 * time.Second, AckTimeout: time.Second, RemoteWrite: RemoteWriteConfig{Config: promwrite.Config{AckTimeout: 6 * time.Second}}}.WithDefaults()
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "remote_write.ack_timeout") {
		t.Fatalf("an ack timeout past the write timeout: %v", err)
	}
	off := false
	srv, err := New(Config{RemoteWrite: RemoteWriteConfig{Enabled: &off}}, &ackingProducer{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, promwrite.Path, bytes.NewReader(remoteWriteBody([]rwSeries{{[]string{"__name__", "up"}, 1, time.Now().UnixMilli()}}, nil))))
	if rec.Code != http.StatusNotFound || srv.RemoteWriteOn() {
		t.Fatalf("disabled remote write answered %d", rec.Code)
	}
}

// TestRemoteWriteSameEventsAsMetricsIntake: samples sent by remote write
// become exactly the records (topic, key, value) POST /v1/metrics makes of
// the same samples in the text exposition format, kinds included (from
// the metadata), on the same beacon.
func TestRemoteWriteSameEventsAsMetricsIntake(t *testing.T) {
	t.Parallel()
	if promwrite.DefaultTopic != DefaultMetricsTopic {
		t.Fatalf("promwrite.DefaultTopic %q, the beacon's metrics topic %q", promwrite.DefaultTopic, DefaultMetricsTopic)
	}
	var recs []*kgo.Record
	p := &ackingProducer{fail: func(r *kgo.Record) error {
		recs = append(recs, r) // under the producer's lock
		return nil
	}}
	srv, err := New(Config{}, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	taken := func() []*kgo.Record {
		p.mu.Lock()
		defer p.mu.Unlock()
		out := recs
		recs = nil
		return out
	}
	const ms = 1700000000123
	exposition := `# TYPE http_requests_total counter
http_requests_total{code="200",job="api"} 1027 1700000000123
# TYPE temp gauge
temp{room="a b"} -21.5 1700000000123
# TYPE rpc_seconds histogram
rpc_seconds_bucket{le="0.1"} 3 1700000000123
rpc_seconds_bucket{le="+Inf"} 5 1700000000123
rpc_seconds_sum 1.5 1700000000123
rpc_seconds_count 5 1700000000123
other NaN 1700000000123
`
	r := httptest.NewRequest(http.MethodPost, "/v1/metrics?source=prom-1", strings.NewReader(exposition))
	r.Header.Set("Content-Type", "text/plain")
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("/v1/metrics: status %d: %s", w.Code, w.Body)
	}
	want := taken()

	// Prometheus sends metadata in requests of its own; the intake orders
	// families by name, and the series below follow it.
	send := func(body []byte) {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, promwrite.Path+"?source=prom-1", bytes.NewReader(body))
		r.Header.Set("Content-Encoding", "snappy")
		r.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusNoContent {
			t.Fatalf("remote write: status %d: %s", w.Code, w.Body)
		}
	}
	send(remoteWriteBody(nil, map[string]promwrite.MetricType{
		"http_requests_total": promwrite.TypeCounter, "temp": promwrite.TypeGauge, "rpc_seconds": promwrite.TypeHistogram}))
	send(remoteWriteBody([]rwSeries{
		{[]string{"__name__", "http_requests_total", "code", "200", "job", "api"}, 1027, ms},
		{[]string{"__name__", "other"}, math.NaN(), ms},
		{[]string{"__name__", "rpc_seconds_bucket", "le", "0.1"}, 3, ms},
		{[]string{"__name__", "rpc_seconds_bucket", "le", "+Inf"}, 5, ms},
		{[]string{"__name__", "rpc_seconds_sum"}, 1.5, ms},
		{[]string{"__name__", "rpc_seconds_count"}, 5, ms},
		{[]string{"__name__", "temp", "room", "a b"}, -21.5, ms},
	}, nil))
	got := taken()
	if len(got) != len(want) || len(want) != 7 {
		t.Fatalf("%d records, /v1/metrics made %d (want 7)", len(got), len(want))
	}
	for i := range want {
		if got[i].Topic != want[i].Topic || string(got[i].Key) != string(want[i].Key) || string(got[i].Value) != string(want[i].Value) {
			t.Errorf("record %d:\n got %s %s %s\nwant %s %s %s", i,
				got[i].Topic, got[i].Key, got[i].Value, want[i].Topic, want[i].Key, want[i].Value)
		}
	}
}

// A client opening audit sources faster than audit_new_sources gets its
// further sources' samples counted in "(other)", as on /v1/metrics.
func TestRemoteWriteLimitsNewAuditSources(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{AuditNewSources: 1, AuditNewSourcesBurst: 1}, &ackingProducer{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	srv.now = func() time.Time { return now } // no token comes back during the test
	metrics := newAuditCounter(t, audit.RoleIntake)
	srv.SetAudit(nil, metrics)
	at := now.Add(-time.Minute).UTC()
	for _, source := range []string{"a", "b", "c"} {
		r := httptest.NewRequest(http.MethodPost, promwrite.Path+"?source="+source,
			bytes.NewReader(remoteWriteBody([]rwSeries{{[]string{"__name__", "up"}, 1, at.UnixMilli()}}, nil)))
		r.Header.Set("Content-Encoding", "snappy")
		r.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusNoContent {
			t.Fatalf("source %s: status %d: %s", source, w.Code, w.Body)
		}
	}
	want := map[string]int64{DefaultMetricsTopic + " a " + audit.Hour(at): 1, DefaultMetricsTopic + " " + audit.OtherSource + " " + audit.Hour(at): 2}
	if got := totals(metrics); !equalTotals(got, want) {
		t.Fatalf("audit totals %v, want %v", got, want)
	}
}
