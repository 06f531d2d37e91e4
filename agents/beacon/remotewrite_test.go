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
	"google.golang.org/protobuf/encoding/protowire"

	"millrace/agents/promwrite"
	"millrace/agents/ship"
	"millrace/audit"
)

// remoteWriteBody is a snappy-compressed remote write 1.0 WriteRequest of
// one series with one sample, as prompb marshals it: TimeSeries = 1 {
// Label labels = 1 {name = 1, value = 2}, Sample samples = 2 {double
// value = 1, int64 timestamp = 2} }.
func remoteWriteBody(value float64, at time.Time, labels ...string) []byte {
	var series []byte
	for i := 0; i+1 < len(labels); i += 2 {
		var l []byte
		l = protowire.AppendTag(l, 1, protowire.BytesType)
		l = protowire.AppendString(l, labels[i])
		l = protowire.AppendTag(l, 2, protowire.BytesType)
		l = protowire.AppendString(l, labels[i+1])
		series = protowire.AppendTag(series, 1, protowire.BytesType)
		series = protowire.AppendBytes(series, l)
	}
	var s []byte
	s = protowire.AppendTag(s, 1, protowire.Fixed64Type)
	s = protowire.AppendFixed64(s, math.Float64bits(value))
	s = protowire.AppendTag(s, 2, protowire.VarintType)
	s = protowire.AppendVarint(s, uint64(at.UnixMilli()))
	series = protowire.AppendTag(series, 2, protowire.BytesType)
	series = protowire.AppendBytes(series, s)
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendBytes(req, series)
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
	body := remoteWriteBody(42, at, "__name__", "node_load1", "job", "node", "instance", "host-1:9100")
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
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, promwrite.Path, bytes.NewReader(remoteWriteBody(1, time.Now(), "__name__", "up"))))
	if rec.Code != http.StatusNotFound || srv.RemoteWriteOn() {
		t.Fatalf("disabled remote write answered %d", rec.Code)
	}
}
