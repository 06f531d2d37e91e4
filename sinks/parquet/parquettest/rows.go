// Package parquettest holds xitongsys/parquet-go row types for the built-in
// schemas, so tests of the sinks can read files back with an independent
// implementation (parquet.ReadRows). Their tags mirror the columns'
// nullability exactly: required columns are plain fields, optional ones are
// pointers tagged repetitiontype=OPTIONAL. Timestamps are microseconds since
// the epoch, UTC.
package parquettest

// LogRow is one row of a log file (schema log, version 1).
type LogRow struct {
	EventID     string            `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8"`
	TS          int64             `parquet:"name=ts, type=INT64"`
	Host        *string           `parquet:"name=host, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Source      string            `parquet:"name=source, type=BYTE_ARRAY, convertedtype=UTF8"`
	Offset      int64             `parquet:"name=offset, type=INT64"`
	Line        string            `parquet:"name=line, type=BYTE_ARRAY, convertedtype=UTF8"`
	Truncated   *bool             `parquet:"name=truncated, type=BOOLEAN, repetitiontype=OPTIONAL"`
	InvalidUTF8 *bool             `parquet:"name=invalid_utf8, type=BOOLEAN, repetitiontype=OPTIONAL"`
	Fields      map[string]string `parquet:"name=fields, type=MAP, convertedtype=MAP, keytype=BYTE_ARRAY, keyconvertedtype=UTF8, valuetype=BYTE_ARRAY, valueconvertedtype=UTF8, repetitiontype=OPTIONAL"`
	Extra       *string           `parquet:"name=extra, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
}

// ClickRow is one row of a click file (schema click, version 1).
type ClickRow struct {
	EventID     *string `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Type        string  `parquet:"name=type, type=BYTE_ARRAY, convertedtype=UTF8"`
	URL         *string `parquet:"name=url, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Referrer    *string `parquet:"name=referrer, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Title       *string `parquet:"name=title, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	AnonymousID *string `parquet:"name=anonymous_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	UserID      *string `parquet:"name=user_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	SessionID   *string `parquet:"name=session_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	TS          *int64  `parquet:"name=ts, type=INT64, repetitiontype=OPTIONAL"`
	ReceivedAt  *int64  `parquet:"name=received_at, type=INT64, repetitiontype=OPTIONAL"`
	IP          *string `parquet:"name=ip, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	UserAgent   *string `parquet:"name=user_agent, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Properties  *string `parquet:"name=properties, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
}

// MetricRow is one row of a metric file (schema metric, version 1).
type MetricRow struct {
	Name   string            `parquet:"name=name, type=BYTE_ARRAY, convertedtype=UTF8"`
	Kind   string            `parquet:"name=kind, type=BYTE_ARRAY, convertedtype=UTF8"`
	Value  float64           `parquet:"name=value, type=DOUBLE"`
	Labels map[string]string `parquet:"name=labels, type=MAP, convertedtype=MAP, keytype=BYTE_ARRAY, keyconvertedtype=UTF8, valuetype=BYTE_ARRAY, valueconvertedtype=UTF8, repetitiontype=OPTIONAL"`
	TS     int64             `parquet:"name=ts, type=INT64"`
	Source *string           `parquet:"name=source, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Extra  *string           `parquet:"name=extra, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
}

// OtelLogRow is one row of an otel-logs file (schema otel-logs, version 1).
type OtelLogRow struct {
	EventID            *string           `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Time               *int64            `parquet:"name=time, type=INT64, repetitiontype=OPTIONAL"`
	ObservedTime       *int64            `parquet:"name=observed_time, type=INT64, repetitiontype=OPTIONAL"`
	SeverityNumber     *int64            `parquet:"name=severity_number, type=INT64, repetitiontype=OPTIONAL"`
	SeverityText       *string           `parquet:"name=severity_text, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Body               *string           `parquet:"name=body, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	EventName          *string           `parquet:"name=event_name, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	TraceID            *string           `parquet:"name=trace_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	SpanID             *string           `parquet:"name=span_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Flags              *int64            `parquet:"name=flags, type=INT64, repetitiontype=OPTIONAL"`
	Attributes         map[string]string `parquet:"name=attributes, type=MAP, convertedtype=MAP, keytype=BYTE_ARRAY, keyconvertedtype=UTF8, valuetype=BYTE_ARRAY, valueconvertedtype=UTF8, repetitiontype=OPTIONAL"`
	ServiceName        *string           `parquet:"name=service_name, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	ResourceAttributes map[string]string `parquet:"name=resource_attributes, type=MAP, convertedtype=MAP, keytype=BYTE_ARRAY, keyconvertedtype=UTF8, valuetype=BYTE_ARRAY, valueconvertedtype=UTF8, repetitiontype=OPTIONAL"`
	ScopeName          *string           `parquet:"name=scope_name, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	ScopeVersion       *string           `parquet:"name=scope_version, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
}

// OtelSpanRow is the leading columns of an otel-spans row (schema
// otel-spans, version 1): the reader takes the columns a struct names.
type OtelSpanRow struct {
	TraceID      string  `parquet:"name=trace_id, type=BYTE_ARRAY, convertedtype=UTF8"`
	SpanID       string  `parquet:"name=span_id, type=BYTE_ARRAY, convertedtype=UTF8"`
	ParentSpanID *string `parquet:"name=parent_span_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	TraceState   *string `parquet:"name=trace_state, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Name         string  `parquet:"name=name, type=BYTE_ARRAY, convertedtype=UTF8"`
	Kind         string  `parquet:"name=kind, type=BYTE_ARRAY, convertedtype=UTF8"`
	StartTime    *int64  `parquet:"name=start_time, type=INT64, repetitiontype=OPTIONAL"`
	EndTime      *int64  `parquet:"name=end_time, type=INT64, repetitiontype=OPTIONAL"`
	DurationNS   *int64  `parquet:"name=duration_ns, type=INT64, repetitiontype=OPTIONAL"`
	StatusCode   string  `parquet:"name=status_code, type=BYTE_ARRAY, convertedtype=UTF8"`
}

// OtelMetricRow is the leading columns of an otel-metrics row (schema
// otel-metrics, version 1).
type OtelMetricRow struct {
	Name           string   `parquet:"name=name, type=BYTE_ARRAY, convertedtype=UTF8"`
	Description    *string  `parquet:"name=description, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Unit           *string  `parquet:"name=unit, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Type           string   `parquet:"name=type, type=BYTE_ARRAY, convertedtype=UTF8"`
	Time           *int64   `parquet:"name=time, type=INT64, repetitiontype=OPTIONAL"`
	StartTime      *int64   `parquet:"name=start_time, type=INT64, repetitiontype=OPTIONAL"`
	Value          *float64 `parquet:"name=value, type=DOUBLE, repetitiontype=OPTIONAL"`
	Temporality    *string  `parquet:"name=aggregation_temporality, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	IsMonotonic    *bool    `parquet:"name=is_monotonic, type=BOOLEAN, repetitiontype=OPTIONAL"`
	Count          *int64   `parquet:"name=count, type=INT64, repetitiontype=OPTIONAL"`
	Sum            *float64 `parquet:"name=sum, type=DOUBLE, repetitiontype=OPTIONAL"`
	Min            *float64 `parquet:"name=min, type=DOUBLE, repetitiontype=OPTIONAL"`
	Max            *float64 `parquet:"name=max, type=DOUBLE, repetitiontype=OPTIONAL"`
	BucketCounts   *string  `parquet:"name=bucket_counts, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	ExplicitBounds *string  `parquet:"name=explicit_bounds, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Quantiles      *string  `parquet:"name=quantiles, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
}
