package otlp

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// FuzzHTTP feeds the body decoder arbitrary bodies of both content types:
// it may refuse them, never panic, and what it takes must encode again.
func FuzzHTTP(f *testing.F) {
	proto, _ := new(plog.ProtoMarshaler).MarshalLogs(testLogs(1, 2))
	json, _ := new(plog.JSONMarshaler).MarshalLogs(testLogs(1, 2))
	f.Add(proto, false)
	f.Add(json, true)
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102"}]}]}]}`), true)
	f.Add([]byte(`[[[[[[[[{"a":"\"[["}]]]]]]]]`), true)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		contentType := contentProto
		if isJSON {
			contentType = contentJSON
		}
		logs := plogotlp.NewExportRequest()
		if unmarshal(logs, contentType, body) == nil {
			if err := addEventIDs(logs.Logs()); err != nil {
				t.Fatal(err)
			}
			if _, err := logs.MarshalProto(); err != nil {
				t.Fatal(err)
			}
		}
		metrics := pmetricotlp.NewExportRequest()
		if unmarshal(metrics, contentType, body) == nil {
			if _, err := metrics.MarshalJSON(); err != nil {
				t.Fatal(err)
			}
		}
		traces := ptraceotlp.NewExportRequest()
		if unmarshal(traces, contentType, body) == nil {
			splitTracesByID(traces.Traces())
		}
	})
}
