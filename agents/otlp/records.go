package otlp

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"millrace/audit"
)

// EventIDAttribute is the log record attribute that carries the event's
// ID, as the beacon's events carry event_id: the sink deduplicates on it.
const EventIDAttribute = "event_id"

// part is one record's worth of a request: its data, key and item count,
// and for logs the audit counts its acknowledgement adds.
type part[T any] struct {
	data  T
	key   []byte
	items int
}

// signal is what the receiver needs of plog.Logs, pmetric.Metrics and
// ptrace.Traces to split them into records.
type signal[T any] struct {
	name      string // logs, metrics, traces: the metrics' signal label
	items     func(T) int
	resources func(T) int
	// resource returns a copy of data's i-th resource alone.
	resource func(data T, i int) T
	// resourceKey is the key of the i-th resource when partitioning by
	// resource attributes.
	resourceKey func(data T, i int) []byte
	marshal     func(enc string, data T) ([]byte, error)
}

var logsSignal = signal[plog.Logs]{
	name:      "logs",
	items:     plog.Logs.LogRecordCount,
	resources: func(d plog.Logs) int { return d.ResourceLogs().Len() },
	resource: func(d plog.Logs, i int) plog.Logs {
		out := plog.NewLogs()
		d.ResourceLogs().At(i).CopyTo(out.ResourceLogs().AppendEmpty())
		return out
	},
	resourceKey: func(d plog.Logs, i int) []byte { return attributesKey(d.ResourceLogs().At(i).Resource().Attributes()) },
	marshal: func(enc string, d plog.Logs) ([]byte, error) {
		if enc == EncodingJSON {
			return new(plog.JSONMarshaler).MarshalLogs(d)
		}
		return new(plog.ProtoMarshaler).MarshalLogs(d)
	},
}

var metricsSignal = signal[pmetric.Metrics]{
	name:      "metrics",
	items:     pmetric.Metrics.DataPointCount,
	resources: func(d pmetric.Metrics) int { return d.ResourceMetrics().Len() },
	resource: func(d pmetric.Metrics, i int) pmetric.Metrics {
		out := pmetric.NewMetrics()
		d.ResourceMetrics().At(i).CopyTo(out.ResourceMetrics().AppendEmpty())
		return out
	},
	resourceKey: func(d pmetric.Metrics, i int) []byte {
		return attributesKey(d.ResourceMetrics().At(i).Resource().Attributes())
	},
	marshal: func(enc string, d pmetric.Metrics) ([]byte, error) {
		if enc == EncodingJSON {
			return new(pmetric.JSONMarshaler).MarshalMetrics(d)
		}
		return new(pmetric.ProtoMarshaler).MarshalMetrics(d)
	},
}

var tracesSignal = signal[ptrace.Traces]{
	name:      "traces",
	items:     ptrace.Traces.SpanCount,
	resources: func(d ptrace.Traces) int { return d.ResourceSpans().Len() },
	resource: func(d ptrace.Traces, i int) ptrace.Traces {
		out := ptrace.NewTraces()
		d.ResourceSpans().At(i).CopyTo(out.ResourceSpans().AppendEmpty())
		return out
	},
	resourceKey: func(ptrace.Traces, int) []byte { return nil },
	marshal: func(enc string, d ptrace.Traces) ([]byte, error) {
		if enc == EncodingJSON {
			return new(ptrace.JSONMarshaler).MarshalTraces(d)
		}
		return new(ptrace.ProtoMarshaler).MarshalTraces(d)
	},
}

// attributesKey is the partition key of a resource: a hash of its
// attributes in key order, so the same resource always lands on the same
// partition whatever order its attributes came in.
func attributesKey(m pcommon.Map) []byte {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		v, _ := m.Get(k)
		// Length-prefixed, so ("a","bc") and ("ab","c") differ.
		h.Write(appendLen(nil, k))
		h.Write(appendLen(nil, v.AsString()))
	}
	return []byte(hex.EncodeToString(h.Sum(nil)[:16]))
}

func appendLen(b []byte, s string) []byte {
	n := len(s)
	return append(append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n)), s...)
}

// splitByResource returns one part per resource of data, keyed by its
// attributes when keyed is set.
func splitByResource[T any](s signal[T], data T, keyed bool) []part[T] {
	n := s.resources(data)
	parts := make([]part[T], 0, n)
	for i := range n {
		d := s.resource(data, i)
		p := part[T]{data: d, items: s.items(d)}
		if keyed {
			p.key = s.resourceKey(data, i)
		}
		parts = append(parts, p)
	}
	return parts
}

