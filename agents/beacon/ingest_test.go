package beacon

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

// brokerSwitch makes the kfake cluster refuse every produce request (the
// connection is closed, as when a broker dies) while down is set.
func brokerSwitch(h *harness) *atomic.Bool {
	var down atomic.Bool
	h.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		if down.Load() {
			return nil, errors.New("broker down"), true
		}
		return nil, nil, false
	})
	return &down
}

func TestBrokerDownAnswers503(t *testing.T) {
	h := newHarness(t, Config{AckTimeout: 300 * time.Millisecond, RetryAfter: 2 * time.Second},
		ship.Config{MaxBufferedRecords: 20})
	down := brokerSwitch(h)
	down.Store(true)
	resp, res := h.post("/v1/events", "application/json", `{"type":"lost"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" || res.Error == "" {
		t.Fatalf("broker down: %d Retry-After %q %+v", resp.StatusCode, resp.Header.Get("Retry-After"), res)
	}
	// More events than the producer's buffer holds: refused at once, whole,
	// as a full buffer and not after waiting for the acknowledgements.
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"type":"x"},`, 25), ",") + "]"
	resp, res = h.post("/v1/events", "application/json", many)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("buffer full: %d", resp.StatusCode)
	}
	if res.Error != errBufferFull.Reason {
		t.Errorf("a request that cannot fit the buffer was answered %q, want %q", res.Error, errBufferFull.Reason)
	}
	resp, b := h.do(http.MethodGet, "/b.gif?type=page_view", "", "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || b != string(transparentGIF) {
		t.Fatalf("pixel with the broker down: %d", resp.StatusCode)
	}
	down.Store(false)
	waitfor.Until(t, 15*time.Second, "an event accepted with the broker back", func() bool {
		resp, _ := h.post("/v1/events", "application/json", `{"type":"back"}`)
		return resp.StatusCode == http.StatusOK
	})
	found := false
	for _, e := range h.events(topic) {
		found = found || e["type"] == "back"
	}
	if !found {
		t.Fatal("event acknowledged after the broker came back is not in the topic")
	}
}

// TestNothingAcknowledgedIsLost posts from several clients while the broker
// goes down and comes back: every event of every 2xx answer must be in the
// topic.
func TestNothingAcknowledgedIsLost(t *testing.T) {
	h := newHarness(t, Config{AckTimeout: 400 * time.Millisecond, RateLimit: -1},
		ship.Config{MaxBufferedRecords: 200})
	down := brokerSwitch(h)
	var (
		mu     sync.Mutex // guards acked
		acked  []string
		codes  sync.Map
		wg     sync.WaitGroup
		stop   atomic.Bool
		sentOK atomic.Int64
	)
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				var ids []string
				var parts []string
				for j := range 3 {
					id := fmt.Sprintf("c%d-r%d-e%d", c, i, j)
					ids = append(ids, id)
					parts = append(parts, `{"type":"load","properties":{"marker":"`+id+`"}}`)
				}
				resp, err := h.http.Client().Post(h.http.URL+"/v1/events", "text/plain", strings.NewReader("["+strings.Join(parts, ",")+"]"))
				if err != nil {
					continue
				}
				resp.Body.Close()
				n, _ := codes.LoadOrStore(resp.StatusCode, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				if resp.StatusCode == http.StatusOK {
					sentOK.Add(1)
					mu.Lock()
					acked = append(acked, ids...)
					mu.Unlock()
				} else if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("unexpected status %d", resp.StatusCode)
				}
			}
		}()
	}
	// The outage is a span of time the senders run through: before it,
	// during it (a second of 503s) and after it.
	time.Sleep(300 * time.Millisecond)
	down.Store(true)
	time.Sleep(time.Second)
	down.Store(false)
	waitfor.Until(t, 15*time.Second, "an event accepted after the outage", func() bool { return sentOK.Load() > 0 })
	before := sentOK.Load()
	waitfor.Until(t, 15*time.Second, "ten more events accepted", func() bool { return sentOK.Load() > before+10 })
	stop.Store(true)
	wg.Wait()
	if n, ok := codes.Load(http.StatusServiceUnavailable); !ok || n.(*atomic.Int64).Load() == 0 {
		t.Fatal("no request was answered 503 while the broker was down")
	}
	have := make(map[string]bool)
	for _, e := range h.events(topic) {
		props, _ := e["properties"].(map[string]any)
		if m, ok := props["marker"].(string); ok {
			have[m] = true
		}
	}
	missing := 0
	for _, id := range acked {
		if !have[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events are not in the topic", missing, len(acked))
	}
	t.Logf("%d events acknowledged, all in the topic (%d distinct events there, including some of 503-answered requests)", len(acked), len(have))
}

