package beacon

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"millrace/agents/intake"
	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

// slowBody opens a connection from local (nil: any address) and sends a
// POST's headers and the first bytes of its 100-byte body, then nothing.
func slowBody(t *testing.T, addr string, local net.Addr) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: local}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, "POST /v1/events HTTP/1.1\r\nHost: beacon\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{\"type\":")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// status reads the status code of the answer on c.
func status(t *testing.T, c net.Conn) int {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (s *Server) clientsInProgress() int { return s.clients.total() }

// Bodies that trickle in hold neither of the two processing slots: other
// requests are served meanwhile, and the slow ones get 408 after
// body_read_timeout. (Before, each held a slot from its first byte, and
// everyone else got 503.)
func TestSlowBodyHoldsNoSlot(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrentRequests: 2, BodyReadTimeout: time.Second}, ship.Config{})
	addr := strings.TrimPrefix(h.http.URL, "http://")
	var slow []net.Conn
	for range 4 {
		slow = append(slow, slowBody(t, addr, nil))
	}
	waitfor.Until(t, 15*time.Second, "four clients in progress", func() bool { return h.server.clientsInProgress() == 4 })
	start := time.Now()
	for i := range 3 {
		if resp, res := h.post("/v1/events", "application/json", fmt.Sprintf(`{"type":"fast-%d"}`, i)); resp.StatusCode != http.StatusOK {
			t.Fatalf("request beside 4 slow bodies: %d %+v", resp.StatusCode, res)
		}
	}
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Errorf("the fast requests took %v: they waited for the slow ones", el)
	}
	for _, c := range slow {
		if code := status(t, c); code != http.StatusRequestTimeout {
			t.Fatalf("slow body answered %d, want 408", code)
		}
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("slow bodies cut after %v, before body_read_timeout", el)
	}
	if n := h.endOffset(topic); n != 3 {
		t.Fatalf("%d events, want the 3 fast ones", n)
	}
}

