package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// beaconProc is a `millrace beacon` process and its base URL.
type beaconProc struct {
	*process
	url string
}

func startBeacon(t *testing.T, b *broker, yaml string) *beaconProc {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg := filepath.Join(t.TempDir(), "beacon.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &beaconProc{process: startProcess(t, "beacon", "beacon", "-b", b.addr, "--listen", addr, "--config", cfg), url: "http://" + addr}
	var err error
	defer reportLastSeen(t, func() string { return fmt.Sprintf("GET /healthz: %v", err) })()
	waitfor.Until(t, 20*time.Second, "the beacon to be healthy", func() bool {
		var resp *http.Response
		if resp, err = http.Get(p.url + "/healthz"); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func request(t *testing.T, method, url, contentType, body string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header}
	json.Unmarshal(raw, &a.body)
	return a
}

// TestBeaconAgainstBroker drives a real beacon process in front of a real
// broker: pixel, single and batch POST, text/plain (sendBeacon), CORS,
// limits, bad input, the dead-letter topic, and a broker outage in which
// nothing acknowledged is lost.
func TestBeaconAgainstBroker(t *testing.T) {
	b := startBroker(t)
	for _, topic := range []string{"clicks", "clicks.dlq"} {
		b.createTopic(t, topic, 3, nil)
	}
	bc := startBeacon(t, b, `
beacon:
  topic: clicks
  allowed_origins: ["https://shop.example"]
  truncate_ip: true
  max_body_bytes: 4096
  max_events_per_request: 20
  rate_limit: 50
  rate_burst: 60
  ack_timeout: 3s
ship:
  linger: 1ms
`)
	acked := map[string]bool{} // title of every event answered 2xx

	pixel := request(t, "GET", bc.url+"/b.gif?type=page_view&url=https%3A%2F%2Fshop.example%2F&title=pixel-1", "", "", map[string]string{"User-Agent": "e2e-agent/1"})
	if pixel.status != 200 || pixel.header.Get("Content-Type") != "image/gif" || !strings.Contains(pixel.header.Get("Cache-Control"), "no-cache") {
		t.Fatalf("pixel: %d %v", pixel.status, pixel.header)
	}
	acked["pixel-1"] = true

	one := request(t, "POST", bc.url+"/v1/events", "application/json", `{"type":"click","url":"https://shop.example/a","title":"single-1","ts":1700000000000,"plan":"gold"}`, nil)
	if one.status != 200 || one.body["accepted"] != 1.0 {
		t.Fatalf("single POST: %d %v", one.status, one.body)
	}
	acked["single-1"] = true

	var batch []string
	for i := 0; i < 5; i++ {
		batch = append(batch, fmt.Sprintf(`{"type":"page_view","title":"batch-%d","anonymous_id":"a1"}`, i))
		acked[fmt.Sprintf("batch-%d", i)] = true
	}
	// sendBeacon's content type; one invalid event (no type) goes to the DLQ
	// while the valid ones of the batch go through.
	mixed := request(t, "POST", bc.url+"/v1/events", "text/plain;charset=UTF-8", "["+strings.Join(batch, ",")+`,{"title":"no-type"}]`, nil)
	if mixed.status != 200 || mixed.body["accepted"] != 5.0 || mixed.body["rejected"] != 1.0 {
		t.Fatalf("batch POST: %d %v", mixed.status, mixed.body)
	}

	pre := request(t, "OPTIONS", bc.url+"/v1/events", "", "", map[string]string{
		"Origin": "https://shop.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
	if pre.status/100 != 2 || pre.header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Fatalf("allowed preflight: %d %v", pre.status, pre.header)
	}
	denied := request(t, "OPTIONS", bc.url+"/v1/events", "", "", map[string]string{
		"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
	if denied.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("denied origin got CORS headers: %v", denied.header)
	}

	if a := request(t, "POST", bc.url+"/v1/events", "application/json", `{"type":"click","title":"`+strings.Repeat("x", 5000)+`"}`, nil); a.status != 413 {
		t.Errorf("oversized body: %d, want 413", a.status)
	}
	if a := request(t, "POST", bc.url+"/v1/events", "application/json", `{"type":`, nil); a.status != 400 {
		t.Errorf("bad JSON: %d, want 400", a.status)
	}

	// Rate limit: well past the burst from one IP, some answers are 429
	// with Retry-After.
	limited := 0
	for i := 0; i < 120; i++ {
		a := request(t, "GET", bc.url+"/b.gif?type=rl&title=rate-"+strconv.Itoa(i), "", "", nil)
		switch a.status {
		case 200:
			acked["rate-"+strconv.Itoa(i)] = true
		case 429:
			limited++
			if a.header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("pixel %d: status %d", i, a.status)
		}
	}
	if limited == 0 {
		t.Error("120 requests at once from one IP were never rate limited (burst 60)")
	}
	time.Sleep(2 * time.Second) // let the bucket refill

	// Broker down: answers are 503 with Retry-After, never 2xx for events the
	// broker did not take.
	b.stop(syscall.SIGTERM, 15*time.Second)
	down := request(t, "POST", bc.url+"/v1/events", "application/json", `{"type":"click","title":"during-outage"}`, nil)
	if down.status != 503 || down.header.Get("Retry-After") == "" {
		t.Fatalf("with the broker down: %d %v, want 503 with Retry-After", down.status, down.header)
	}
	b.start()
	b.waitReady()
	// The beacon's producer reconnects on its own backoff, so the first
	// request after the broker is back may still be answered 503: a client
	// retries it, as beacon.js does, and is accepted within seconds. Each
	// attempt has its own title; only the accepted one must be in the topic.
	var after answer
	for i := 0; ; i++ {
		title := "after-outage-" + strconv.Itoa(i)
		after = request(t, "POST", bc.url+"/v1/events", "application/json", `{"type":"click","title":"`+title+`"}`, nil)
		if after.status == 200 {
			acked[title] = true
			break
		}
		if after.status != 503 || after.header.Get("Retry-After") == "" || i == 10 {
			t.Fatalf("after the broker returned, attempt %d: %d %v %v", i, after.status, after.header, after.body)
		}
	}

	// Every event answered 2xx is in the topic, enriched.
	got := consumeAll(t, b, "clicks", len(acked), 30*time.Second)
	seen := map[string]map[string]any{}
	for _, v := range got {
		var ev map[string]any
		if err := json.Unmarshal(v, &ev); err != nil {
			t.Fatalf("click is not JSON: %q", v)
		}
		if title, _ := ev["title"].(string); title != "" {
			seen[title] = ev
		}
	}
	for title := range acked {
		if seen[title] == nil {
			t.Errorf("event %q was acknowledged with 2xx but is not in the topic", title)
		}
	}
	ev := seen["single-1"]
	if ev == nil {
		t.FailNow()
	}
	if id, _ := ev["event_id"].(string); len(id) != 36 || id[14] != '7' {
		t.Errorf("event_id %v is not a UUIDv7", ev["event_id"])
	}
	if ev["ip"] != "127.0.0.0" {
		t.Errorf("ip %v, want 127.0.0.0 (truncated to /24)", ev["ip"])
	}
	// The client's 2023 time is beyond max_clock_skew (24h): kept in
	// client_ts, and ts is clamped to a day before received_at.
	if ev["client_ts"] != "2023-11-14T22:13:20Z" {
		t.Errorf("client_ts %v, want the epoch-ms client time as RFC 3339", ev["client_ts"])
	}
	ts, tsErr := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["ts"]))
	received, recErr := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["received_at"]))
	if tsErr != nil || recErr != nil || received.Sub(ts) != 24*time.Hour {
		t.Errorf("ts %v, want received_at %v less 24h", ev["ts"], ev["received_at"])
	}
	if props, _ := ev["properties"].(map[string]any); props["plan"] != "gold" {
		t.Errorf("unknown field not kept in properties: %v", ev["properties"])
	}
	if _, ok := ev["received_at"].(string); !ok {
		t.Errorf("received_at missing: %v", ev)
	}
	if seen["pixel-1"]["user_agent"] != "e2e-agent/1" {
		t.Errorf("pixel user_agent %v", seen["pixel-1"]["user_agent"])
	}
	dlq := consumeAll(t, b, "clicks.dlq", 1, 10*time.Second)
	if !strings.Contains(string(dlq[0]), "no-type") || !strings.Contains(string(dlq[0]), "type") {
		t.Errorf("dead-letter record lacks the payload or reason: %s", dlq[0])
	}
}

// consumeAll reads a topic from the start until it has at least n records
// and the topic is quiet, or the timeout passes.
func consumeAll(t *testing.T, b *broker, topic string, n int, timeout time.Duration) [][]byte {
	t.Helper()
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out [][]byte
	for ctx.Err() == nil {
		pollCtx, pollCancel := context.WithTimeout(ctx, time.Second)
		f := cl.PollFetches(pollCtx)
		pollCancel()
		before := len(out)
		f.EachRecord(func(r *kgo.Record) { out = append(out, r.Value) })
		if len(out) >= n && len(out) == before {
			break
		}
	}
	if len(out) < n {
		t.Fatalf("%s: read %d records, want at least %d", topic, len(out), n)
	}
	return out
}