// splitTracesByID returns one part per trace ID, keyed by the ID in hex
// (the Collector's Kafka exporter's partition_traces_by_id), each with the
// resources and scopes of its spans.
func splitTracesByID(td ptrace.Traces) []part[ptrace.Traces] {
	var order []pcommon.TraceID
	byID := map[pcommon.TraceID]ptrace.Traces{}
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		for j := range rs.ScopeSpans().Len() {
			ss := rs.ScopeSpans().At(j)
			// The last resource and scope appended for each trace within
			// this scope.
			scopes := map[pcommon.TraceID]ptrace.ScopeSpans{}
			for k := range ss.Spans().Len() {
				span := ss.Spans().At(k)
				id := span.TraceID()
				out, ok := byID[id]
				if !ok {
					out = ptrace.NewTraces()
					byID[id] = out
					order = append(order, id)
				}
				dst, ok := scopes[id]
				if !ok {
					nrs := out.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(nrs.Resource())
					nrs.SetSchemaUrl(rs.SchemaUrl())
					dst = nrs.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(dst.Scope())
					dst.SetSchemaUrl(ss.SchemaUrl())
					scopes[id] = dst
				}
				span.CopyTo(dst.Spans().AppendEmpty())
			}
		}
	}
	parts := make([]part[ptrace.Traces], 0, len(order))
	for _, id := range order {
		d := byID[id]
		var key []byte
		if !id.IsEmpty() {
			key = []byte(hex.EncodeToString(id[:]))
		}
		parts = append(parts, part[ptrace.Traces]{data: d, key: key, items: d.SpanCount()})
	}
	return parts
}

// addEventIDs gives every log record without an event_id attribute a
// UUIDv7, as the beacon gives its events, so the sink's deduplication and
// the audit see OTLP logs as events.
func addEventIDs(ld plog.Logs) error {
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				attrs := lrs.At(k).Attributes()
				if _, ok := attrs.Get(EventIDAttribute); ok {
					continue
				}
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				attrs.PutStr(EventIDAttribute, id.String())
			}
		}
	}
	return nil
}

// auditKey is an audit count: the source (the resource's service.name) and
// hour of log records, spans or data points.
type auditKey struct {
	source string
	hour   int64
}

// serviceSource is the audit source of a resource's items: its
// service.name, as the sink's rows carry it in service_name.
func serviceSource(res pcommon.Resource) string {
	name := ""
	if v, ok := res.Attributes().Get("service.name"); ok {
		name = v.AsString()
	}
	return audit.MetricSource(name)
}

// hourOf is the audit hour of the first of times that is set, else of now:
// the sink files a row under its time column, and a row without one under
// its record's time, which is about now.
func hourOf(now time.Time, times ...pcommon.Timestamp) int64 {
	for _, t := range times {
		if t != 0 {
			return audit.HourOf(t.AsTime())
		}
	}
	return audit.HourOf(now)
}

// logAudit counts ld's log records by source and hour of their timestamp
// (the observed time when they have none, now when neither), as the sink's
// otel-logs rows are filed.
func logAudit(ld plog.Logs, now time.Time) map[auditKey]int64 {
	counts := map[auditKey]int64{}
	rls := ld.ResourceLogs()
	for i := range rls.Len() {
		source := serviceSource(rls.At(i).Resource())
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				lr := lrs.At(k)
				counts[auditKey{source, hourOf(now, lr.Timestamp(), lr.ObservedTimestamp())}]++
			}
		}
	}
	return counts
}

// spanAudit counts td's spans by source and hour of their start, as the
// sink's otel-spans rows are filed.
func spanAudit(td ptrace.Traces, now time.Time) map[auditKey]int64 {
	counts := map[auditKey]int64{}
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		source := serviceSource(rss.At(i).Resource())
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				counts[auditKey{source, hourOf(now, spans.At(k).StartTimestamp())}]++
			}
		}
	}
	return counts
}

// metricAudit counts md's data points by source and hour of their time, as
// the sink's otel-metrics rows (one per data point) are filed.
func metricAudit(md pmetric.Metrics, now time.Time) map[auditKey]int64 {
	counts := map[auditKey]int64{}
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		source := serviceSource(rms.At(i).Resource())
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				for _, t := range pointTimes(ms.At(k)) {
					counts[auditKey{source, hourOf(now, t)}]++
				}
			}
		}
	}
	return counts
}

// pointTimes is the time of each of m's data points, whatever its type.
func pointTimes(m pmetric.Metric) []pcommon.Timestamp {
	var times []pcommon.Timestamp
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		times = appendTimes(times, m.Gauge().DataPoints())
	case pmetric.MetricTypeSum:
		times = appendTimes(times, m.Sum().DataPoints())
	case pmetric.MetricTypeHistogram:
		times = appendTimes(times, m.Histogram().DataPoints())
	case pmetric.MetricTypeExponentialHistogram:
		times = appendTimes(times, m.ExponentialHistogram().DataPoints())
	case pmetric.MetricTypeSummary:
		times = appendTimes(times, m.Summary().DataPoints())
	}
	return times
}

// appendTimes appends the time of each point of a data point slice.
func appendTimes[P interface{ Timestamp() pcommon.Timestamp }, S interface {
	Len() int
	At(int) P
}](times []pcommon.Timestamp, points S) []pcommon.Timestamp {
	for i := range points.Len() {
		times = append(times, points.At(i).Timestamp())
	}
	return times
}
