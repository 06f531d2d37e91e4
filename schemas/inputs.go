package schemas

// The schemas of the inputs that speak other protocols (docs/lake.md): the
// OTLP records agents/otlp writes, in the shape of the OpenTelemetry
// Collector's Kafka exporter, and the JSON records of agents/syslog.
//
// An OTLP record holds many log records, spans or data points, and the
// otel-* schemas have a row per log record, span or data point: their rows
// are built from pdata by schemas/otel, never decoded from JSON, so they
// have no catch-all column. Attribute maps are map<string,string>: a value
// that is not a string is its OTLP JSON text (pcommon.Value.AsString), so
// `attributes['http.status_code']` compares as text. Lists (histogram
// buckets, span events) are JSON text in string columns: the columnar
// layer has no list type.
var (
	// OtelLogs is one OTLP log record.
	OtelLogs = mustNew("otel-logs", 1, "time", append([]Field{
		{Name: "event_id", Type: TypeString, Since: 1,
			Doc: "the record's event_id attribute (a UUIDv7 the OTLP receiver adds); dedup's id"},
		{Name: "time", Type: TypeTimestamp, Since: 1,
			Doc: "when the event occurred, or the observed time when the record has none (OTel log data model)"},
		{Name: "observed_time", Type: TypeTimestamp, Since: 1, Doc: "when the event was observed by the collection system"},
		{Name: "severity_number", Type: TypeInt64, Since: 1, Doc: "1-24 (TRACE to FATAL4); 0 unspecified"},
		{Name: "severity_text", Type: TypeString, Dictionary: true, Since: 1, Doc: "the severity as the source spelt it"},
		{Name: "body", Type: TypeString, Since: 1, Doc: "the body: a string as is, any other value as its OTLP JSON"},
		{Name: "event_name", Type: TypeString, Dictionary: true, Since: 1, Doc: "the record's event name, when it is an event"},
		{Name: "trace_id", Type: TypeString, Since: 1, Doc: "32 hex digits; null when the record has none"},
		{Name: "span_id", Type: TypeString, Since: 1, Doc: "16 hex digits; null when the record has none"},
		{Name: "flags", Type: TypeInt64, Since: 1, Doc: "W3C trace flags"},
		{Name: "attributes", Type: TypeStringMap, Since: 1, Doc: "the record's attributes but event_id"},
	}, otelCommon...))

	// OtelSpans is one OTLP span.
	OtelSpans = mustNew("otel-spans", 1, "start_time", append([]Field{
		{Name: "trace_id", Type: TypeString, Required: true, Since: 1, Doc: "32 hex digits"},
		{Name: "span_id", Type: TypeString, Required: true, Since: 1, Doc: "16 hex digits"},
		{Name: "parent_span_id", Type: TypeString, Since: 1, Doc: "16 hex digits; null for a root span"},
		{Name: "trace_state", Type: TypeString, Since: 1, Doc: "W3C tracestate"},
		{Name: "name", Type: TypeString, Required: true, Dictionary: true, Since: 1, Doc: "the operation's name"},
		{Name: "kind", Type: TypeString, Required: true, Dictionary: true, Since: 1,
			Enum: []string{"unspecified", "internal", "server", "client", "producer", "consumer"}, Doc: "span kind"},
		{Name: "start_time", Type: TypeTimestamp, Since: 1, Doc: "when the span started"},
		{Name: "end_time", Type: TypeTimestamp, Since: 1, Doc: "when the span ended"},
		{Name: "duration_ns", Type: TypeInt64, Since: 1, Doc: "end minus start, in nanoseconds"},
		{Name: "status_code", Type: TypeString, Required: true, Dictionary: true, Since: 1,
			Enum: []string{"unset", "ok", "error"}, Doc: "span status"},
		{Name: "status_message", Type: TypeString, Since: 1, Doc: "the status's description"},
		{Name: "flags", Type: TypeInt64, Since: 1, Doc: "W3C trace flags"},
		{Name: "attributes", Type: TypeStringMap, Since: 1, Doc: "the span's attributes"},
		{Name: "events", Type: TypeString, Since: 1,
			Doc: `JSON array of {"time","name","attributes"}; null when the span has none`},
		{Name: "links", Type: TypeString, Since: 1,
			Doc: `JSON array of {"trace_id","span_id","trace_state","attributes"}; null when the span has none`},
	}, otelCommon...))

	// OtelMetrics is one OTLP metric data point.
	OtelMetrics = mustNew("otel-metrics", 1, "time", append([]Field{
		{Name: "name", Type: TypeString, Required: true, Dictionary: true, Since: 1, Doc: "metric name"},
		{Name: "description", Type: TypeString, Dictionary: true, Since: 1, Doc: "metric description"},
		{Name: "unit", Type: TypeString, Dictionary: true, Since: 1, Doc: "UCUM unit"},
		{Name: "type", Type: TypeString, Required: true, Dictionary: true, Since: 1,
			Enum: []string{"gauge", "sum", "histogram", "exponential_histogram", "summary"}, Doc: "metric type"},
		{Name: "time", Type: TypeTimestamp, Since: 1, Doc: "the point's time"},
		{Name: "start_time", Type: TypeTimestamp, Since: 1, Doc: "start of a cumulative or delta point's interval"},
		{Name: "value", Type: TypeFloat64, Since: 1, Doc: "gauge and sum: the value (an integer point's as a number)"},
		{Name: "aggregation_temporality", Type: TypeString, Dictionary: true, Since: 1,
			Doc: "sum and histograms: delta or cumulative"},
		{Name: "is_monotonic", Type: TypeBool, Since: 1, Doc: "sum: whether it only grows"},
		{Name: "count", Type: TypeInt64, Since: 1, Doc: "histograms and summary: how many values"},
		{Name: "sum", Type: TypeFloat64, Since: 1, Doc: "histograms and summary: their sum, when set"},
		{Name: "min", Type: TypeFloat64, Since: 1, Doc: "histograms: the smallest value, when set"},
		{Name: "max", Type: TypeFloat64, Since: 1, Doc: "histograms: the largest value, when set"},
		{Name: "bucket_counts", Type: TypeString, Since: 1,
			Doc: "histogram: JSON array of the bucket counts; exponential histogram: JSON object " +
				`{"scale","zero_count","positive":{"offset","bucket_counts"},"negative":{…}}`},
		{Name: "explicit_bounds", Type: TypeString, Since: 1, Doc: "histogram: JSON array of the bucket bounds"},
		{Name: "quantiles", Type: TypeString, Since: 1, Doc: `summary: JSON array of {"quantile","value"}`},
		{Name: "flags", Type: TypeInt64, Since: 1, Doc: "data point flags (1: no recorded value)"},
		{Name: "attributes", Type: TypeStringMap, Since: 1, Doc: "the point's attributes"},
	}, otelCommon...))

	// Syslog is one message received by agents/syslog.
	Syslog = mustNew("syslog", 1, "received_at", []Field{
		{Name: "event_id", Type: TypeString, Since: 1, Doc: "UUIDv7 set by the receiver"},
		{Name: "format", Type: TypeString, Dictionary: true, Since: 1, Doc: `rfc5424, rfc3164, or "" when the PRI is bad`},
		{Name: "facility", Type: TypeInt64, Since: 1, Doc: "0-23"},
		{Name: "facility_name", Type: TypeString, Dictionary: true, Since: 1, Doc: "kern, user, … local7"},
		{Name: "severity", Type: TypeInt64, Since: 1, Doc: "0-7"},
		{Name: "severity_name", Type: TypeString, Dictionary: true, Since: 1, Doc: "emerg … debug"},
		{Name: "timestamp", Type: TypeTimestamp, Since: 1, Doc: "the message's own time; null when it has none"},
		{Name: "host", Type: TypeString, Dictionary: true, Since: 1, Doc: "HOSTNAME"},
		{Name: "app", Type: TypeString, Dictionary: true, Since: 1, Doc: "APP-NAME or the RFC 3164 TAG"},
		{Name: "procid", Type: TypeString, Since: 1, Doc: "PROCID or the TAG's [PID]"},
		{Name: "msgid", Type: TypeString, Dictionary: true, Since: 1, Doc: "MSGID (RFC 5424)"},
		{Name: "structured_data", Type: TypeJSON, Since: 1, Doc: "SD-ID → {PARAM-NAME → value}, as a JSON object"},
		{Name: "message", Type: TypeString, Since: 1, Doc: "MSG; empty when parse_error is set"},
		{Name: "raw", Type: TypeString, Since: 1, Doc: "the whole message, when it did not parse"},
		{Name: "parse_error", Type: TypeString, Since: 1, Doc: "why the message did not parse"},
		{Name: "truncated", Type: TypeBool, Since: 1, Doc: "the message was longer than the receiver's max_message_bytes"},
		{Name: "received_at", Type: TypeTimestamp, Required: true, Since: 1,
			Doc: "when the receiver read the message; the bucket's time, as the receiver's audit counts it"},
		{Name: "sender", Type: TypeString, Since: 1, Doc: "the sender's address (ip:port)"},
		{Name: "transport", Type: TypeString, Dictionary: true, Since: 1, Doc: "udp, tcp or tls"},
		{Name: "extra", Type: TypeJSON, CatchAll: true, Since: 1, Doc: "unknown top-level fields, as a JSON object"},
	})
)

// otelCommon are the columns every otel-* row takes from its resource and
// scope.
var otelCommon = []Field{
	{Name: "service_name", Type: TypeString, Dictionary: true, Since: 1, Doc: "the resource's service.name attribute"},
	{Name: "resource_attributes", Type: TypeStringMap, Dictionary: true, Since: 1, Doc: "the resource's attributes"},
	{Name: "scope_name", Type: TypeString, Dictionary: true, Since: 1, Doc: "instrumentation scope name"},
	{Name: "scope_version", Type: TypeString, Dictionary: true, Since: 1, Doc: "instrumentation scope version"},
}

// IsOTLP reports whether s is one of the otel-* schemas, whose rows are
// built from OTLP records by schemas/otel rather than decoded from JSON.
func IsOTLP(s *Schema) bool { return s == OtelLogs || s == OtelSpans || s == OtelMetrics }
