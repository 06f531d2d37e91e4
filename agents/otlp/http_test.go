package otlp

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

// TestHTTPLogsRoundTrip: a protobuf logs request is one record on
// otlp_logs, no key, whose data is what was sent plus an event_id on every
// log record; an event_id the client set is kept.
func TestHTTPLogsRoundTrip(t *testing.T) {
	t.Parallel()
	r, p := newTestReceiver(t, Config{})
	ld := testLogs(2, 3)
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutStr(EventIDAttribute, "client-id")
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	w := post(r, "/v1/logs", contentProto, "", body)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != contentProto {
		t.Fatalf("status %d %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	resp := plogotlp.NewExportResponse()
	if err := resp.UnmarshalProto(w.Body.Bytes()); err != nil || resp.PartialSuccess().RejectedLogRecords() != 0 {
		t.Fatalf("response %v, rejected %d", err, resp.PartialSuccess().RejectedLogRecords())
	}
	recs := p.records()
	if len(recs) != 1 || recs[0].Topic != DefaultLogsTopic || recs[0].Key != nil {
		t.Fatalf("records %+v", recs)
	}
	got, err := new(plog.ProtoUnmarshaler).UnmarshalLogs(recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := got.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().Get(EventIDAttribute); v.Str() != "client-id" {
		t.Fatalf("the client's event_id became %q", v.Str())
	}
	id, _ := got.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords().At(2).Attributes().Get(EventIDAttribute)
	if len(id.Str()) != 36 || id.Str()[14] != '7' {
		t.Fatalf("event_id %q is no UUIDv7", id.Str())
	}
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().Remove(EventIDAttribute)
	want, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	have, _ := new(plog.ProtoMarshaler).MarshalLogs(withoutEventIDs(t, got))
	sameProto(t, "logs", have, want)
}

// TestHTTPJSON: a JSON request is answered in JSON, and otlp_json records
// hold the OTLP JSON of the data.
func TestHTTPJSON(t *testing.T) {
	t.Parallel()
	r, p := newTestReceiver(t, Config{Encoding: EncodingJSON})
	td := testTraces(2)
	body, _ := new(ptrace.JSONMarshaler).MarshalTraces(td)
	w := post(r, "/v1/traces", contentJSON, "", body)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != contentJSON {
		t.Fatalf("status %d %q: %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	if err := ptraceotlp.NewExportResponse().UnmarshalJSON(w.Body.Bytes()); err != nil {
		t.Fatalf("response %q: %v", w.Body, err)
	}
	recs := p.records()
	if len(recs) != 1 || recs[0].Topic != DefaultTracesTopic {
		t.Fatalf("records %+v", recs)
	}
	got, err := new(ptrace.JSONUnmarshaler).UnmarshalTraces(recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := new(ptrace.ProtoMarshaler).MarshalTraces(td)
	have, _ := new(ptrace.ProtoMarshaler).MarshalTraces(got)
	sameProto(t, "traces", have, want)
}

// TestPartitionTracesByID: partition_traces_by_id writes one record per
// trace, keyed by the trace ID in hex, holding that trace's spans of every
// resource.
func TestPartitionTracesByID(t *testing.T) {
	t.Parallel()
	r, p := newTestReceiver(t, Config{PartitionTracesByID: true})
	body, _ := new(ptrace.ProtoMarshaler).MarshalTraces(testTraces(3))
	if w := post(r, "/v1/traces", contentProto, "", body); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	recs := p.records()
	if len(recs) != 3 {
		t.Fatalf("%d records, want one per trace", len(recs))
	}
	for i, rec := range recs {
		td, err := new(ptrace.ProtoUnmarshaler).UnmarshalTraces(rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		id := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID()
		if td.ResourceSpans().Len() != 2 || td.SpanCount() != 2 || string(rec.Key) != id.String() || id[0] != byte(i+1) {
			t.Fatalf("record %d: key %q, %d resources, %d spans, trace %s", i, rec.Key, td.ResourceSpans().Len(), td.SpanCount(), id)
		}
	}
}

// TestPartitionByResource: partitioning logs and metrics by resource
// attributes writes one record per resource, the same resource always
// under the same key.
func TestPartitionByResource(t *testing.T) {
	t.Parallel()
	r, p := newTestReceiver(t, Config{PartitionLogsByResourceAttributes: true, PartitionMetricsByResourceAttributes: true})
	logs, _ := new(plog.ProtoMarshaler).MarshalLogs(testLogs(2, 1))
	metrics, _ := new(pmetric.ProtoMarshaler).MarshalMetrics(testMetrics(2))
	for _, c := range []struct{ path, body string }{{"/v1/logs", string(logs)}, {"/v1/logs", string(logs)}, {"/v1/metrics", string(metrics)}} {
		if w := post(r, c.path, contentProto, "", []byte(c.body)); w.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.path, w.Code, w.Body)
		}
	}
	recs := p.records()
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6 (one per resource)", len(recs))
	}
	if string(recs[0].Key) != string(recs[2].Key) || string(recs[0].Key) == string(recs[1].Key) || len(recs[0].Key) == 0 {
		t.Fatalf("keys %q %q %q", recs[0].Key, recs[1].Key, recs[2].Key)
	}
	if recs[4].Topic != DefaultMetricsTopic || len(recs[4].Key) == 0 {
		t.Fatalf("metrics record %+v", recs[4])
	}
}

// TestPartialSuccess: records the broker refuses for good, and resources
// too large for a record, are counted as rejected in a 200 answer; the
// rest is produced.
func TestPartialSuccess(t *testing.T) {
	t.Parallel()
	r, p := newTestReceiver(t, Config{PartitionLogsByResourceAttributes: true})
	ld := testLogs(3, 2)
	firstKey := string(attributesKey(ld.ResourceLogs().At(0).Resource().Attributes()))
	p.set(func(rec *kgo.Record) error {
		if string(rec.Key) == firstKey {
			return kerr.InvalidRecord
		}
		return nil
	}, nil, 0)
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	w := post(r, "/v1/logs", contentProto, "", body)
	resp := plogotlp.NewExportResponse()
	if w.Code != http.StatusOK || resp.UnmarshalProto(w.Body.Bytes()) != nil {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if resp.PartialSuccess().RejectedLogRecords() != 2 || !strings.Contains(resp.PartialSuccess().ErrorMessage(), "INVALID_RECORD") {
		t.Fatalf("partial success %d %q", resp.PartialSuccess().RejectedLogRecords(), resp.PartialSuccess().ErrorMessage())
	}
	if n := len(p.records()); n != 2 {
		t.Fatalf("%d records produced, want 2", n)
	}
}

// TestOversizedRecordsSplitAndRefused: a request larger than a record may
// be is split per resource; a resource larger alone is refused.
func TestOversizedRecordsSplitAndRefused(t *testing.T) {
	t.Parallel()
	r, p := newTestReceiver(t, Config{MaxRecordBytes: 600})
	ld := testLogs(3, 2)
	big := ld.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords().At(0)
	big.Body().SetStr(strings.Repeat("x", 1000))
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	w := post(r, "/v1/logs", contentProto, "", body)
	resp := plogotlp.NewExportResponse()
	if w.Code != http.StatusOK || resp.UnmarshalProto(w.Body.Bytes()) != nil {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if resp.PartialSuccess().RejectedLogRecords() != 2 || !strings.Contains(resp.PartialSuccess().ErrorMessage(), "more than the 600") {
		t.Fatalf("partial success %d %q", resp.PartialSuccess().RejectedLogRecords(), resp.PartialSuccess().ErrorMessage())
	}
	recs := p.records()
	if len(recs) != 2 {
		t.Fatalf("%d records, want the 2 small resources", len(recs))
	}
	for _, rec := range recs {
		if len(rec.Value) > 600 {
			t.Fatalf("a record of %d bytes", len(rec.Value))
		}
	}
}

// TestBackpressureAnswers: a backed-up producer is 429 and an
// unacknowledged request 503, both with Retry-After (OTLP clients retry
// them), and nothing is produced.
func TestBackpressureAnswers(t *testing.T) {
	t.Parallel()
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(testLogs(1, 1))
	for _, c := range []struct {
		name     string
		refuse   func(*kgo.Record) error
		tryErr   error
		buffered int64
		want     int
	}{
		{"buffer full now", nil, nil, ship.DefaultMaxBufferedRecords, http.StatusTooManyRequests},
		{"TryProduce refuses", nil, ship.ErrBufferFull, 0, http.StatusTooManyRequests},
		{"delivery timed out", func(*kgo.Record) error { return kgo.ErrRecordTimeout }, nil, 0, http.StatusServiceUnavailable},
		{"shipper closed", nil, ship.ErrClosed, 0, http.StatusServiceUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, p := newTestReceiver(t, Config{})
			p.set(c.refuse, c.tryErr, c.buffered)
			w := post(r, "/v1/logs", contentProto, "", body)
			if w.Code != c.want || w.Header().Get("Retry-After") != "5" {
				t.Fatalf("status %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
			}
			if len(p.records()) != 0 {
				t.Fatal("records produced")
			}
		})
	}
}

// TestRefusedRequests: the answers to requests that are no OTLP export.
func TestRefusedRequests(t *testing.T) {
	t.Parallel()
	r, _ := newTestReceiver(t, Config{MaxBodyBytes: 1 << 10, MaxDecodedBytes: 1 << 20})
	ok, _ := new(plog.ProtoMarshaler).MarshalLogs(testLogs(1, 1))
	for _, c := range []struct {
		name, contentType, encoding string
		body                        []byte
		want                        int
	}{
		{"wrong content type", "text/plain", "", ok, http.StatusUnsupportedMediaType},
		{"unknown encoding", contentProto, "br", ok, http.StatusUnsupportedMediaType},
		{"malformed protobuf", contentProto, "", []byte{0x0a, 0xff}, http.StatusBadRequest},
		{"malformed JSON", contentJSON, "", []byte(`{"resourceLogs":[`), http.StatusBadRequest},
		{"not gzip", contentProto, "gzip", ok, http.StatusBadRequest},
		{"body too large", contentProto, "", make([]byte, 2<<10), http.StatusRequestEntityTooLarge},
	} {
		if w := post(r, "/v1/logs", c.contentType, c.encoding, c.body); w.Code != c.want {
			t.Errorf("%s: status %d, want %d: %s", c.name, w.Code, c.want, w.Body)
		}
	}
	w := post(r, "/v1/logs", contentProto, "gzip", gzipped(t, ok))
	if w.Code != http.StatusOK {
		t.Fatalf("gzip: status %d: %s", w.Code, w.Body)
	}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGzipBomb: a small body that gunzips to far more than
// max_decoded_bytes is refused 413 after reading about the limit, not the
// whole. Not parallel: it measures the allocations.
func TestGzipBomb(t *testing.T) {
	r, _ := newTestReceiver(t, Config{MaxBodyBytes: 1 << 20, MaxDecodedBytes: 1 << 20})
	bomb := gzipped(t, make([]byte, 64<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := post(r, "/v1/logs", contentProto, "gzip", bomb)
	runtime.ReadMemStats(&after)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	t.Logf("the bomb allocated %d bytes", after.TotalAlloc-before.TotalAlloc)
	// A few times the limit (the buffer's doublings, the race detector's
	// own), far from the 64 MiB the bomb holds.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("the bomb allocated %d bytes; the limit is 1 MiB", alloc)
	}
}

// TestDeepNesting: AnyValue kvlists nested 10,000 deep are refused 400 in
// protobuf (pdata stops at 100 levels) and in JSON (the depth check), and
// moderate nesting passes.
func TestDeepNesting(t *testing.T) {
	t.Parallel()
	r, _ := newTestReceiver(t, Config{})
	for _, depth := range []int{10, 10_000} {
		ld := testLogs(1, 1)
		v := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body()
		for range depth {
			v = v.SetEmptyMap().PutEmpty("k")
		}
		v.SetStr("leaf")
		want := http.StatusOK
		if depth > 100 {
			want = http.StatusBadRequest
		}
		// pdata's marshalers recurse without a limit; 10,000 deep is fine
		// on a goroutine stack.
		proto, err := new(plog.ProtoMarshaler).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		json, err := new(plog.JSONMarshaler).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		if w := post(r, "/v1/logs", contentProto, "", proto); w.Code != want {
			t.Errorf("protobuf %d deep: status %d: %s", depth, w.Code, w.Body)
		}
		if w := post(r, "/v1/logs", contentJSON, "", json); w.Code != want {
			t.Errorf("JSON %d deep: status %d: %s", depth, w.Code, w.Body)
		}
	}
}

// TestConfigValidate: impossible configurations are refused with a
// sentence naming the field.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "neither http_addr nor grpc_addr"},
		{Config{HTTPAddr: ":0", Encoding: "avro"}, `encoding "avro"`},
		{Config{HTTPAddr: ":0", MaxInFlight: -1}, "max_in_flight is -1"},
		{Config{HTTPAddr: ":0", MaxBodyBytes: 2 << 20, MaxDecodedBytes: 1 << 20}, "max_body_bytes (2097152) is more than max_decoded_bytes"},
	} {
		err := c.cfg.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{GRPCAddr: ":0"}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{HTTPAddr: ":0"}, nil, nil, nil); err == nil {
		t.Fatal("a nil producer was taken")
	}
}

// slowPost starts an export whose body arrives through the returned pipe
// writer; the answer's status comes on the channel once the body is
// closed.
func slowPost(r *Receiver, path string) (*io.PipeWriter, <-chan int) {
	pr, pw := io.Pipe()
	req := httptest.NewRequest(http.MethodPost, path, pr)
	req.Header.Set("Content-Type", contentProto)
	done := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		r.HTTPHandler().ServeHTTP(w, req)
		done <- w.Code
	}()
	return pw, done
}

// TestSlowSenderHoldsNoSlot: a body still arriving holds none of the
// MaxInFlight slots, so with one slot another export is answered while a
// slow sender trickles; bodies being read are bounded by the reading
// budget (twice MaxInFlight bodies of MaxBodyBytes), and past it a request
// is answered 503 with Retry-After.
func TestSlowSenderHoldsNoSlot(t *testing.T) {
	t.Parallel()
	r, _ := newTestReceiver(t, Config{MaxInFlight: 1, MaxBodyBytes: 1000})
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(testLogs(1, 1))
	slow, slowDone := slowPost(r, "/v1/logs")
	if _, err := slow.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	if w := post(r, "/v1/logs", contentProto, "", body); w.Code != http.StatusOK {
		t.Fatalf("an export beside a slow sender: status %d: %s", w.Code, w.Body)
	}

	// The slow body and two others fill the budget (2,000 bytes).
	var fillers []*io.PipeWriter
	var fillersDone []<-chan int
	for _, n := range []int{1000, 1000 - len(body)/2} {
		filler, done := slowPost(r, "/v1/logs")
		if _, err := filler.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		fillers, fillersDone = append(fillers, filler), append(fillersDone, done)
	}
	waitfor.Until(t, 5*time.Second, "the budget to fill", func() bool { return r.reading.used.Load() == 2000 })
	w := post(r, "/v1/logs", contentProto, "", body)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a body past the reading budget: status %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	for i, f := range fillers {
		f.CloseWithError(errors.New("sender gone"))
		if code := <-fillersDone[i]; code != http.StatusBadRequest {
			t.Errorf("a body cut off: status %d, want 400", code)
		}
	}
	if _, err := slow.Write(body[len(body)/2:]); err != nil {
		t.Fatal(err)
	}
	slow.Close()
	if code := <-slowDone; code != http.StatusOK {
		t.Errorf("the slow export, once whole: status %d", code)
	}
	if used := r.reading.used.Load(); used != 0 {
		t.Errorf("%d bytes of the reading budget still held after every request ended", used)
	}
}
