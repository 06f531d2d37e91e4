package promwrite

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
)

// newTestHandler returns a handler producing to a fake producer.
func newTestHandler(t *testing.T, cfg Config) (*Handler, *fakeProducer) {
	t.Helper()
	p := newFakeProducer()
	h, err := New(cfg, p, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

// post sends body, snappy-compressed, as Prometheus's remote write client
// does (prometheus/storage/remote/client.go's headers).
func post(h http.Handler, body []byte) *httptest.ResponseRecorder {
	return postRaw(h, snappy.Encode(nil, body), nil)
}

func postRaw(h http.Handler, compressed []byte, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write?source=prom-1", bytes.NewReader(compressed))
	r.Header.Set("Content-Encoding", "snappy")
	r.Header.Set("Content-Type", "application/x-protobuf")
	r.Header.Set("User-Agent", "Prometheus/2.53.0")
	r.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestWriteAcknowledged: every sample acknowledged is 204, stale markers
// and native histograms are dropped and counted.
func TestWriteAcknowledged(t *testing.T) {
	t.Parallel()
	h, p := newTestHandler(t, Config{})
	body := encodeRequest([]series{
		{labels: named("up", "job", "node"), samples: []Sample{{1, 1000}, {math.Float64frombits(staleNaN), 2000}}},
		{labels: named("rpc_seconds", "job", "api"), histograms: 2},
	}, nil)
	w := post(h, body)
	if w.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	recs := p.records()
	if len(recs) != 1 || recs[0].Topic != DefaultTopic || string(recs[0].Key) != "up" {
		t.Fatalf("records %+v", recs)
	}
	var ev map[string]any
	if err := json.Unmarshal(recs[0].Value, &ev); err != nil {
		t.Fatal(err)
	}
	if ev["name"] != "up" || ev["kind"] != "untyped" || ev["value"] != 1.0 || ev["source"] != "prom-1" ||
		ev["ts"] != "1970-01-01T00:00:01Z" || ev["labels"].(map[string]any)["job"] != "node" {
		t.Fatalf("event %s", recs[0].Value)
	}
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"requests 204", h.metrics.requests.WithLabelValues("204"), 1},
		{"received", h.metrics.received, 2},
		{"produced", h.metrics.produced, 1},
		{"stale", h.metrics.dropped.WithLabelValues("stale"), 1},
		{"native histograms", h.metrics.dropped.WithLabelValues("native_histogram"), 2},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWriteKindsFromMetadata: metadata sent in one request (as Prometheus
// sends it, apart from samples) sets the kind of later samples, including a
// histogram's _bucket/_sum/_count series.
func TestWriteKindsFromMetadata(t *testing.T) {
	t.Parallel()
	h, p := newTestHandler(t, Config{})
	md := []Metadata{{TypeCounter, "http_requests_total"}, {TypeHistogram, "rpc_seconds"}, {TypeGauge, "temp"}}
	if w := post(h, encodeRequest(nil, md)); w.Code != http.StatusNoContent {
		t.Fatalf("metadata: status %d: %s", w.Code, w.Body)
	}
	one := []Sample{{1, 1}}
	w := post(h, encodeRequest([]series{
		{labels: named("http_requests_total"), samples: one},
		{labels: named("rpc_seconds_bucket", "le", "+Inf"), samples: one},
		{labels: named("rpc_seconds_count"), samples: one},
		{labels: named("temp"), samples: one},
		{labels: named("temp_sum"), samples: one},
	}, nil))
	if w.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := []string{"counter", "histogram", "histogram", "gauge", "untyped"}
	for i, r := range p.records() {
		var ev struct{ Kind string }
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Kind != want[i] {
			t.Errorf("%s: kind %q, want %q", r.Key, ev.Kind, want[i])
		}
	}
}

// TestWriteRefused covers the answers Prometheus does not retry (4xx but
// 429) and those it does (5xx, with Retry-After).
func TestWriteRefused(t *testing.T) {
	t.Parallel()
	valid := snappy.Encode(nil, encodeRequest([]series{{labels: named("up"), samples: []Sample{{1, 1}}}}, nil))
	tests := []struct {
		name     string
		cfg      Config
		body     []byte
		header   http.Header
		setup    func(*fakeProducer)
		want     int
		contains string
	}{
		{"not snappy", Config{}, []byte("not snappy at all"), nil, nil, http.StatusBadRequest, "snappy"},
		{"not protobuf", Config{}, snappy.Encode(nil, []byte{0x0a, 0x7f}), nil, nil, http.StatusBadRequest, "malformed"},
		{"gzip", Config{}, valid, http.Header{"Content-Encoding": {"gzip"}}, nil, http.StatusUnsupportedMediaType, "snappy"},
		{"json", Config{}, valid, http.Header{"Content-Type": {"application/json"}}, nil, http.StatusUnsupportedMediaType, "x-protobuf"},
		{"remote write 2.0", Config{}, valid, http.Header{
			"Content-Type":                      {"application/x-protobuf;proto=io.prometheus.write.v2.Request"},
			"X-Prometheus-Remote-Write-Version": {"2.0.0"}}, nil, http.StatusUnsupportedMediaType, "io.prometheus.write.v2.Request"},
		{"body over max_body_bytes", Config{MaxBodyBytes: 8}, valid, nil, nil, http.StatusRequestEntityTooLarge, "8 allowed"},
		{"decoded over max_decoded_bytes", Config{MaxBodyBytes: 100, MaxDecodedBytes: 100}, snappy.Encode(nil, make([]byte, 1000)), nil, nil,
			http.StatusRequestEntityTooLarge, "decodes to 1000 bytes"},
		{"header declares more than snappy can expand", Config{}, binary.AppendUvarint(nil, 1000), nil, nil, http.StatusBadRequest, "declares 1000"},
		{"too many samples", Config{MaxSamples: 1, MaxSeries: 1},
			snappy.Encode(nil, encodeRequest([]series{{labels: named("up"), samples: make([]Sample, 2)}}, nil)), nil, nil,
			http.StatusRequestEntityTooLarge, "2 samples, at most 1"},
		{"broker down", Config{}, valid, nil, func(p *fakeProducer) { p.set(kgo.ErrRecordTimeout, nil) },
			http.StatusServiceUnavailable, "did not acknowledge"},
		{"producer full now", Config{}, valid, nil, func(p *fakeProducer) { p.setBuffered(ship.DefaultMaxBufferedRecords) },
			http.StatusServiceUnavailable, "cannot take more"},
		{"producer refuses", Config{}, valid, nil, func(p *fakeProducer) { p.set(nil, ship.ErrBufferFull) },
			http.StatusServiceUnavailable, "cannot take more"},
		{"more than the producer can ever buffer", Config{}, valid, nil, func(p *fakeProducer) { p.cfg.MaxBufferedBytes = 10 },
			http.StatusRequestEntityTooLarge, "max_samples_per_send"},
		{"invalid sample", Config{},
			snappy.Encode(nil, encodeRequest([]series{{labels: named(strings.Repeat("x", 300)), samples: []Sample{{1, 1}}}}, nil)),
			nil, nil, http.StatusBadRequest, "invalid"},
		{"no __name__", Config{},
			snappy.Encode(nil, encodeRequest([]series{{labels: []Label{{"job", "x"}}, samples: []Sample{{1, 1}}}}, nil)),
			nil, nil, http.StatusBadRequest, "no __name__"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, p := newTestHandler(t, tc.cfg)
			if tc.setup != nil {
				tc.setup(p)
			}
			w := postRaw(h, tc.body, tc.header)
			if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.contains) {
				t.Fatalf("status %d %q, want %d containing %q", w.Code, w.Body, tc.want, tc.contains)
			}
			retry := w.Header().Get("Retry-After")
			if (tc.want == http.StatusServiceUnavailable) != (retry != "") {
				t.Fatalf("status %d with Retry-After %q", w.Code, retry)
			}
		})
	}
}

// TestWriteDeclaredGigabyte: a body whose snappy header declares 1 GB is
// refused with 413 without the gigabyte being allocated.
func TestWriteDeclaredGigabyte(t *testing.T) {
	h, _ := newTestHandler(t, Config{})
	body := append(binary.AppendUvarint(nil, 1<<30), make([]byte, 64)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w := postRaw(h, body, nil)
	runtime.ReadMemStats(&after)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("refusing the request allocated %d bytes", got)
	}
}

// TestWriteInvalidKeepsValid: a request with one invalid sample produces
// the valid ones and answers 400, as a Prometheus server does.
func TestWriteInvalidKeepsValid(t *testing.T) {
	t.Parallel()
	h, p := newTestHandler(t, Config{})
	w := post(h, encodeRequest([]series{
		{labels: named(strings.Repeat("x", 300)), samples: []Sample{{1, 1}}},
		{labels: named("up"), samples: []Sample{{1, 1}}},
	}, nil))
	if w.Code != http.StatusBadRequest || len(p.records()) != 1 {
		t.Fatalf("status %d, %d records", w.Code, len(p.records()))
	}
	if got := testutil.ToFloat64(h.metrics.dropped.WithLabelValues("invalid")); got != 1 {
		t.Fatalf("invalid dropped %v", got)
	}
}

// TestWriteBusy: a request over max_in_flight is 503 with Retry-After.
func TestWriteBusy(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, Config{MaxInFlight: 1, RetryAfter: 1500e6})
	h.inFlight <- struct{}{}
	w := post(h, encodeRequest(nil, nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("status %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

// TestWriteMethod: only POST.
func TestWriteMethod(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, Config{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/write", nil))
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodPost {
		t.Fatalf("status %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
	if got := testutil.ToFloat64(h.metrics.requests.WithLabelValues("405")); got != 1 {
		t.Fatalf("requests{code=405} = %v", got)
	}
}

// TestConfigValidate: impossible settings are refused with a sentence.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxSamples: -1}, "max_samples is -1"},
		{Config{MaxBodyBytes: 2 << 20, MaxDecodedBytes: 1 << 20}, "lower max_body_bytes"},
		{Config{MaxSeries: 10, MaxLabels: 5}, "at least its __name__"},
	} {
		err := c.cfg.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
