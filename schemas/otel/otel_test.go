package otel

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"millrace/schemas"
)

// TestIsJSON: the encoding is told by the first byte that is not JSON
// whitespace (RFC 8259 §2: space, tab, line feed, carriage return).
func TestIsJSON(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]bool{
		`{"resourceLogs":[]}`: true,
		" \t\r\n{}":           true,
		"\x0a\x02\x0a\x00":    false, // field 1, length-delimited: protobuf
		"":                    false,
		"[]":                  false,
	} {
		if got := isJSON([]byte(value)); got != want {
			t.Errorf("isJSON(%q) = %v, want %v", value, got, want)
		}
	}
}

// TestRowsPerItem: one row per log record, span and data point, over
// several resources and scopes, in order; a metric of no type has none.
func TestRowsPerItem(t *testing.T) {
	t.Parallel()
	ld := plog.NewLogs()
	for r := range 2 {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", []string{"a", "b"}[r])
		for range 2 {
			sl := rl.ScopeLogs().AppendEmpty()
			for range 3 {
				sl.LogRecords().AppendEmpty().Body().SetStr("x")
			}
		}
	}
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("s")
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	ms.AppendEmpty().SetName("empty")
	g := ms.AppendEmpty().SetEmptyGauge().DataPoints()
	g.AppendEmpty().SetDoubleValue(1)
	g.AppendEmpty().SetDoubleValue(2)
	logs, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	traces, _ := new(ptrace.JSONMarshaler).MarshalTraces(td)
	metrics, _ := new(pmetric.ProtoMarshaler).MarshalMetrics(md)
	for _, c := range []struct {
		schema *schemas.Schema
		value  []byte
		rows   int
	}{{schemas.OtelLogs, logs, 12}, {schemas.OtelSpans, traces, 1}, {schemas.OtelMetrics, metrics, 2}} {
		rs, err := New(c.schema)
		if err != nil {
			t.Fatal(err)
		}
		if err := rs.Decode(c.value); err != nil {
			t.Fatalf("%s: %v", c.schema.Name, err)
		}
		if rs.Len() != c.rows {
			t.Errorf("%s: %d rows, want %d", c.schema.Name, rs.Len(), c.rows)
		}
		row := c.schema.NewRow()
		for i := range rs.Len() {
			rs.Fill(i, row)
		}
		if c.schema == schemas.OtelLogs && row.Get("service_name") != "b" {
			t.Errorf("the last log row's service is %v, want b", row.Get("service_name"))
		}
	}
	if err := (&Rows{signal: signalLogs}).Decode(make([]byte, MaxRecordBytes+1)); err == nil {
		t.Error("Decode read a value larger than MaxRecordBytes")
	}
	if _, err := New(schemas.Click); err == nil {
		t.Error("New accepted the click schema")
	}
}

// TestRepeatedAttributeKey: a key repeated on the wire keeps its first
// value in the map column, as pcommon.Map.Get reads it, so engines that
// refuse duplicate map keys read the row.
func TestRepeatedAttributeKey(t *testing.T) {
	t.Parallel()
	// pdata cannot build such a map, so it is encoded by hand (OTLP's
	// logs.proto): LogsData.resource_logs = 1, ResourceLogs.scope_logs =
	// 2, ScopeLogs.log_records = 2, LogRecord.attributes = 6, KeyValue
	// key = 1 and value = 2, AnyValue.string_value = 1.
	message := func(field protowire.Number, parts ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, field, protowire.BytesType), bytes.Join(parts, nil))
	}
	attribute := func(k, v string) []byte {
		return message(6, message(1, []byte(k)), message(2, message(1, []byte(v))))
	}
	value := message(1, message(2, message(2, attribute("k", "first"), attribute("k", "second"), attribute("n", "1"))))
	rs, _ := New(schemas.OtelLogs)
	row := schemas.OtelLogs.NewRow()
	if err := rs.Decode(value); err != nil {
		t.Fatal(err)
	}
	rs.Fill(0, row)
	if got := fmt.Sprint(row.Get("attributes")); got != "map[k:first n:1]" {
		t.Errorf("attributes %s, want map[k:first n:1]", got)
	}
	var b []byte
	r := rs.logs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	if got := string(appendAttributes(b, r.Attributes())); got != `{"k":"first","n":"1"}` {
		t.Errorf("appendAttributes = %s", got)
	}
}

// FuzzDecode: no record value makes decoding or building the rows
// panic, whatever the schema.
func FuzzDecode(f *testing.F) {
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetEmptyMap().PutStr("a", "b")
	lr.Attributes().PutEmptySlice("s").AppendEmpty().SetInt(1)
	proto, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	json, _ := new(plog.JSONMarshaler).MarshalLogs(ld)
	f.Add(proto)
	f.Add(json)
	f.Add([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"h","histogram":{"dataPoints":[{"bucketCounts":["1"]}]}}]}]}]}`))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00","events":[{}],"links":[{}]}]}]}]}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		for _, s := range []*schemas.Schema{schemas.OtelLogs, schemas.OtelSpans, schemas.OtelMetrics} {
			rs, _ := New(s)
			if rs.Decode(value) != nil {
				continue
			}
			row := s.NewRow()
			for i := range rs.Len() {
				rs.Fill(i, row)
				_, _ = rs.Key(row)
			}
		}
	})
}
