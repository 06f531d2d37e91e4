package promwrite

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"millrace/agents/beacon"
)

// TestSameEventsAsBeacon: samples sent by remote write become exactly the
// records (topic, key, value) the beacon's POST /v1/metrics makes of the
// same samples in the text exposition format, kinds included.
func TestSameEventsAsBeacon(t *testing.T) {
	t.Parallel()
	if DefaultTopic != beacon.DefaultMetricsTopic {
		t.Fatalf("DefaultTopic %q, the beacon's metrics topic %q", DefaultTopic, beacon.DefaultMetricsTopic)
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
	beaconProducer := newFakeProducer()
	b, err := beacon.New(beacon.Config{}, beaconProducer, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/metrics?source=prom-1", strings.NewReader(exposition))
	r.Header.Set("Content-Type", "text/plain")
	w := httptest.NewRecorder()
	b.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("beacon: status %d: %s", w.Code, w.Body)
	}

	// The beacon orders families by name; the series below follow it.
	h, p := newTestHandler(t, Config{})
	md := []Metadata{{TypeCounter, "http_requests_total"}, {TypeGauge, "temp"}, {TypeHistogram, "rpc_seconds"}}
	if w := post(h, encodeRequest(nil, md)); w.Code != http.StatusNoContent {
		t.Fatalf("metadata: status %d", w.Code)
	}
	at := func(v float64) []Sample { return []Sample{{v, ms}} }
	w = post(h, encodeRequest([]series{
		{labels: named("http_requests_total", "code", "200", "job", "api"), samples: at(1027)},
		{labels: named("other"), samples: at(nan())},
		{labels: named("rpc_seconds_bucket", "le", "0.1"), samples: at(3)},
		{labels: named("rpc_seconds_bucket", "le", "+Inf"), samples: at(5)},
		{labels: named("rpc_seconds_sum"), samples: at(1.5)},
		{labels: named("rpc_seconds_count"), samples: at(5)},
		{labels: named("temp", "room", "a b"), samples: at(-21.5)},
	}, nil))
	if w.Code != http.StatusNoContent {
		t.Fatalf("remote write: status %d: %s", w.Code, w.Body)
	}

	want, got := beaconProducer.records(), p.records()
	if len(got) != len(want) {
		t.Fatalf("%d records, the beacon made %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Topic != want[i].Topic || string(got[i].Key) != string(want[i].Key) || string(got[i].Value) != string(want[i].Value) {
			t.Errorf("record %d:\n got %s %s %s\nwant %s %s %s", i,
				got[i].Topic, got[i].Key, got[i].Value, want[i].Topic, want[i].Key, want[i].Value)
		}
	}
}
