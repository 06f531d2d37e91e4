// Package otel builds the rows of the otel-logs, otel-spans and
// otel-metrics lake schemas (schemas.OtelLogs …) from OTLP records as
// agents/otlp writes them, in the shape of the OpenTelemetry Collector's
// Kafka exporter: one ExportLogsServiceRequest, ExportTraceServiceRequest
// or ExportMetricsServiceRequest per record, as protobuf (otlp_proto, the
// default) or as OTLP JSON (otlp_json).
//
// The encoding is detected per record, so one sink lands either and a
// topic may hold both: a record whose first byte other than JSON
// whitespace is '{' is OTLP JSON, anything else protobuf. No valid
// protobuf export request starts with '{' (0x7b is field 15 with the
// deprecated start-group wire type, and the requests have no field 15).
//
// A record holds many log records, spans or data points: Decode reads one
// and Fill makes its i-th row. Decoding holds the record's pdata and an
// index of 16 bytes per row until the next Decode or Release, so the memory
// a record costs is bounded by its size: pdata's objects take a few times
// the encoded bytes for ordinary items (a 1 MiB record of about 10^4 log
// records holds a few MiB), and up to about 75 times for a crafted record
// of empty items, 2 bytes each on the wire (measured: 302 MiB of heap for
// 4 MiB of them, 2 million rows). Decode refuses a value larger than
// MaxRecordBytes, twice what the OTLP receiver and the Collector's Kafka
// exporter write by default, which bounds that at about 150 MiB.
package otel

import (
	"crypto/sha256"
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"millrace/schemas"
)

// signal is which of the three OTLP signals a schema holds.
type signal uint8

const (
	signalLogs signal = iota + 1
	signalSpans
	signalMetrics
)

// loc is where one row's item sits in the decoded request: the resource,
// the scope within it, the log record, span or metric within that, and
// for metrics the data point within the metric.
type loc struct {
	resource, scope, item, point int32
}

// Rows decodes records of one otel-* schema and builds their rows. It is
// reused from record to record and not safe for concurrent use.
type Rows struct {
	schema  *schemas.Schema
	signal  signal
	logs    plog.Logs
	traces  ptrace.Traces
	metrics pmetric.Metrics
	locs    []loc
	cols    columns
	scratch []byte // JSON text of lists, reused
	seen    map[string]struct{}
}

// New returns the row builder of s, or an error when s is not one of the
// otel-* schemas (schemas.IsOTLP).
func New(s *schemas.Schema) (*Rows, error) {
	r := &Rows{schema: s, seen: map[string]struct{}{}}
	switch s {
	case schemas.OtelLogs:
		r.signal = signalLogs
	case schemas.OtelSpans:
		r.signal = signalSpans
	case schemas.OtelMetrics:
		r.signal = signalMetrics
	default:
		return nil, fmt.Errorf("otel: schema %s is not an OTLP schema", s.Name)
	}
	r.cols = columnsOf(s)
	return r, nil
}

// isJSON reports whether value is OTLP JSON rather than protobuf (see the
// package documentation).
func isJSON(value []byte) bool {
	for _, c := range value {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// MaxRecordBytes is the largest record value Decode reads (see the
// package documentation).
const MaxRecordBytes = 2 << 20

// Decode reads one record's value and indexes its rows; the rows of an
// earlier record are gone. An error is a sentence for the dead letter's
// reason.
func (r *Rows) Decode(value []byte) error {
	r.Release()
	if len(value) > MaxRecordBytes {
		return fmt.Errorf("an OTLP record of %d bytes is larger than the %d the sink decodes (its pdata would take many times that)",
			len(value), MaxRecordBytes)
	}
	json := isJSON(value)
	var err error
	switch r.signal {
	case signalLogs:
		if json {
			r.logs, err = new(plog.JSONUnmarshaler).UnmarshalLogs(value)
		} else {
			r.logs, err = new(plog.ProtoUnmarshaler).UnmarshalLogs(value)
		}
		if err == nil {
			r.indexLogs()
		}
	case signalSpans:
		if json {
			r.traces, err = new(ptrace.JSONUnmarshaler).UnmarshalTraces(value)
		} else {
			r.traces, err = new(ptrace.ProtoUnmarshaler).UnmarshalTraces(value)
		}
		if err == nil {
			r.indexSpans()
		}
	case signalMetrics:
		if json {
			r.metrics, err = new(pmetric.JSONUnmarshaler).UnmarshalMetrics(value)
		} else {
			r.metrics, err = new(pmetric.ProtoUnmarshaler).UnmarshalMetrics(value)
		}
		if err == nil {
			r.indexMetrics()
		}
	}
	if err != nil {
		r.Release()
		enc := "otlp_proto"
		if json {
			enc = "otlp_json"
		}
		return fmt.Errorf("not an OTLP %s record (%s): %v", r.signalName(), enc, err)
	}
	return nil
}

func (r *Rows) signalName() string {
	switch r.signal {
	case signalLogs:
		return "logs"
	case signalSpans:
		return "traces"
	}
	return "metrics"
}

// Release drops the decoded record, so an idle partition does not hold it.
func (r *Rows) Release() {
	r.logs, r.traces, r.metrics = plog.Logs{}, ptrace.Traces{}, pmetric.Metrics{}
	r.locs = r.locs[:0]
	if cap(r.locs) > maxKeptLocs {
		r.locs = nil // a huge record's index is not kept for the next
	}
}

// maxKeptLocs is the largest row index kept between records (1 MiB).
const maxKeptLocs = 1 << 16

// Len is the number of rows of the decoded record.
func (r *Rows) Len() int { return len(r.locs) }

// Fill replaces row's contents with the i-th row of the decoded record;
// row is of the schema New was given.
func (r *Rows) Fill(i int, row *schemas.Row) {
	row.Reset()
	l := r.locs[i]
	switch r.signal {
	case signalLogs:
		r.fillLog(l, row)
	case signalSpans:
		r.fillSpan(l, row)
	case signalMetrics:
		r.fillPoint(l, row)
	}
}

// Key returns the dedup key of a filled row: for a span, a hash of its
// trace and span IDs, which identify it (the OTel trace data model); for
// a data point, which carries no ID, a hash of the whole row, its
// resource, scope, metric, attributes, times and values. A data point is
// one value of one series at one time, so two rows equal in all of that
// are one point sent again (an export retried after its answer was lost);
// a point that differs in anything, even only its value, is kept. ok is
// false for a log record, whose id is its event_id column, and for a span
// without IDs (invalid in OTLP; landed, never taken for another's repeat).
func (r *Rows) Key(row *schemas.Row) (key [16]byte, ok bool) {
	switch r.signal {
	case signalSpans:
		trace, span := row.StringBytes("trace_id"), row.StringBytes("span_id")
		if len(trace) == 0 && len(span) == 0 {
			return key, false
		}
		h := sha256.New()
		h.Write(trace)
		h.Write([]byte{0}) // hex digits never contain it: the boundary is unambiguous
		h.Write(span)
		r.scratch = h.Sum(r.scratch[:0])
		copy(key[:], r.scratch)
	case signalMetrics:
		r.scratch = row.AppendJSON(r.scratch[:0])
		sum := sha256.Sum256(r.scratch)
		copy(key[:], sum[:])
	default:
		return key, false
	}
	return key, true
}
