package monitor

import (
	"fmt"
	"testing"
	"time"
)

// TestCountersToInputs: each input's row takes its rate from the counter
// of what it produced and its errors from failed requests (HTTP status 400
// and up, gRPC codes other than OK) or lost syslog messages; the labels
// are those of agents/beacon, agents/promwrite, agents/otlp and
// agents/syslog.
func TestCountersToInputs(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name    string
		samples [][]byte
		want    []string // name source rate unit total error-rate error-unit errors stale
	}{
		{"remote write: produced samples and failed requests",
			[][]byte{
				sampleJSON("millrace_promwrite_samples_produced_total", "counter", 100, `{}`, at(0), "h:up"),
				sampleJSON("millrace_promwrite_requests_total", "counter", 4, `{"code":"204"}`, at(0), "h:up"),
				sampleJSON("millrace_promwrite_samples_produced_total", "counter", 600, `{}`, at(10), "h:up"),
				sampleJSON("millrace_promwrite_requests_total", "counter", 9, `{"code":"204"}`, at(10), "h:up"),
				// First seen in this publication: it was 0 in the last one.
				sampleJSON("millrace_promwrite_requests_total", "counter", 20, `{"code":"503"}`, at(10), "h:up"),
				sampleJSON("millrace_promwrite_requests_total", "counter", 2, `{"code":"400"}`, at(10), "h:up"),
			},
			[]string{"remote write h:up 50.0 samples/s 600 2.2 requests/s 22 false"}},
		{"the beacon's events split into clicks and the metrics intake",
			[][]byte{
				sampleJSON("millrace_beacon_events_total", "counter", 10, `{"stream":"click","result":"accepted"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_events_total", "counter", 7, `{"stream":"click","result":"rejected"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_events_total", "counter", 3, `{"stream":"metric","result":"accepted"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_requests_total", "counter", 1, `{"route":"/v1/events","code":"429"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_requests_total", "counter", 2, `{"route":"/b.gif","code":"503"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_requests_total", "counter", 5, `{"route":"/v1/metrics","code":"400"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_requests_total", "counter", 50, `{"route":"/v1/events","code":"200"}`, at(0), "h:up"),
				sampleJSON("millrace_beacon_requests_total", "counter", 9, `{"route":"/api/v1/write","code":"503"}`, at(0), "h:up"),
			},
			[]string{"beacon h:up 0.0 events/s 10 0.0 requests/s 3 false", "metrics intake h:up 0.0 samples/s 3 0.0 requests/s 5 false"}},
		{"otlp per signal, gRPC codes and HTTP statuses",
			[][]byte{
				sampleJSON("millrace_otlp_items_produced_total", "counter", 0, `{"signal":"logs"}`, at(0), "h:up"),
				sampleJSON("millrace_otlp_items_produced_total", "counter", 0, `{"signal":"traces"}`, at(0), "h:up"),
				sampleJSON("millrace_otlp_items_produced_total", "counter", 40, `{"signal":"logs"}`, at(10), "h:up"),
				sampleJSON("millrace_otlp_items_produced_total", "counter", 0, `{"signal":"traces"}`, at(10), "h:up"),
				sampleJSON("millrace_otlp_requests_total", "counter", 3, `{"signal":"logs","transport":"grpc","code":"OK"}`, at(10), "h:up"),
				sampleJSON("millrace_otlp_requests_total", "counter", 1, `{"signal":"logs","transport":"grpc","code":"Unavailable"}`, at(10), "h:up"),
				sampleJSON("millrace_otlp_requests_total", "counter", 1, `{"signal":"logs","transport":"http","code":"200"}`, at(10), "h:up"),
				sampleJSON("millrace_otlp_requests_total", "counter", 1, `{"signal":"logs","transport":"http","code":"413"}`, at(10), "h:up"),
			},
			[]string{"otlp logs h:up 4.0 records/s 40 0.2 requests/s 2 false", "otlp traces h:up 0.0 spans/s 0 0.0 requests/s 0 false"}},
		{"syslog errors are malformed, dropped and undelivered messages",
			[][]byte{
				sampleJSON("millrace_syslog_produced_total", "counter", 12, `{}`, at(0), "h:up"),
				sampleJSON("millrace_syslog_messages_total", "counter", 10, `{"transport":"udp","result":"parsed"}`, at(0), "h:up"),
				sampleJSON("millrace_syslog_messages_total", "counter", 2, `{"transport":"udp","result":"malformed"}`, at(0), "h:up"),
				sampleJSON("millrace_syslog_dropped_total", "counter", 3, `{"reason":"udp_queue_full"}`, at(0), "h:up"),
				sampleJSON("millrace_syslog_produce_errors_total", "counter", 1, `{}`, at(0), "h:up"),
			},
			[]string{"syslog h:up 0.0 messages/s 12 0.0 messages/s 6 false"}},
		{"inputs of two processes stay apart and in the table's order; a silent one is stale",
			[][]byte{
				sampleJSON("millrace_syslog_produced_total", "counter", 1, `{}`, at(10), "a:up"),
				sampleJSON("millrace_promwrite_samples_produced_total", "counter", 1, `{}`, at(10), "b:beacon"),
				sampleJSON("millrace_promwrite_samples_produced_total", "counter", 1, `{}`, at(-100), "a:up"),
			},
			[]string{"remote write a:up 0.0 samples/s 1 0.0 requests/s 0 true", "remote write b:beacon 0.0 samples/s 1 0.0 requests/s 0 false",
				"syslog a:up 0.0 messages/s 1 0.0 messages/s 0 false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounters(100)
			for _, s := range tc.samples {
				addRaw(c, s)
			}
			var got []string
			for _, in := range c.inputs(at(11), time.Minute) {
				got = append(got, fmt.Sprintf("%s %s %.1f %s %.0f %.1f %s %.0f %v", in.Name, in.Source, in.Rate, in.Unit, in.Total, in.ErrorRate, in.ErrorUnit, in.Errors, in.Stale))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("inputs\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
