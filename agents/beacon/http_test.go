package beacon

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

func TestCORS(t *testing.T) {
	h := newHarness(t, Config{AllowedOrigins: []string{testOrigin}}, ship.Config{})
	preflight := func(origin, method, headers string) *http.Response {
		resp, _ := h.do(http.MethodOptions, "/v1/events", "", "", map[string]string{
			"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers})
		return resp
	}
	resp := preflight(testOrigin, "POST", "content-type")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("allowed preflight: status %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != testOrigin {
		t.Errorf("Allow-Origin %q", got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(got, "POST") {
		t.Errorf("Allow-Methods %q", got)
	}
	if got := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(got, "content-type") {
		t.Errorf("Allow-Headers %q", got)
	}
	if resp.Header.Get("Access-Control-Max-Age") != "600" {
		t.Errorf("Max-Age %q", resp.Header.Get("Access-Control-Max-Age"))
	}
	if !slices.Contains(resp.Header.Values("Vary"), "Origin") {
		t.Errorf("Vary %v lacks Origin", resp.Header.Values("Vary"))
	}
	for _, tc := range []struct{ name, origin, method, headers string }{
		{"denied origin", "https://evil.example.net", "POST", "content-type"},
		{"denied method", testOrigin, "DELETE", ""},
		{"denied header", testOrigin, "POST", "content-type, x-secret"},
	} {
		resp := preflight(tc.origin, tc.method, tc.headers)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: status %d, Allow-Origin %q", tc.name, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		if !slices.Contains(resp.Header.Values("Vary"), "Origin") {
			t.Errorf("%s: Vary %v lacks Origin", tc.name, resp.Header.Values("Vary"))
		}
	}
	// The POSTs themselves: allowed origin gets the header, denied is refused.
	resp, b := h.do(http.MethodPost, "/v1/events", "text/plain", `{"type":"x"}`, map[string]string{"Origin": testOrigin})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != testOrigin {
		t.Fatalf("allowed POST: %d %q %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
	}
	resp, _ = h.do(http.MethodPost, "/v1/events", "text/plain", `{"type":"y"}`, map[string]string{"Origin": "https://evil.example.net"})
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("denied POST: %d", resp.StatusCode)
	}
	if n := h.endOffset(topic); n != 1 {
		t.Fatalf("%d events, want only the allowed origin's", n)
	}
}

func TestCORSWildcard(t *testing.T) {
	h := newHarness(t, Config{AllowedOrigins: []string{"*"}}, ship.Config{})
	resp, _ := h.do(http.MethodOptions, "/v1/events", "", "", map[string]string{
		"Origin": "https://any.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Content-Type"})
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://any.example" {
		t.Fatalf("status %d Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, Config{RateLimit: 1, RateBurst: 3, TrustedProxies: []string{"127.0.0.1"}}, ship.Config{})
	send := func(xff string) *http.Response {
		hdr := map[string]string{}
		if xff != "" {
			hdr["X-Forwarded-For"] = xff
		}
		resp, _ := h.do(http.MethodGet, "/b.gif?type=page_view", "", "", hdr)
		return resp
	}
	for i := range 3 {
		if resp := send("198.51.100.7"); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i, resp.StatusCode)
		}
	}
	resp := send("198.51.100.7")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request over the burst: %d", resp.StatusCode)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	// Another client (as told by the trusted proxy) has its own bucket.
	if resp := send("198.51.100.8"); resp.StatusCode != http.StatusOK {
		t.Fatalf("other client: %d", resp.StatusCode)
	}
	if n := h.endOffset(topic); n != 4 {
		t.Fatalf("%d events, want 4", n)
	}
}

func TestRateLimiterBuckets(t *testing.T) {
	now := time.Unix(1000, 0)
	rl := newRateLimiter(10, 5, 64, func() time.Time { return now })
	a := netip.MustParseAddr("192.0.2.1")
	for i := range 5 {
		if ok, _ := rl.allow(a); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	ok, wait := rl.allow(a)
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("over the burst: ok=%v wait=%v, want refused for 100ms", ok, wait)
	}
	now = now.Add(100 * time.Millisecond)
	if ok, _ := rl.allow(a); !ok {
		t.Fatal("refused after a token was refilled")
	}
	// A flood of distinct addresses never holds more than the bound
	// (rounded up to whole shards).
	for i := range 10_000 {
		rl.allow(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	if n := rl.size(); n > 64+rateShards {
		t.Fatalf("%d buckets held, want at most about 64", n)
	}
	// Idle buckets (refilled to the burst) are swept: after a second, a
	// new wave of 1000 clients leaves only its own 1000 buckets (each shard
	// sweeps on its first request; 1000 addresses miss none of 16 shards).
	big := newRateLimiter(10, 5, 1_000_000, func() time.Time { return now })
	for i := range 1000 {
		big.allow(netip.AddrFrom4([4]byte{172, 16, byte(i >> 8), byte(i)}))
	}
	if n := big.size(); n != 1000 {
		t.Fatalf("%d buckets, want 1000", n)
	}
	now = now.Add(time.Second)
	for i := range 1000 {
		big.allow(netip.AddrFrom4([4]byte{172, 17, byte(i >> 8), byte(i)}))
	}
	if n := big.size(); n != 1000 {
		t.Fatalf("%d buckets after the first wave went idle, want the second wave's 1000", n)
	}
}

func TestClientIP(t *testing.T) {
	trusted, err := parseTrusted([]string{"10.0.0.0/8", "192.0.2.1", "2001:db8:ffff::/48"})
	if err != nil {
		t.Fatal(err)
	}
	r := &ipResolver{trusted: trusted}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer ignores XFF", "203.0.113.9:5000", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer, one hop", "10.1.2.3:80", []string{"198.51.100.20"}, "198.51.100.20"},
		{"rightmost untrusted wins over spoofed left", "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.20, 10.9.9.9"}, "198.51.100.20"},
		{"several headers", "192.0.2.1:80", []string{"6.6.6.6", "198.51.100.21", "10.0.0.5"}, "198.51.100.21"},
		{"all trusted: leftmost", "10.1.2.3:80", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"garbage stops the walk", "10.1.2.3:80", []string{"198.51.100.20, nonsense, 10.0.0.9"}, "10.0.0.9"},
		{"no header", "10.1.2.3:80", nil, "10.1.2.3"},
		{"IPv6 client behind IPv6 proxy", "[2001:db8:ffff::1]:443", []string{"2001:db8:1:2:3::4"}, "2001:db8:1:2:3::4"},
		{"mapped IPv4 peer", "[::ffff:10.0.0.1]:80", []string{"198.51.100.22"}, "198.51.100.22"},
		{"entry with port", "10.1.2.3:80", []string{"198.51.100.23:1234"}, "198.51.100.23"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
			req.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			if got := r.clientAddr(req).String(); got != tc.want {
				t.Fatalf("client %s, want %s", got, tc.want)
			}
		})
	}
	tr := &ipResolver{truncate: true}
	for in, want := range map[string]string{"198.51.100.23": "198.51.100.0", "2001:db8:1:2:3::4": "2001:db8:1::"} {
		if got := tr.display(netip.MustParseAddr(in)); got != want {
			t.Errorf("truncate %s = %s, want %s", in, got, want)
		}
	}
}