const exposition = `# HELP http_requests_total Requests.
# TYPE http_requests_total counter
http_requests_total{code="200",method="get"} 1027 1395066363000
http_requests_total{code="400",method="post"} 3
# TYPE temperature gauge
temperature 21.5
# TYPE rpc_duration_seconds summary
rpc_duration_seconds{quantile="0.5"} 0.05
rpc_duration_seconds{quantile="0.99"} 0.2
rpc_duration_seconds_sum 17
rpc_duration_seconds_count 100
# TYPE req_latency_seconds histogram
req_latency_seconds_bucket{path="/",le="0.1"} 5
req_latency_seconds_bucket{path="/",le="1"} 8
req_latency_seconds_bucket{path="/",le="+Inf"} 10
req_latency_seconds_sum{path="/"} 4.5
req_latency_seconds_count{path="/"} 10
plain 7
`

func TestMetricsPrometheusText(t *testing.T) {
	h := newHarness(t, Config{}, ship.Config{})
	resp, res := h.post("/v1/metrics?source=web-1:shop", "text/plain; version=0.0.4", exposition)
	if resp.StatusCode != http.StatusOK || res.Accepted != 13 || res.Rejected != 0 {
		t.Fatalf("status %d %+v", resp.StatusCode, res)
	}
	got := make(map[string]map[string]any)
	for _, e := range h.events(opsTopic) {
		if e["source"] != "web-1:shop" {
			t.Errorf("source %v", e["source"])
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["ts"])); err != nil {
			t.Errorf("ts %v", e["ts"])
		}
		labels, _ := e["labels"].(map[string]any)
		key := fmt.Sprintf("%v|%v|%v|%v", e["name"], labels["code"], labels["quantile"], labels["le"])
		got[key] = e
	}
	if len(got) != 13 {
		t.Fatalf("%d distinct samples, want 13: %v", len(got), got)
	}
	for _, tc := range []struct {
		key, kind string
		value     float64
	}{
		{"http_requests_total|200|<nil>|<nil>", "counter", 1027},
		{"http_requests_total|400|<nil>|<nil>", "counter", 3},
		{"temperature|<nil>|<nil>|<nil>", "gauge", 21.5},
		{"rpc_duration_seconds|<nil>|0.99|<nil>", "summary", 0.2},
		{"rpc_duration_seconds_sum|<nil>|<nil>|<nil>", "summary", 17},
		{"rpc_duration_seconds_count|<nil>|<nil>|<nil>", "summary", 100},
		{"req_latency_seconds_bucket|<nil>|<nil>|0.1", "histogram", 5},
		{"req_latency_seconds_bucket|<nil>|<nil>|+Inf", "histogram", 10},
		{"req_latency_seconds_sum|<nil>|<nil>|<nil>", "histogram", 4.5},
		{"req_latency_seconds_count|<nil>|<nil>|<nil>", "histogram", 10},
		{"plain|<nil>|<nil>|<nil>", "untyped", 7},
	} {
		e := got[tc.key]
		if e == nil || e["kind"] != tc.kind || e["value"] != tc.value {
			t.Errorf("%s: %v, want kind %s value %v", tc.key, e, tc.kind, tc.value)
		}
	}
	if ts := got["http_requests_total|200|<nil>|<nil>"]["ts"]; ts != "2014-03-17T14:26:03Z" {
		t.Errorf("sample timestamp %v, want the line's own", ts)
	}
	if l := got["req_latency_seconds_bucket|<nil>|<nil>|0.1"]["labels"].(map[string]any); l["path"] != "/" {
		t.Errorf("bucket labels %v", l)
	}

	resp, res = h.post("/v1/metrics", "text/plain", "this is not { the format\n")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(res.Error, "prometheus") {
		t.Fatalf("bad exposition: %d %+v", resp.StatusCode, res)
	}
}

