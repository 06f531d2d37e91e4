package beacon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
)

// ackingProducer answers each record at once with fail's verdict, or holds
// the answers while hold is set.
type ackingProducer struct {
	mu   sync.Mutex
	fail func(*kgo.Record) error
	hold bool
	held []func()
}

func (p *ackingProducer) TryProduce(_ context.Context, r *kgo.Record, ack ship.AckFunc) error {
	r.Timestamp = time.Now()
	p.mu.Lock()
	var err error
	if p.fail != nil {
		err = p.fail(r)
	}
	if p.hold {
		p.held = append(p.held, func() { ack(r, err) })
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	ack(r, err)
	return nil
}

func (p *ackingProducer) release() {
	p.mu.Lock()
	held := p.held
	p.held, p.hold = nil, false
	p.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (p *ackingProducer) BufferedRecords() int64                    { return 0 }
func (p *ackingProducer) BufferedBytes() int64                      { return 0 }
func (p *ackingProducer) Config() ship.Config                       { return ship.Config{}.WithDefaults() }
func (p *ackingProducer) ReadyFor(context.Context, ...string) error { return nil }
func (nopAudit) Flush(context.Context) error                        { return nil }
func (nopAudit) Produce(context.Context, *kgo.Record, ship.AckFunc) {}

// nopAudit publishes nothing: the tests read the counters' totals.
type nopAudit struct{}

func newAuditCounter(t *testing.T, role string) *audit.Counter {
	t.Helper()
	c, err := audit.NewCounter(audit.Config{}, role, "beacon-test", false, nopAudit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// totals is a counter's totals by "topic source hour".
func totals(c *audit.Counter) map[string]int64 {
	m := map[string]int64{}
	for _, r := range c.Snapshot() {
		m[r.Topic+" "+r.Source+" "+r.Hour] = r.Accepted
	}
	return m
}

func equalTotals(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestAuditCountsClicksTheBrokerAcknowledged(t *testing.T) {
	p := &ackingProducer{}
	srv, err := New(Config{Topic: topic, DLQTopic: dlqTopic, AckTimeout: 200 * time.Millisecond}, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	clicks, metrics := newAuditCounter(t, audit.RoleBeacon), newAuditCounter(t, audit.RoleIntake)
	srv.SetAudit(clicks, metrics)
	h := &harness{t: t, server: srv, http: httptest.NewServer(srv.Handler())}
	t.Cleanup(h.http.Close)

	ts := time.Now().Add(-time.Minute).UTC()
	hour := audit.Hour(ts)
	body := fmt.Sprintf(`[{"type":"page_view","url":"https://Shop.Example.com:8443/a","ts":%q,"event_id":"0190c4e8-0000-7000-8000-000000000001"},
		{"type":"click","url":"https://shop.example.com/b","ts":%q,"event_id":"0190c4e8-0000-7000-8000-000000000002"},
		{"type":"page_view","ts":%q},
		{"url":"https://shop.example.com/invalid"}]`, ts.Format(time.RFC3339), ts.Format(time.RFC3339), ts.Format(time.RFC3339))

	// The broker fails the second event: the request gets a 503, and only
	// the acknowledged events count (the dead letter never does).
	p.fail = func(r *kgo.Record) error {
		for _, hd := range r.Headers {
			if hd.Key == "event_id" && string(hd.Value) == "0190c4e8-0000-7000-8000-000000000002" {
				return errors.New("not leader")
			}
		}
		return nil
	}
	if resp, _ := h.post("/v1/events", "application/json", body); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	want := map[string]int64{topic + " shop.example.com " + hour: 1, topic + " - " + hour: 1}
	if got := totals(clicks); !equalTotals(got, want) {
		t.Fatalf("after a partly acknowledged request: %v, want %v", got, want)
	}
	// The browser's retry is counted again: the counts are not distinct.
	p.fail = nil
	if resp, _ := h.post("/v1/events", "application/json", body); resp.StatusCode != http.StatusOK {
		t.Fatalf("retry: status %d, want 200", resp.StatusCode)
	}
	want = map[string]int64{topic + " shop.example.com " + hour: 3, topic + " - " + hour: 2}
	if got := totals(clicks); !equalTotals(got, want) {
		t.Fatalf("after the retry: %v, want %v", got, want)
	}

	// An acknowledgement after the request gave up (503) still counts, when
	// it arrives and not before.
	p.mu.Lock()
	p.hold = true
	p.mu.Unlock()
	pixel := "/b.gif?type=page_view&url=https%3A%2F%2Fother.example%2F&ts=" + url.QueryEscape(ts.Format(time.RFC3339))
	if resp, _ := h.do(http.MethodGet, pixel, "", "", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("pixel with the ack held: status %d, want 503", resp.StatusCode)
	}
	if got := totals(clicks); !equalTotals(got, want) {
		t.Fatalf("counted before the broker answered: %v, want %v", got, want)
	}
	p.release()
	want[topic+" other.example "+hour] = 1
	if got := totals(clicks); !equalTotals(got, want) {
		t.Fatalf("pixel acknowledged late: %v, want %v", got, want)
	}
	if len(totals(metrics)) != 0 {
		t.Fatalf("clicks counted as metrics: %v", totals(metrics))
	}
}

func TestAuditCountsMetricSamplesBySource(t *testing.T) {
	p := &ackingProducer{}
	srv, err := New(Config{Topic: topic, DLQTopic: dlqTopic, MetricsTopic: opsTopic, MetricsDLQTopic: opsDLQ}, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	clicks, metrics := newAuditCounter(t, audit.RoleBeacon), newAuditCounter(t, audit.RoleIntake)
	srv.SetAudit(clicks, metrics)
	h := &harness{t: t, server: srv, http: httptest.NewServer(srv.Handler())}
	t.Cleanup(h.http.Close)
	ts := time.Now().UTC()
	body := fmt.Sprintf(`[{"name":"up","kind":"gauge","value":1,"ts":%q},{"name":"up","kind":"gauge","value":1,"ts":%q,"source":"node-2"},{"name":"bad"}]`,
		ts.Format(time.RFC3339Nano), ts.Format(time.RFC3339Nano))
	if resp, _ := h.post("/v1/metrics?source=node-1", "application/json", body); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := map[string]int64{opsTopic + " node-1 " + audit.Hour(ts): 1, opsTopic + " node-2 " + audit.Hour(ts): 1}
	if got := totals(metrics); !equalTotals(got, want) {
		t.Fatalf("metric totals %v, want %v", got, want)
	}
	if len(totals(clicks)) != 0 {
		t.Fatalf("metrics counted as clicks: %v", totals(clicks))
	}
}
