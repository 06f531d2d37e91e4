package monitor

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestQuotaSet: the broker's three per-entity gauges become one row per
// (source, entity, kind), the most throttled first; an older sample read
// after a newer one changes nothing, a row silent past staleAfter is gone,
// and rows past the limit are not kept.
func TestQuotaSet(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	sink := map[string]string{"user": "", "client_id": "millrace-sink", "kind": "consumer_byte_rate"}
	alice := map[string]string{"user": "alice", "client_id": "", "kind": "request_percentage"}
	gauge := func(name string, v float64, labels map[string]string, ts time.Time) metricSample {
		return metricSample{Name: name, Kind: "gauge", Value: v, Labels: labels, TS: ts, Source: "h:up"}
	}
	q := newQuotaSet(2)
	q.add(gauge("millrace_broker_produced_bytes", 5, nil, at(0)))
	q.add(gauge(quotaUsageMetric, 10, alice, at(0)))
	q.add(gauge(quotaLimitMetric, 50, alice, at(0)))
	q.add(gauge(quotaThrottleMetric, 0, alice, at(0)))
	q.add(gauge(quotaUsageMetric, 2e6, sink, at(10)))
	q.add(gauge(quotaLimitMetric, 1e6, sink, at(10)))
	q.add(gauge(quotaThrottleMetric, 0.5, sink, at(10)))
	q.add(gauge(quotaThrottleMetric, 0.9, sink, at(5))) // older, read late
	q.add(gauge(quotaUsageMetric, 1, map[string]string{"user": "bob", "kind": "producer_byte_rate"}, at(10)))
	got := q.current(at(20), time.Minute)
	if len(got) != 2 {
		t.Fatalf("rows %+v, want the sink's and alice's (the limit is 2)", got)
	}
	if s := got[0]; s.Entity() != "client-id=millrace-sink" || s.Kind != "consumer_byte_rate" || s.Usage != 2e6 || s.Limit != 1e6 || s.Throttle != 0.5 || !s.LastSeen.Equal(at(10)) {
		t.Errorf("first row %+v, want the throttled sink", s)
	}
	if a := got[1]; a.Entity() != "user=alice" || a.Usage != 10 || a.Limit != 50 || a.Throttle != 0 {
		t.Errorf("second row %+v, want alice", a)
	}
	if got := q.current(at(65), time.Minute); len(got) != 1 || got[0].User != "" {
		t.Errorf("at 65 s: %+v, want only the sink (alice silent for 65 s)", got)
	}
}

// TestWriteTextQuotas: `millrace top` shows the quotas table with each
// entity's usage against its quota in the quota's unit, the share used and
// the throttle time; a client-chosen name cannot reach the terminal raw.
func TestWriteTextQuotas(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := WriteText(&out, Snapshot{Quotas: []Quota{
		{Source: "h:up", ClientID: "millrace-sink", Kind: "consumer_byte_rate", Usage: 3 << 20, Limit: 2 << 20, Throttle: 0.25},
		{Source: "h:up", User: "alice", ClientID: "app\x1b[2J", Kind: "request_percentage", Usage: 12.5, Limit: 50},
		{Source: "h:up", User: "<other>", ClientID: "<other>", Kind: "controller_mutation_rate", Usage: 1, Limit: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.ContainsAny(text, "\x1b") {
		t.Fatalf("control codes reached the terminal: %q", text)
	}
	rows := strings.Split(text[strings.Index(text, "QUOTA ENTITY"):], "\n")
	for i, want := range [][]string{
		{"QUOTA ENTITY", "KIND", "USAGE/LIMIT", "USED", "THROTTLE", "SOURCE"},
		{"client-id=millrace-sink", "consumer_byte_rate", "3.0MiB/s / 2.0MiB/s", "150%", "250 ms/s", "h:up"},
		{`"user=alice, client-id=app\x1b[2J"`, "request_percentage", "12.5% / 50.0%", "25%", "0 ms/s"},
		{"user=<other>, client-id=<other>", "controller_mutation_rate", "1.0/s / 4.0/s", "25%"},
	} {
		for _, cell := range want {
			if !strings.Contains(rows[i], cell) {
				t.Errorf("row %d %q lacks %q", i, rows[i], cell)
			}
		}
	}
	out.Reset()
	if err := WriteText(&out, Snapshot{}); err != nil || strings.Contains(out.String(), "QUOTA") {
		t.Errorf("a quotas table with no quota'd client: %q %v", out.String(), err)
	}
}