// One client with max_concurrent_per_client requests in progress gets 429
// for the next; another client is served.
func TestPerClientCap(t *testing.T) {
	h := newHarness(t, Config{MaxConcurrentPerClient: 2, BodyReadTimeout: 5 * time.Second}, ship.Config{})
	addr := strings.TrimPrefix(h.http.URL, "http://")
	for range 2 {
		slowBody(t, addr, nil)
	}
	waitfor.Until(t, 15*time.Second, "two clients in progress", func() bool { return h.server.clientsInProgress() == 2 })
	resp, res := h.post("/v1/events", "application/json", `{"type":"third"}`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(res.Error, "from this client") {
		t.Fatalf("third request of one client: %d %+v", resp.StatusCode, res)
	}
	// 127.0.0.2 is loopback too, and another client.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	defer other.CloseIdleConnections()
	resp2, err := other.Post(h.http.URL+"/v1/events", "application/json", strings.NewReader(`{"type":"other"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("another client: %d", resp2.StatusCode)
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		prefix int
		want   string
	}{
		{"198.51.100.7", 64, "198.51.100.7"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, "2001:db8:1:2::"},
		{"2001:db8:1:2::1", 64, "2001:db8:1:2::"},
		{"2001:db8:1:2::1", 128, "2001:db8:1:2::1"},
		{"2001:db8:1:2::1", 48, "2001:db8:1::"},
	} {
		if got := clientKey(netip.MustParseAddr(tc.addr), tc.prefix); got.String() != tc.want {
			t.Errorf("clientKey(%s, /%d) = %s, want %s", tc.addr, tc.prefix, got, tc.want)
		}
	}
}

// Addresses of one IPv6 /64 share one bucket; the next /64 has its own.
func TestRateLimitKeysIPv6By64(t *testing.T) {
	h := newHarness(t, Config{RateLimit: 0.001, RateBurst: 2, TrustedProxies: []string{"127.0.0.1"}}, ship.Config{})
	send := func(client string) int {
		resp, _ := h.do(http.MethodGet, "/b.gif?type=page_view", "", "", map[string]string{"X-Forwarded-For": client})
		return resp.StatusCode
	}
	for i, client := range []string{"2001:db8:1:2::1", "2001:db8:1:2::ffff"} {
		if code := send(client); code != http.StatusOK {
			t.Fatalf("request %d within the /64's burst: %d", i, code)
		}
	}
	if code := send("2001:db8:1:2:dead:beef:0:1"); code != http.StatusTooManyRequests {
		t.Fatalf("a third address of the same /64: %d, want 429", code)
	}
	if code := send("2001:db8:1:3::1"); code != http.StatusOK {
		t.Fatalf("the next /64: %d", code)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// metricsBomb is a body of limit 1 MiB made of one-sample lines, each a new
// series: some 75,000 samples.
func metricsBomb() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 1<<20-64; i++ {
		fmt.Fprintf(&b, "bomb{i=\"%d\"} 1\n", i)
	}
	return b.Bytes()
}

// The parser reads only as far as the first sample line past the limit.
func TestLineGateStopsTheParser(t *testing.T) {
	bomb := metricsBomb()
	src := &countingReader{r: bytes.NewReader(bomb)}
	gate := &lineGate{r: src, maxSamples: 500, maxMeta: 1000, atStart: true}
	if _, err := intake.ParseExpositionFrom(gate, time.Now()); err == nil || !gate.cut {
		t.Fatalf("a %d-byte body of one-sample lines parsed: %v", len(bomb), err)
	}
	// 500 lines of ~16 bytes, plus one read of the parser's 4 KiB buffer.
	t.Logf("the parser read %d of %d bytes", src.n, len(bomb))
	if src.n > 16<<10 {
		t.Fatalf("the parser read %d of %d bytes", src.n, len(bomb))
	}
	// HELP/TYPE lines count too: families without samples cost as much.
	var meta bytes.Buffer
	for i := range 2000 {
		fmt.Fprintf(&meta, "# TYPE m%d counter\n", i)
	}
	metaGate := &lineGate{r: &meta, maxSamples: 500, maxMeta: 1000, atStart: true}
	if _, err := intake.ParseExpositionFrom(metaGate, time.Now()); !metaGate.cut || metaGate.meta != 1001 {
		t.Fatalf("2000 TYPE lines: cut %v after %d, err %v", metaGate.cut, metaGate.meta, err)
	}
	// Blank lines, plain comments and leading blanks are not samples.
	ok := "\n# a plain comment\n  # HELP x X.\n# TYPE x gauge\n x 1\n\n"
	okGate := &lineGate{r: strings.NewReader(ok), maxSamples: 1, maxMeta: 2, atStart: true}
	samples, err := intake.ParseExpositionFrom(okGate, time.Now())
	if err != nil || len(samples) != 1 || okGate.samples != 1 || okGate.meta != 2 {
		t.Fatalf("small exposition: %d samples, gate %d/%d, %v", len(samples), okGate.samples, okGate.meta, err)
	}
}

// A 1 MiB /v1/metrics body of 75,000 samples is refused with 413 for a few
// MiB of allocation: the body itself, not the 70 MiB of parsed families it
// used to cost.
func TestMetricsBombIsCheap(t *testing.T) {
	h := newHarness(t, Config{}, ship.Config{})
	bomb := metricsBomb()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/metrics", bytes.NewReader(bomb))
	req.Header.Set("Content-Type", "text/plain; version=0.0.4")
	h.server.Handler().ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "more than 500 samples") {
		t.Fatalf("bomb: %d %s", rec.Code, rec.Body)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte bomb allocated %d KiB", len(bomb), alloc>>10)
	if alloc > 8<<20 {
		t.Fatalf("the bomb allocated %d MiB", alloc>>20)
	}
}

// /readyz answers from the producer's state: 200 probes of a beacon whose
// broker drops every connection cost a handful of connections (the
// producer's own rate-limited refreshes), not one dial each.
func TestReadyzDoesNotDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-acceptDone }()
	sh, err := ship.New(ship.Config{Brokers: []string{ln.Addr().String()}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	srv, err := New(Config{}, sh, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	const probes = 200
	for i := range probes {
		resp, err := hs.Client().Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("probe %d: %d %q with a broker that drops every connection", i, resp.StatusCode, b)
		}
	}
	t.Logf("%d probes, %d connections to the broker", probes, accepted.Load())
	if n := accepted.Load(); n > probes/10 {
		t.Fatalf("%d probes made %d connections", probes, n)
	}
}

// A client ts more than max_clock_skew from the receive time is clamped to
// the edge of the window and kept in client_ts; one within it is left
// alone, and a client cannot set client_ts itself.
func TestClientTSClamped(t *testing.T) {
	h := newHarness(t, Config{MaxClockSkew: time.Hour}, ship.Config{})
	received := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	h.server.now = func() time.Time { return received }
	body := `[{"type":"past","ts":0},
		{"type":"future","ts":"9999-12-31T23:59:59Z"},
		{"type":"near","ts":"2026-12-02T12:59:00Z"},
		{"type":"forged","ts":"2026-12-02T11:30:00Z","client_ts":"2001-01-01T00:00:00Z"},
		{"type":"none"}]`
	if resp, res := h.post("/v1/events", "application/json", body); resp.StatusCode != http.StatusOK || res.Accepted != 5 {
		t.Fatalf("%d %+v", resp.StatusCode, res)
	}
	evs := byType(h.events(topic))
	for _, tc := range []struct{ typ, ts, clientTS string }{
		{"past", "2026-12-02T11:00:00Z", "1970-01-01T00:00:00Z"},
		{"future", "2026-12-02T13:00:00Z", "9999-12-31T23:59:59Z"},
		{"near", "2026-12-02T12:59:00Z", ""},
		{"forged", "2026-12-02T11:30:00Z", ""},
		{"none", "", ""},
	} {
		e := evs[tc.typ]
		ts, _ := e["ts"].(string)
		clientTS, _ := e["client_ts"].(string)
		if ts != tc.ts || clientTS != tc.clientTS {
			t.Errorf("%s: ts %q client_ts %q, want %q and %q", tc.typ, ts, clientTS, tc.ts, tc.clientTS)
		}
	}
}

// With metrics_listen, /metrics is on its own listener and gone from the
// ingest one.
func TestMetricsListen(t *testing.T) {
	h := newHarness(t, Config{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0"}, ship.Config{})
	if err := h.server.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.server.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("http://" + h.server.Addr().String() + "/metrics"); code != http.StatusNotFound {
		t.Fatalf("/metrics on the ingest listener: %d, want 404", code)
	}
	if code, _ := get("http://" + h.server.Addr().String() + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz on the ingest listener: %d", code)
	}
	code, b := get("http://" + h.server.MetricsAddr().String() + "/metrics")
	if code != http.StatusOK || !strings.Contains(b, "millrace_beacon_requests_total") {
		t.Fatalf("/metrics on metrics_listen: %d", code)
	}
	if err := (Config{Listen: ":8090", MetricsListen: ":8090"}).WithDefaults().Validate(); err == nil {
		t.Fatal("metrics_listen equal to listen passed Validate")
	}
}
