package otel

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"millrace/schemas"
)

// columns are the column indices Fill sets, -1 where the schema has none.
type columns struct {
	// every otel-* schema
	serviceName, resourceAttributes, scopeName, scopeVersion, attributes, flags, traceID, spanID, time int
	// otel-logs
	eventID, observedTime, severityNumber, severityText, body, eventName int
	// otel-spans
	parentSpanID, traceState, name, kind, startTime, endTime, durationNS, statusCode, statusMessage, events, links int
	// otel-metrics
	description, unit, metricType, value, temporality, monotonic, count, sum, min, max, buckets, bounds, quantiles int
}

func columnsOf(s *schemas.Schema) columns {
	f := s.FieldIndex
	return columns{
		serviceName: f("service_name"), resourceAttributes: f("resource_attributes"), scopeName: f("scope_name"),
		scopeVersion: f("scope_version"), attributes: f("attributes"), flags: f("flags"), traceID: f("trace_id"),
		spanID: f("span_id"), time: f("time"),
		eventID: f("event_id"), observedTime: f("observed_time"), severityNumber: f("severity_number"),
		severityText: f("severity_text"), body: f("body"), eventName: f("event_name"),
		parentSpanID: f("parent_span_id"), traceState: f("trace_state"), name: f("name"), kind: f("kind"),
		startTime: f("start_time"), endTime: f("end_time"), durationNS: f("duration_ns"), statusCode: f("status_code"),
		statusMessage: f("status_message"), events: f("events"), links: f("links"),
		description: f("description"), unit: f("unit"), metricType: f("type"), value: f("value"),
		temporality: f("aggregation_temporality"), monotonic: f("is_monotonic"), count: f("count"), sum: f("sum"),
		min: f("min"), max: f("max"), buckets: f("bucket_counts"), bounds: f("explicit_bounds"), quantiles: f("quantiles"),
	}
}

// eventIDAttribute is the log record attribute agents/otlp sets
// (otlp.EventIDAttribute; not imported, so the schemas do not depend on
// the receiver).
const eventIDAttribute = "event_id"

func (r *Rows) indexLogs() {
	rls := r.logs.ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			for k := range sls.At(j).LogRecords().Len() {
				r.locs = append(r.locs, loc{int32(i), int32(j), int32(k), 0})
			}
		}
	}
}

func (r *Rows) indexSpans() {
	rss := r.traces.ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			for k := range sss.At(j).Spans().Len() {
				r.locs = append(r.locs, loc{int32(i), int32(j), int32(k), 0})
			}
		}
	}
}

func (r *Rows) indexMetrics() {
	rms := r.metrics.ResourceMetrics()
	for i := range rms.Len() {
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				for p := range PointCount(ms.At(k)) {
					r.locs = append(r.locs, loc{int32(i), int32(j), int32(k), int32(p)})
				}
			}
		}
	}
}

// PointCount is the number of data points of m, whatever its type (0 for
// a metric of no type): the rows it lands as, and what the audit counts.
func PointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// fillCommon sets the resource's and scope's columns.
func (r *Rows) fillCommon(row *schemas.Row, res pcommon.Resource, scope pcommon.InstrumentationScope) {
	attrs := res.Attributes()
	if v, ok := attrs.Get("service.name"); ok {
		row.SetStringAt(r.cols.serviceName, v.AsString())
	}
	r.setMap(row, r.cols.resourceAttributes, attrs, "")
	if scope.Name() != "" {
		row.SetStringAt(r.cols.scopeName, scope.Name())
	}
	if scope.Version() != "" {
		row.SetStringAt(r.cols.scopeVersion, scope.Version())
	}
}

// setMap sets the map column i to m's entries but skip, in m's order. A
// key repeated on the wire keeps its first value, as pcommon.Map.Get
// reads it: engines refuse maps with duplicate keys.
func (r *Rows) setMap(row *schemas.Row, i int, m pcommon.Map, skip string) {
	row.StartMapAt(i)
	clear(r.seen)
	for k, v := range m.All() {
		if k == skip {
			continue
		}
		if m.Len() > 1 {
			if _, dup := r.seen[k]; dup {
				continue
			}
			r.seen[k] = struct{}{}
		}
		row.AddMapEntryAt(i, k, v.AsString())
	}
}

// setTime sets the timestamp column i unless ts is 0 (unknown in OTLP).
func setTime(row *schemas.Row, i int, ts pcommon.Timestamp) {
	if ts != 0 {
		row.SetTimeAt(i, ts.AsTime())
	}
}

