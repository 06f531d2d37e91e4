package schemas

import "fmt"

// The built-in schemas. Their field names are the wire contract between the
// agents, the sinks and users (docs/architecture.md §7); new fields are only ever appended,
// optional, with the version bumped (see CheckEvolution).
var (
	// Log is a line read by `millrace tail`.
	Log = mustNew("log", 1, "ts", []Field{
		{Name: "event_id", Type: TypeString, Required: true, Since: 1,
			Doc: "32 hex chars: a hash of the file identity, then the byte offset; stable across re-reads"},
		{Name: "ts", Type: TypeTimestamp, Required: true, Since: 1,
			Doc: "read time, or the time parsed from the line when a pattern is configured"},
		{Name: "host", Type: TypeString, Dictionary: true, Since: 1, Doc: "host the line was read on"},
		{Name: "source", Type: TypeString, Required: true, Dictionary: true, Since: 1, Doc: "file path"},
		{Name: "offset", Type: TypeInt64, Required: true, Since: 1, Doc: "byte offset of the line's start"},
		{Name: "line", Type: TypeString, Required: true, Since: 1, Doc: "the line without its newline"},
		{Name: "truncated", Type: TypeBool, Since: 1, Doc: "the line was cut at the maximum line size"},
		{Name: "invalid_utf8", Type: TypeBool, Since: 1, Doc: "invalid UTF-8 in the line was replaced"},
		{Name: "fields", Type: TypeStringMap, Since: 1, Dictionary: true, Doc: "static labels from the tailer's config"},
		{Name: "extra", Type: TypeJSON, CatchAll: true, Since: 1, Doc: "unknown top-level fields, as a JSON object"},
	})

	// Click is a web event received by `millrace beacon`.
	// Version 2 added client_ts.
	Click = mustNew("click", 2, "ts", []Field{
		{Name: "event_id", Type: TypeString, Since: 1, Doc: "UUIDv7 set by the beacon"},
		{Name: "type", Type: TypeString, Required: true, Dictionary: true, Since: 1, MaxBytes: MaxLabelBytes,
			Doc: "page_view, click, or a custom event name"},
		{Name: "url", Type: TypeString, Dictionary: true, Since: 1, Doc: "page URL"},
		{Name: "referrer", Type: TypeString, Dictionary: true, Since: 1, Doc: "referring URL"},
		{Name: "title", Type: TypeString, Dictionary: true, Since: 1, Doc: "page title"},
		{Name: "anonymous_id", Type: TypeString, Since: 1, Doc: "browser-scoped id"},
		{Name: "user_id", Type: TypeString, Since: 1, Doc: "the site's user id when known"},
		{Name: "session_id", Type: TypeString, Since: 1, Doc: "session id"},
		{Name: "ts", Type: TypeTimestamp, Since: 1, Doc: "client time (RFC 3339 or epoch milliseconds on input)"},
		{Name: "received_at", Type: TypeTimestamp, Since: 1, Doc: "time the beacon received the event"},
		{Name: "ip", Type: TypeString, Since: 1, Doc: "client IP, possibly truncated"},
		{Name: "user_agent", Type: TypeString, Dictionary: true, Since: 1, Doc: "client user agent"},
		{Name: "properties", Type: TypeJSON, CatchAll: true, Since: 1,
			Doc: "extra event data and unknown top-level fields, as a JSON object"},
		{Name: "client_ts", Type: TypeTimestamp, Since: 2,
			Doc: "the ts the client sent, when the beacon clamped ts to received_at ± its max_clock_skew; null otherwise"},
	})

	// Metric is one sample from the metrics intake or a component's ops metrics.
	Metric = mustNew("metric", 1, "ts", []Field{
		{Name: "name", Type: TypeString, Required: true, Dictionary: true, Since: 1, MaxBytes: MaxLabelBytes, Doc: "metric name"},
		{Name: "kind", Type: TypeString, Required: true, Dictionary: true, Since: 1,
			Enum: []string{"counter", "gauge", "histogram", "summary", "untyped"}, Doc: "metric type"},
		{Name: "value", Type: TypeFloat64, Required: true, Since: 1, Doc: "sample value"},
		{Name: "labels", Type: TypeStringMap, Dictionary: true, Since: 1, MaxBytes: MaxLabelSetBytes, Doc: "label set"},
		{Name: "ts", Type: TypeTimestamp, Required: true, Since: 1, Doc: "sample time"},
		{Name: "source", Type: TypeString, Dictionary: true, Since: 1, MaxBytes: MaxLabelBytes, Doc: "host:component that reported it"},
		{Name: "extra", Type: TypeJSON, CatchAll: true, Since: 1, Doc: "unknown top-level fields, as a JSON object"},
	})
)

// Bounds of the fields that become keys and labels downstream (the
// console's metric series, `lake count` groups, Kafka record keys): a
// metric's name and source and a click's type take MaxLabelBytes, a
// metric's labels MaxLabelSetBytes in all.
const (
	MaxLabelBytes    = 255
	MaxLabelSetBytes = 8 << 10
)

// All lists the built-in schemas.
func All() []*Schema { return []*Schema{Log, Click, Metric, OtelLogs, OtelSpans, OtelMetrics, Syslog} }

// ByName returns the built-in schema called name ("log", "click", "metric",
// "otel-logs", "otel-spans", "otel-metrics" or "syslog").
func ByName(name string) (*Schema, error) {
	for _, s := range All() {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("schemas: unknown schema %q (want log, click, metric, otel-logs, otel-spans, otel-metrics or syslog)", name)
}
