package lake

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"millrace/sinks/parquet"
	"millrace/sinks/parquet/parquettest"
)

// readAll reads every file of topic under root with xitongsys/parquet-go
// into rows of T.
func readAll[T any](t *testing.T, root, topic string) []T {
	t.Helper()
	files, err := filepath.Glob(root + "/" + topic + "/dt=*/hr=*/*.parquet")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []T
	for _, f := range files {
		rows, err := parquet.ReadRows[T](f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
	}
	return out
}

// TestOtelSpansRows: an OTLP traces record lands a row per span, with its
// IDs in hex, kind, status and times; a span sent again (same trace and
// span IDs) is dropped, the new span of the same record lands; spans
// without IDs (invalid in OTLP) land, none taken for another's repeat.
func TestOtelSpansRows(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	w, _, _ := otelWorker(t, root, "otlp_spans", "otel-spans", nil)
	spans := func(ids ...byte) []byte {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "api")
		ss := rs.ScopeSpans().AppendEmpty()
		for _, id := range ids {
			s := ss.Spans().AppendEmpty()
			if id > 0 { // 0: a span without IDs
				s.SetTraceID(pcommon.TraceID{0xab, 15: 1})
				s.SetSpanID(pcommon.SpanID{7: id})
			}
			if id > 1 {
				s.SetParentSpanID(pcommon.SpanID{7: 1})
			}
			s.SetName(fmt.Sprint("op", id))
			s.SetKind(ptrace.SpanKindServer)
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(base))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(id) * time.Millisecond)))
			s.Status().SetCode(ptrace.StatusCodeError)
			s.Events().AppendEmpty().SetName("retry")
		}
		v, err := new(ptrace.ProtoMarshaler).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	recs := []*kgo.Record{
		{Topic: "otlp_spans", Offset: 0, Value: spans(1, 2), Timestamp: base},
		{Topic: "otlp_spans", Offset: 1, Value: spans(2, 3), Timestamp: base},
		{Topic: "otlp_spans", Offset: 2, Value: spans(0, 0), Timestamp: base},
	}
	if err := feedTopic(w, "otlp_spans", recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range readAll[parquettest.OtelSpanRow](t, root, "otlp_spans") {
		parent := "-"
		if r.ParentSpanID != nil {
			parent = *r.ParentSpanID
		}
		got = append(got, fmt.Sprintf("%s %s %s %s %s %s %d %d", r.TraceID, r.SpanID, parent, r.Name, r.Kind, r.StatusCode,
			*r.StartTime-base.UnixMicro(), *r.DurationNS))
	}
	want := []string{
		"ab000000000000000000000000000001 0000000000000001 - op1 server error 0 1000000",
		"ab000000000000000000000000000001 0000000000000002 0000000000000001 op2 server error 0 2000000",
		"ab000000000000000000000000000001 0000000000000003 0000000000000001 op3 server error 0 3000000",
		"  - op0 server error 0 0",
		"  - op0 server error 0 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("spans:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOtelMetricsRows: an OTLP metrics record lands a row per data point
// of every type, with its value, or count, sum and buckets as JSON; the
// same record sent again is dropped point by point (a data point has no
// ID: its content is its identity), and a point that differs only in its
// value lands.
func TestOtelMetricsRows(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	w, _, _ := otelWorker(t, root, "otlp_metrics", "otel-metrics", nil)
	metrics := func(gauge int64) []byte {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "db")
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		now := pcommon.NewTimestampFromTime(base.Add(time.Minute))
		start := pcommon.NewTimestampFromTime(base)
		g := ms.AppendEmpty()
		g.SetName("queue.depth")
		g.SetUnit("1")
		gdps := g.SetEmptyGauge().DataPoints()
		for i := range 2 {
			dp := gdps.AppendEmpty()
			dp.SetTimestamp(now)
			dp.SetIntValue(gauge + int64(i))
			dp.Attributes().PutStr("queue", fmt.Sprint("q", i))
		}
		s := ms.AppendEmpty()
		s.SetName("requests")
		sum := s.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sdp := sum.DataPoints().AppendEmpty()
		sdp.SetStartTimestamp(start)
		sdp.SetTimestamp(now)
		sdp.SetDoubleValue(12.5)
		h := ms.AppendEmpty()
		h.SetName("latency")
		hdp := h.SetEmptyHistogram().DataPoints().AppendEmpty()
		hdp.SetTimestamp(now)
		hdp.SetCount(6)
		hdp.SetSum(0.75)
		hdp.BucketCounts().FromRaw([]uint64{1, 2, 3})
		hdp.ExplicitBounds().FromRaw([]float64{0.1, 0.5})
		e := ms.AppendEmpty()
		e.SetName("size")
		edp := e.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
		edp.SetTimestamp(now)
		edp.SetCount(3)
		edp.SetScale(2)
		edp.Positive().SetOffset(1)
		edp.Positive().BucketCounts().FromRaw([]uint64{3})
		q := ms.AppendEmpty()
		q.SetName("rtt")
		qdp := q.SetEmptySummary().DataPoints().AppendEmpty()
		qdp.SetTimestamp(now)
		qdp.SetCount(4)
		qdp.SetSum(8)
		qv := qdp.QuantileValues().AppendEmpty()
		qv.SetQuantile(0.99)
		qv.SetValue(3)
		v, err := new(pmetric.ProtoMarshaler).MarshalMetrics(md)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	recs := []*kgo.Record{
		{Topic: "otlp_metrics", Offset: 0, Value: metrics(5), Timestamp: base},
		{Topic: "otlp_metrics", Offset: 1, Value: metrics(5), Timestamp: base},
		{Topic: "otlp_metrics", Offset: 2, Value: metrics(6), Timestamp: base},
	}
	if err := feedTopic(w, "otlp_metrics", recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	str := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	num := func(f *float64) string {
		if f == nil {
			return "-"
		}
		return fmt.Sprint(*f)
	}
	var got []string
	for _, r := range readAll[parquettest.OtelMetricRow](t, root, "otlp_metrics") {
		got = append(got, fmt.Sprintf("%s %s value=%s sum=%s temporality=%s buckets=%s bounds=%s quantiles=%s",
			r.Name, r.Type, num(r.Value), num(r.Sum), str(r.Temporality), str(r.BucketCounts), str(r.ExplicitBounds), str(r.Quantiles)))
	}
	want := []string{
		"queue.depth gauge value=5 sum=- temporality=- buckets=- bounds=- quantiles=-",
		"queue.depth gauge value=6 sum=- temporality=- buckets=- bounds=- quantiles=-",
		"requests sum value=12.5 sum=- temporality=cumulative buckets=- bounds=- quantiles=-",
		"latency histogram value=- sum=0.75 temporality=unspecified buckets=[1,2,3] bounds=[0.1,0.5] quantiles=-",
		`size exponential_histogram value=- sum=- temporality=unspecified buckets={"scale":2,"zero_count":0,"positive":{"offset":1,"bucket_counts":[3]},"negative":{"offset":0,"bucket_counts":[]}} bounds=- quantiles=-`,
		`rtt summary value=- sum=8 temporality=- buckets=- bounds=- quantiles=[{"quantile":0.99,"value":3}]`,
		// Offset 1 repeats offset 0: dropped. Offset 2's gauge points differ in value: they land.
		"queue.depth gauge value=6 sum=- temporality=- buckets=- bounds=- quantiles=-",
		"queue.depth gauge value=7 sum=- temporality=- buckets=- bounds=- quantiles=-",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("points:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