func (r *Rows) setTraceIDs(row *schemas.Row, trace pcommon.TraceID, span pcommon.SpanID) {
	if !trace.IsEmpty() {
		row.SetStringAt(r.cols.traceID, hex.EncodeToString(trace[:]))
	}
	if !span.IsEmpty() {
		row.SetStringAt(r.cols.spanID, hex.EncodeToString(span[:]))
	}
}

func (r *Rows) fillLog(l loc, row *schemas.Row) {
	rl := r.logs.ResourceLogs().At(int(l.resource))
	sl := rl.ScopeLogs().At(int(l.scope))
	lr := sl.LogRecords().At(int(l.item))
	r.fillCommon(row, rl.Resource(), sl.Scope())
	if v, ok := lr.Attributes().Get(eventIDAttribute); ok {
		row.SetStringAt(r.cols.eventID, v.AsString())
	}
	// The OTel log data model: use the observed time when the time is unknown.
	if lr.Timestamp() != 0 {
		setTime(row, r.cols.time, lr.Timestamp())
	} else {
		setTime(row, r.cols.time, lr.ObservedTimestamp())
	}
	setTime(row, r.cols.observedTime, lr.ObservedTimestamp())
	row.SetInt64At(r.cols.severityNumber, int64(lr.SeverityNumber()))
	if lr.SeverityText() != "" {
		row.SetStringAt(r.cols.severityText, lr.SeverityText())
	}
	if lr.Body().Type() != pcommon.ValueTypeEmpty {
		row.SetStringAt(r.cols.body, lr.Body().AsString())
	}
	if lr.EventName() != "" {
		row.SetStringAt(r.cols.eventName, lr.EventName())
	}
	r.setTraceIDs(row, lr.TraceID(), lr.SpanID())
	row.SetInt64At(r.cols.flags, int64(lr.Flags()))
	r.setMap(row, r.cols.attributes, lr.Attributes(), eventIDAttribute)
}

func (r *Rows) fillSpan(l loc, row *schemas.Row) {
	rs := r.traces.ResourceSpans().At(int(l.resource))
	ss := rs.ScopeSpans().At(int(l.scope))
	span := ss.Spans().At(int(l.item))
	r.fillCommon(row, rs.Resource(), ss.Scope())
	// Required columns: an empty ID is written as "" rather than refused.
	row.SetStringAt(r.cols.traceID, "")
	row.SetStringAt(r.cols.spanID, "")
	r.setTraceIDs(row, span.TraceID(), span.SpanID())
	if p := span.ParentSpanID(); !p.IsEmpty() {
		row.SetStringAt(r.cols.parentSpanID, hex.EncodeToString(p[:]))
	}
	if ts := span.TraceState().AsRaw(); ts != "" {
		row.SetStringAt(r.cols.traceState, ts)
	}
	row.SetStringAt(r.cols.name, span.Name())
	row.SetStringAt(r.cols.kind, spanKind(span.Kind()))
	setTime(row, r.cols.startTime, span.StartTimestamp())
	setTime(row, r.cols.endTime, span.EndTimestamp())
	if span.StartTimestamp() != 0 && span.EndTimestamp() != 0 {
		row.SetInt64At(r.cols.durationNS, int64(span.EndTimestamp())-int64(span.StartTimestamp()))
	}
	row.SetStringAt(r.cols.statusCode, statusCode(span.Status().Code()))
	if m := span.Status().Message(); m != "" {
		row.SetStringAt(r.cols.statusMessage, m)
	}
	row.SetInt64At(r.cols.flags, int64(span.Flags()))
	r.setMap(row, r.cols.attributes, span.Attributes(), "")
	if evs := span.Events(); evs.Len() > 0 {
		b := append(r.scratch[:0], '[')
		for i := range evs.Len() {
			ev := evs.At(i)
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"time":`...)
			b = appendTime(b, ev.Timestamp())
			b = append(b, `,"name":`...)
			b = schemas.AppendJSONString(b, ev.Name())
			b = append(b, `,"attributes":`...)
			b = appendAttributes(b, ev.Attributes())
			b = append(b, '}')
		}
		r.scratch = append(b, ']')
		row.SetStringAt(r.cols.events, string(r.scratch))
	}
	if links := span.Links(); links.Len() > 0 {
		b := append(r.scratch[:0], '[')
		for i := range links.Len() {
			link := links.At(i)
			if i > 0 {
				b = append(b, ',')
			}
			tid, sid := link.TraceID(), link.SpanID()
			b = append(b, `{"trace_id":"`...)
			b = hex.AppendEncode(b, tid[:])
			b = append(b, `","span_id":"`...)
			b = hex.AppendEncode(b, sid[:])
			b = append(b, `","trace_state":`...)
			b = schemas.AppendJSONString(b, link.TraceState().AsRaw())
			b = append(b, `,"attributes":`...)
			b = appendAttributes(b, link.Attributes())
			b = append(b, '}')
		}
		r.scratch = append(b, ']')
		row.SetStringAt(r.cols.links, string(r.scratch))
	}
}

func spanKind(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindInternal:
		return "internal"
	case ptrace.SpanKindServer:
		return "server"
	case ptrace.SpanKindClient:
		return "client"
	case ptrace.SpanKindProducer:
		return "producer"
	case ptrace.SpanKindConsumer:
		return "consumer"
	}
	return "unspecified"
}

