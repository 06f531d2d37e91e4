package otlp

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"millrace/agents/beacon"
	"millrace/agents/ship"
)

// discardProducer acknowledges every record at once and keeps none: the
// benchmarks measure the receivers, not a broker.
type discardProducer struct{}

func (discardProducer) TryProduce(_ context.Context, rec *kgo.Record, ack ship.AckFunc) error {
	ack(rec, nil)
	return nil
}
func (discardProducer) BufferedRecords() int64                    { return 0 }
func (discardProducer) BufferedBytes() int64                      { return 0 }
func (discardProducer) ReadyFor(context.Context, ...string) error { return nil }
func (discardProducer) Config() ship.Config {
	return ship.Config{MaxBufferedRecords: ship.DefaultMaxBufferedRecords, MaxBufferedBytes: ship.DefaultMaxBufferedBytes}
}

// benchLogs is an export of n log records carrying what the beacon
// benchmark's click event carries: a body, the click's fields as
// attributes, a timestamp, and the service as the resource.
func benchLogs(n int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "shop")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("shop/web")
	ts := pcommon.NewTimestampFromTime(time.UnixMilli(1714557600000))
	for range n {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(ts)
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.Body().SetStr("click")
		a := lr.Attributes()
		a.PutStr("url", "https://shop.example.com/p/42")
		a.PutStr("referrer", "https://search.example.org/?q=x")
		a.PutStr("title", "Product 42")
		a.PutStr("anonymous_id", "0190f3c2-7b1e-7abc-8def-0123456789ab")
		a.PutStr("session_id", "s-1")
		a.PutStr("button", "buy")
		a.PutDouble("price", 9.99)
	}
	return ld
}

// serveOnce runs one request through h and fails unless it is answered
// 200.
func serveOnce(b *testing.B, h http.Handler, path, contentType string, body []byte) {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("%s: status %d: %s", path, w.Code, w.Body)
	}
}

// BenchmarkLogsVsBeacon measures one core's worth of ingest: an OTLP/HTTP
// export of log records (protobuf and JSON) against a beacon POST of as
// many click events, each through its handler on one goroutine (no
// network) to a producer that acknowledges at once. It reports records/s,
// which on one goroutine is per core.
func BenchmarkLogsVsBeacon(b *testing.B) {
	for _, batch := range []int{1, 20, 100} {
		ld := benchLogs(batch)
		proto, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		json, err := plogotlp.NewExportRequestFromLogs(ld).MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		r, err := New(Config{HTTPAddr: "127.0.0.1:0"}, discardProducer{}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		bs, err := beacon.New(beacon.Config{RateLimit: -1}, discardProducer{}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		event := `{"type":"click","url":"https://shop.example.com/p/42","referrer":"https://search.example.org/?q=x",` +
			`"title":"Product 42","anonymous_id":"0190f3c2-7b1e-7abc-8def-0123456789ab","session_id":"s-1",` +
			`"ts":1714557600000,"properties":{"button":"buy","price":9.99}}`
		clicks := []byte("[" + strings.TrimSuffix(strings.Repeat(event+",", batch), ",") + "]")
		for _, c := range []struct {
			name, path, contentType string
			handler                 http.Handler
			body                    []byte
		}{
			{"otlp-proto", "/v1/logs", contentProto, r.HTTPHandler(), proto},
			{"otlp-json", "/v1/logs", contentJSON, r.HTTPHandler(), json},
			{"beacon", "/v1/events", "application/json", bs.Handler(), clicks},
		} {
			b.Run(c.name+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
				b.SetBytes(int64(len(c.body)))
				b.ReportAllocs()
				for b.Loop() {
					serveOnce(b, c.handler, c.path, c.contentType, c.body)
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkInFlightMemory measures the heap a log export holds while it
// waits for the broker: 64 requests are decoded and produced to a producer
// that holds their acknowledgements, and the live heap they add (after a
// collection) is divided among them. It reports bytes per in-flight
// request, beside the request's body size.
func BenchmarkInFlightMemory(b *testing.B) {
	const inFlight = 64
	for _, batch := range []int{20, 100, 1000} {
		body, err := plogotlp.NewExportRequestFromLogs(benchLogs(batch)).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			var perRequest float64
			for b.Loop() {
				p := &heldProducer{fakeProducer: newFakeProducer()}
				r, err := New(Config{HTTPAddr: "127.0.0.1:0", MaxInFlight: inFlight, AckTimeout: time.Minute}, p, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				var before, held runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var wg sync.WaitGroup
				codes := make([]int, inFlight)
				for i := range inFlight {
					wg.Go(func() { codes[i] = post(r, "/v1/logs", contentProto, "", body).Code })
				}
				for p.held() < inFlight {
					runtime.Gosched()
				}
				runtime.GC()
				runtime.ReadMemStats(&held)
				p.release()
				wg.Wait()
				for _, code := range codes {
					if code != http.StatusOK {
						b.Fatalf("status %d", code)
					}
				}
				perRequest += float64(held.HeapAlloc-before.HeapAlloc) / inFlight
			}
			b.ReportMetric(perRequest/float64(b.N), "B/in-flight-request")
			b.ReportMetric(float64(len(body)), "body-B")
		})
	}
}