func TestTrustedProxyEndToEnd(t *testing.T) {
	h := newHarness(t, Config{TrustedProxies: []string{"127.0.0.0/8"}, TruncateIP: true}, ship.Config{})
	resp, _ := h.do(http.MethodPost, "/v1/events", "application/json", `{"type":"x"}`,
		map[string]string{"X-Forwarded-For": "6.6.6.6, 203.0.113.77"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if e := h.events(topic)[0]; e["ip"] != "203.0.113.0" {
		t.Fatalf("ip %v, want the proxy-reported client truncated to /24", e["ip"])
	}
	// Without trust, the header is ignored.
	h2 := newHarness(t, Config{}, ship.Config{})
	h2.do(http.MethodPost, "/v1/events", "application/json", `{"type":"x"}`, map[string]string{"X-Forwarded-For": "203.0.113.77"})
	if e := h2.events(topic)[0]; e["ip"] != "127.0.0.1" {
		t.Fatalf("ip %v, want the socket peer", e["ip"])
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	h := newHarness(t, Config{}, ship.Config{})
	if resp, b := h.do(http.MethodGet, "/healthz", "", "", nil); resp.StatusCode != 200 || b != "ok\n" {
		t.Fatalf("healthz %d %q", resp.StatusCode, b)
	}
	if resp, b := h.do(http.MethodGet, "/readyz", "", "", nil); resp.StatusCode != 200 {
		t.Fatalf("readyz %d %q", resp.StatusCode, b)
	}
	h.post("/v1/events", "application/json", `[{"type":"a"},{"nope":1}]`)
	h.do(http.MethodGet, "/nowhere", "", "", nil)
	_, b := h.do(http.MethodGet, "/metrics", "", "", nil)
	for _, want := range []string{
		`millrace_beacon_requests_total{code="200",route="/v1/events"} 1`,
		`millrace_beacon_requests_total{code="404",route="other"} 1`,
		`millrace_beacon_events_total{result="accepted",stream="click"} 1`,
		`millrace_beacon_events_total{result="rejected",stream="click"} 1`,
		`millrace_beacon_request_duration_seconds_count{route="/v1/events"} 1`,
		`millrace_ship_records_sent_total{topic="clicks"} 1`,     // the valid event
		`millrace_ship_records_sent_total{topic="clicks.dlq"} 1`, // the dead letter
	} {
		if !strings.Contains(b, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The broker goes away: not ready, once the producer's next contact
	// (a metadata refresh that /readyz asks for) fails.
	h.cluster.Close()
	waitfor.Until(t, 15*time.Second, "/readyz to answer 503, no broker reachable", func() bool {
		resp, b := h.do(http.MethodGet, "/readyz", "", "", nil)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(b, "no broker reachable")
	})
}

func TestScript(t *testing.T) {
	h := newHarness(t, Config{}, ship.Config{})
	resp, b := h.do(http.MethodGet, "/beacon.js", "", "", nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(b, "sendBeacon") || !strings.Contains(b, "/*MILLRACE_DNT*/false") {
		t.Fatalf("unexpected script body")
	}
	etag := resp.Header.Get("ETag")
	resp, _ = h.do(http.MethodGet, "/beacon.js", "", "", map[string]string{"If-None-Match": etag})
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: %d", resp.StatusCode)
	}
	dnt := newHarness(t, Config{HonorDoNotTrack: true}, ship.Config{})
	_, b = dnt.do(http.MethodGet, "/beacon.js", "", "", nil)
	if !strings.Contains(b, "/*MILLRACE_DNT*/true") {
		t.Fatalf("honor_do_not_track not applied to the script")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"defaults", Config{}, ""},
		{"dlq equals topic", Config{Topic: "a", DLQTopic: "a"}, "dead-letter"},
		{"bad origin", Config{AllowedOrigins: []string{"shop.example.com"}}, "allowed_origins"},
		{"bad proxy", Config{TrustedProxies: []string{"10.0.0.0/33"}}, "trusted_proxies"},
		{"tiny body", Config{MaxBodyBytes: 10}, "max_body_bytes"},
		{"no events", Config{MaxEventsPerRequest: -1}, "max_events_per_request"},
		{"write timeout", Config{AckTimeout: time.Minute, WriteTimeout: time.Second}, "write_timeout"},
		{"rate off", Config{RateLimit: -1}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.WithDefaults().Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
	d := Config{}.WithDefaults()
	if d.Topic != "clicks" || d.DLQTopic != "clicks.dlq" || d.MetricsTopic != "ops.metrics" ||
		d.MaxBodyBytes != 1<<20 || d.MaxEventsPerRequest != 500 || d.RateLimit != 100 || d.RateBurst != 200 {
		t.Fatalf("defaults %+v", d)
	}
}

func TestStartShutdown(t *testing.T) {
	h := newHarness(t, Config{Listen: "127.0.0.1:0"}, ship.Config{})
	if err := h.server.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + h.server.Addr().String()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(base+"/v1/events", "application/json", strings.NewReader(`{"type":"started"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after Shutdown")
	}
	// The handler, still mounted elsewhere, reports not ready.
	if resp, b := h.do(http.MethodGet, "/readyz", "", "", nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b, "shutting down") {
		t.Fatalf("readyz after Shutdown: %d %q", resp.StatusCode, b)
	}
	if err := h.server.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestPixelHEADProducesNothing(t *testing.T) {
	h := newHarness(t, Config{}, ship.Config{})
	resp, _ := h.do(http.MethodHead, "/b.gif?type=page_view", "", "", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/gif" {
		t.Fatalf("HEAD: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if n := h.endOffset(topic); n != 0 {
		t.Fatalf("HEAD produced %d events", n)
	}
}

func TestConcurrentRequestLimit(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrentRequests: 1, AckTimeout: 2 * time.Second}, ship.Config{})
	down := brokerSwitch(h)
	down.Store(true)
	first := make(chan int, 1)
	go func() {
		resp, err := h.http.Client().Post(h.http.URL+"/v1/events", "application/json", strings.NewReader(`{"type":"waits"}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	// Once the first request holds the only slot, the next is refused at once.
	waitfor.Until(t, 15*time.Second, "one request in flight", func() bool { return len(h.server.inFlight) == 1 })
	resp, res := h.post("/v1/events", "application/json", `{"type":"refused"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(res.Error, "in progress") {
		t.Fatalf("second request: %d %+v", resp.StatusCode, res)
	}
	if code := <-first; code != http.StatusServiceUnavailable {
		t.Fatalf("first request with the broker down: %d", code)
	}
}

// /readyz counts the producer's problems on the beacon's own topics only: a
// missing topic another agent of the same producer writes to leaves it
// ready, its own missing topic makes it answer 503 with what to do.
func TestReadyCountsOwnTopicsProblems(t *testing.T) {
	h := newHarness(t, Config{Topic: "nosuch"}, ship.Config{})
	produce := func(topic string) {
		done := make(chan error, 1)
		h.shipper.Produce(context.Background(), &kgo.Record{Topic: topic, Value: []byte("{}")}, func(_ *kgo.Record, err error) { done <- err })
		if err := <-done; err == nil {
			t.Fatalf("a record to the missing topic %s was acknowledged", topic)
		}
	}
	produce("elsewhere")
	if resp, b := h.do(http.MethodGet, "/readyz", "", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz with another agent's topic missing: %d %q", resp.StatusCode, b)
	}
	produce("nosuch")
	if resp, b := h.do(http.MethodGet, "/readyz", "", "", nil); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(b, `topic nosuch does not exist`) || strings.Contains(b, "elsewhere") {
		t.Fatalf("readyz with the beacon's topic missing: %d %q", resp.StatusCode, b)
	}
}