func TestMetricsJSON(t *testing.T) {
	h := newHarness(t, Config{MaxEventsPerRequest: 5}, ship.Config{})
	resp, b := h.do(http.MethodPost, "/v1/metrics", "application/json",
		`[{"name":"queue_depth","kind":"gauge","value":12,"labels":{"queue":"q1"}},`+
			`{"name":"bad","kind":"meter","value":1},`+
			`{"name":"errors_total","kind":"counter","value":"NaN","ts":"2024-01-01T00:00:00Z","source":"db-1:pg"}]`,
		map[string]string{"X-Millrace-Source": "app-1:worker"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(b, `"accepted":2`) || !strings.Contains(b, `"rejected":1`) {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	evs := h.events(opsTopic)
	if len(evs) != 2 {
		t.Fatalf("%d samples", len(evs))
	}
	for _, e := range evs {
		switch e["name"] {
		case "queue_depth":
			if e["source"] != "app-1:worker" || e["value"] != float64(12) || e["kind"] != "gauge" {
				t.Errorf("queue_depth %v", e)
			}
			if ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["ts"])); err != nil || time.Since(ts) > time.Minute {
				t.Errorf("ts %v, want the receive time", e["ts"])
			}
		case "errors_total":
			if e["source"] != "db-1:pg" || e["ts"] != "2024-01-01T00:00:00Z" || e["value"] != "NaN" {
				t.Errorf("errors_total %v: its own ts and source must win", e)
			}
		default:
			t.Errorf("unexpected sample %v", e)
		}
	}
	letters := h.events(opsDLQ)
	if len(letters) != 1 || !strings.Contains(fmt.Sprint(letters[0]["reason"]), "kind") || letters[0]["schema"] != "metric" {
		t.Fatalf("dead letters %v", letters)
	}
	// One object, with no source at all: the client IP.
	resp, res := h.post("/v1/metrics", "application/json", `{"name":"up","kind":"gauge","value":1}`)
	if resp.StatusCode != http.StatusOK || res.Accepted != 1 {
		t.Fatalf("single sample: %d %+v", resp.StatusCode, res)
	}
	for _, e := range h.events(opsTopic) {
		if e["name"] == "up" && e["source"] != "127.0.0.1" {
			t.Errorf("source %v, want the client IP", e["source"])
		}
	}
	// Limits apply to samples too, in both forms.
	var lines []string
	for i := range 6 {
		lines = append(lines, "m"+strconv.Itoa(i)+" 1")
	}
	resp, _ = h.post("/v1/metrics", "text/plain", strings.Join(lines, "\n")+"\n")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("too many samples: %d", resp.StatusCode)
	}
}

func TestWithDefaults(t *testing.T) {
	ts := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]string{
		`{}`:          `{"ts":"2024-01-02T03:04:05Z","source":"s"}`,
		` { "a":1 } `: `{"ts":"2024-01-02T03:04:05Z","source":"s","a":1 }`,
		`5`:           `5`,
	} {
		if got := string(withDefaults([]byte(in), ts, "s")); got != want {
			t.Errorf("withDefaults(%s) = %s, want %s", in, got, want)
		}
	}
}
