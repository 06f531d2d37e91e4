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