func statusCode(c ptrace.StatusCode) string {
	switch c {
	case ptrace.StatusCodeOk:
		return "ok"
	case ptrace.StatusCodeError:
		return "error"
	}
	return "unset"
}

// appendTime appends ts as a JSON string in RFC 3339 UTC, or null when 0.
func appendTime(b []byte, ts pcommon.Timestamp) []byte {
	if ts == 0 {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = ts.AsTime().UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendAttributes appends m as a JSON object of strings, like the map
// columns (first value of a repeated key).
func appendAttributes(b []byte, m pcommon.Map) []byte {
	b = append(b, '{')
	seen := map[string]bool{}
	for k, v := range m.All() {
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(seen) > 1 {
			b = append(b, ',')
		}
		b = schemas.AppendJSONString(b, k)
		b = append(b, ':')
		b = schemas.AppendJSONString(b, v.AsString())
	}
	return append(b, '}')
}

// appendFloat appends x as a JSON number, or as the string "NaN", "+Inf"
// or "-Inf", which JSON cannot spell (as the metric schema's values do).
func appendFloat(b []byte, x float64) []byte {
	switch {
	case math.IsNaN(x):
		return append(b, `"NaN"`...)
	case math.IsInf(x, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(x, -1):
		return append(b, `"-Inf"`...)
	}
	return strconv.AppendFloat(b, x, 'g', -1, 64)
}

func appendUints(b []byte, s pcommon.UInt64Slice) []byte {
	b = append(b, '[')
	for i := range s.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, s.At(i), 10)
	}
	return append(b, ']')
}

func appendFloats(b []byte, s pcommon.Float64Slice) []byte {
	b = append(b, '[')
	for i := range s.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFloat(b, s.At(i))
	}
	return append(b, ']')
}

// count converts an OTLP count to the column's int64, saturating.
func count(n uint64) int64 {
	return int64(min(n, math.MaxInt64))
}

func temporality(t pmetric.AggregationTemporality) string {
	switch t {
	case pmetric.AggregationTemporalityDelta:
		return "delta"
	case pmetric.AggregationTemporalityCumulative:
		return "cumulative"
	}
	return "unspecified"
}

