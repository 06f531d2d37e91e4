package otlp

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"millrace/agents/ship"
	"millrace/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// fakeProducer records what it is given and acknowledges at once: with
// refuse(rec) when set, else nil.
type fakeProducer struct {
	cfg ship.Config

	mu       sync.Mutex // guards the following
	recs     []*kgo.Record
	refuse   func(*kgo.Record) error // each record's acknowledgement
	tryErr   error                   // TryProduce's answer
	buffered int64
}

func newFakeProducer() *fakeProducer {
	return &fakeProducer{cfg: ship.Config{MaxBufferedRecords: ship.DefaultMaxBufferedRecords, MaxBufferedBytes: ship.DefaultMaxBufferedBytes}}
}

func (p *fakeProducer) TryProduce(_ context.Context, rec *kgo.Record, ack ship.AckFunc) error {
	p.mu.Lock()
	if p.tryErr != nil {
		p.mu.Unlock()
		return p.tryErr
	}
	var err error
	if p.refuse != nil {
		err = p.refuse(rec)
	}
	if err == nil {
		p.recs = append(p.recs, rec)
	}
	p.mu.Unlock()
	ack(rec, err)
	return nil
}

func (p *fakeProducer) BufferedRecords() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buffered
}

func (p *fakeProducer) BufferedBytes() int64 { return 0 }
func (p *fakeProducer) Config() ship.Config  { return p.cfg }
func (p *fakeProducer) records() []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*kgo.Record(nil), p.recs...)
}
func (p *fakeProducer) set(refuse func(*kgo.Record) error, tryErr error, buffered int64) {
	p.mu.Lock()
	p.refuse, p.tryErr, p.buffered = refuse, tryErr, buffered
	p.mu.Unlock()
}

// newTestReceiver builds a receiver (not started) on a fake producer.
func newTestReceiver(t *testing.T, cfg Config) (*Receiver, *fakeProducer) {
	t.Helper()
	if cfg.HTTPAddr == "" && cfg.GRPCAddr == "" {
		cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	}
	p := newFakeProducer()
	r, err := New(cfg, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

// startReceiver builds and starts a receiver, shut down at the test's end.
func startReceiver(t *testing.T, cfg Config) (*Receiver, *fakeProducer) {
	t.Helper()
	r, p := newTestReceiver(t, cfg)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return r, p
}

// post sends body to the receiver's handler directly.
func post(r *Receiver, path, contentType, encoding string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	w := httptest.NewRecorder()
	r.HTTPHandler().ServeHTTP(w, req)
	return w
}

// testLogs has one log record per (resource, record) of n resources, each
// service "svc-i", with a timestamp an hour ago.
func testLogs(resources, records int) plog.Logs {
	ld := plog.NewLogs()
	ts := pcommon.NewTimestampFromTime(time.Now().Add(-time.Hour))
	for i := range resources {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", i))
		rl.Resource().Attributes().PutInt("pid", int64(100+i))
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("scope")
		for j := range records {
			lr := sl.LogRecords().AppendEmpty()
			lr.SetTimestamp(ts)
			lr.Body().SetStr(fmt.Sprintf("line %d of %d", j, i))
			lr.Attributes().PutStr("k", "v")
		}
	}
	return ld
}

// testTraces has the spans of traces trace IDs spread over two resources.
func testTraces(traces int) ptrace.Traces {
	td := ptrace.NewTraces()
	for i := range 2 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", i))
		ss := rs.ScopeSpans().AppendEmpty()
		for j := range traces {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{byte(j + 1)})
			sp.SetSpanID(pcommon.SpanID{byte(i + 1), byte(j + 1)})
			sp.SetName(fmt.Sprintf("span %d/%d", i, j))
		}
	}
	return td
}

// testMetrics has one gauge data point per resource.
func testMetrics(resources int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for i := range resources {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", i))
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("up")
		m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(int64(i))
	}
	return md
}

// withoutEventIDs returns a copy of ld without event_id attributes, and
// fails unless every record had one.
func withoutEventIDs(t *testing.T, ld plog.Logs) plog.Logs {
	t.Helper()
	out := plog.NewLogs()
	ld.CopyTo(out)
	rls := out.ResourceLogs()
	for i := range rls.Len() {
		sls := rls.At(i).ScopeLogs()
		for j := range sls.Len() {
			lrs := sls.At(j).LogRecords()
			for k := range lrs.Len() {
				if !lrs.At(k).Attributes().Remove(EventIDAttribute) {
					t.Fatalf("log record %d/%d/%d has no event_id", i, j, k)
				}
			}
		}
	}
	return out
}

// sameProto fails unless a and b marshal to the same bytes.
func sameProto(t *testing.T, what string, a, b []byte) {
	t.Helper()
	if !bytes.Equal(a, b) {
		t.Fatalf("%s: the record's data differs from what was sent (%d and %d bytes)", what, len(a), len(b))
	}
}