func (r *Rows) fillPoint(l loc, row *schemas.Row) {
	rm := r.metrics.ResourceMetrics().At(int(l.resource))
	sm := rm.ScopeMetrics().At(int(l.scope))
	m := sm.Metrics().At(int(l.item))
	p := int(l.point)
	r.fillCommon(row, rm.Resource(), sm.Scope())
	row.SetStringAt(r.cols.name, m.Name())
	if m.Description() != "" {
		row.SetStringAt(r.cols.description, m.Description())
	}
	if m.Unit() != "" {
		row.SetStringAt(r.cols.unit, m.Unit())
	}
	row.SetStringAt(r.cols.metricType, strings.ToLower(metricType(m.Type())))
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		r.fillNumber(row, m.Gauge().DataPoints().At(p))
	case pmetric.MetricTypeSum:
		r.fillNumber(row, m.Sum().DataPoints().At(p))
		row.SetStringAt(r.cols.temporality, temporality(m.Sum().AggregationTemporality()))
		row.SetBoolAt(r.cols.monotonic, m.Sum().IsMonotonic())
	case pmetric.MetricTypeHistogram:
		dp := m.Histogram().DataPoints().At(p)
		r.fillPointCommon(row, dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), uint32(dp.Flags()))
		row.SetStringAt(r.cols.temporality, temporality(m.Histogram().AggregationTemporality()))
		row.SetInt64At(r.cols.count, count(dp.Count()))
		r.setOptional(row, dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
		r.scratch = appendUints(r.scratch[:0], dp.BucketCounts())
		row.SetStringAt(r.cols.buckets, string(r.scratch))
		r.scratch = appendFloats(r.scratch[:0], dp.ExplicitBounds())
		row.SetStringAt(r.cols.bounds, string(r.scratch))
	case pmetric.MetricTypeExponentialHistogram:
		dp := m.ExponentialHistogram().DataPoints().At(p)
		r.fillPointCommon(row, dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), uint32(dp.Flags()))
		row.SetStringAt(r.cols.temporality, temporality(m.ExponentialHistogram().AggregationTemporality()))
		row.SetInt64At(r.cols.count, count(dp.Count()))
		r.setOptional(row, dp.HasSum(), dp.Sum(), dp.HasMin(), dp.Min(), dp.HasMax(), dp.Max())
		b := append(r.scratch[:0], `{"scale":`...)
		b = strconv.AppendInt(b, int64(dp.Scale()), 10)
		b = append(b, `,"zero_count":`...)
		b = strconv.AppendUint(b, dp.ZeroCount(), 10)
		for _, side := range []struct {
			name    string
			buckets pmetric.ExponentialHistogramDataPointBuckets
		}{{"positive", dp.Positive()}, {"negative", dp.Negative()}} {
			b = append(b, `,"`+side.name+`":{"offset":`...)
			b = strconv.AppendInt(b, int64(side.buckets.Offset()), 10)
			b = append(b, `,"bucket_counts":`...)
			b = appendUints(b, side.buckets.BucketCounts())
			b = append(b, '}')
		}
		r.scratch = append(b, '}')
		row.SetStringAt(r.cols.buckets, string(r.scratch))
	case pmetric.MetricTypeSummary:
		dp := m.Summary().DataPoints().At(p)
		r.fillPointCommon(row, dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), uint32(dp.Flags()))
		row.SetInt64At(r.cols.count, count(dp.Count()))
		row.SetFloat64At(r.cols.sum, dp.Sum())
		qs := dp.QuantileValues()
		b := append(r.scratch[:0], '[')
		for i := range qs.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"quantile":`...)
			b = appendFloat(b, qs.At(i).Quantile())
			b = append(b, `,"value":`...)
			b = appendFloat(b, qs.At(i).Value())
			b = append(b, '}')
		}
		r.scratch = append(b, ']')
		row.SetStringAt(r.cols.quantiles, string(r.scratch))
	}
}

// metricType is m's type as the schema's enum spells it (pdata's names,
// lower case: Gauge, Sum, Histogram, ExponentialHistogram, Summary).
func metricType(t pmetric.MetricType) string {
	if t == pmetric.MetricTypeExponentialHistogram {
		return "exponential_histogram"
	}
	return t.String()
}

func (r *Rows) fillNumber(row *schemas.Row, dp pmetric.NumberDataPoint) {
	r.fillPointCommon(row, dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), uint32(dp.Flags()))
	switch dp.ValueType() {
	case pmetric.NumberDataPointValueTypeDouble:
		row.SetFloat64At(r.cols.value, dp.DoubleValue())
	case pmetric.NumberDataPointValueTypeInt:
		row.SetFloat64At(r.cols.value, float64(dp.IntValue()))
	}
}

func (r *Rows) fillPointCommon(row *schemas.Row, attrs pcommon.Map, start, ts pcommon.Timestamp, flags uint32) {
	setTime(row, r.cols.startTime, start)
	setTime(row, r.cols.time, ts)
	row.SetInt64At(r.cols.flags, int64(flags))
	r.setMap(row, r.cols.attributes, attrs, "")
}

func (r *Rows) setOptional(row *schemas.Row, hasSum bool, sum float64, hasMin bool, lo float64, hasMax bool, hi float64) {
	if hasSum {
		row.SetFloat64At(r.cols.sum, sum)
	}
	if hasMin {
		row.SetFloat64At(r.cols.min, lo)
	}
	if hasMax {
		row.SetFloat64At(r.cols.max, hi)
	}
}
