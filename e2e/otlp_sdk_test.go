package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"millrace/internal/waitfor"
)

// sdkSenders are an OTel Go SDK logger provider exporting over OTLP/HTTP
// and a tracer provider exporting over OTLP/gRPC, both gzip-compressed,
// batching a few records at a time and retrying retryable answers for up
// to two minutes (the SDKs' own retry, quicker than its defaults).
type sdkSenders struct {
	logs   *sdklog.LoggerProvider
	traces *sdktrace.TracerProvider
	once   sync.Once // guards the shutdown
}

func newSDKSenders(t *testing.T, p *otlpProc, service string) *sdkSenders {
	t.Helper()
	ctx := context.Background()
	res := resource.NewSchemaless(attribute.String("service.name", service))
	logExp, err := otlploghttp.New(ctx, otlploghttp.WithEndpoint(p.httpAddr), otlploghttp.WithInsecure(),
		otlploghttp.WithCompression(otlploghttp.GzipCompression), otlploghttp.WithTimeout(2*time.Minute),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 2 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	traceExp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(p.grpcAddr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithCompressor("gzip"), otlptracegrpc.WithTimeout(2*time.Minute),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 2 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	s := &sdkSenders{
		logs: sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(sdklog.NewBatchProcessor(logExp,
			sdklog.WithExportInterval(50*time.Millisecond), sdklog.WithExportMaxBatchSize(10), sdklog.WithExportTimeout(2*time.Minute)))),
		traces: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(traceExp,
			sdktrace.WithBatchTimeout(50*time.Millisecond), sdktrace.WithMaxExportBatchSize(10), sdktrace.WithExportTimeout(2*time.Minute))),
	}
	t.Cleanup(func() { s.shutdown(t) })
	return s
}

// emit sends log records "<prefix>-from" to "<prefix>-to-1", each with
// the event_id of ids when given, and as many spans named alike; it
// returns the spans' IDs.
func (s *sdkSenders) emit(prefix string, from, to int, ids []string) []string {
	ctx := context.Background()
	logger := s.logs.Logger("e2e")
	tracer := s.traces.Tracer("e2e")
	var spanIDs []string
	for i := from; i < to; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		var rec otellog.Record
		rec.SetTimestamp(time.Now())
		rec.SetBody(attribute.StringValue(name))
		if ids != nil {
			rec.AddAttributes(attribute.String("event_id", ids[i]))
		}
		logger.Emit(ctx, rec)
		_, span := tracer.Start(ctx, name, trace.WithAttributes(attribute.Int("i", i)))
		spanIDs = append(spanIDs, span.SpanContext().SpanID().String())
		span.End()
	}
	return spanIDs
}

// shutdown flushes both providers, once: it returns when every batch was
// exported or its retries gave up.
func (s *sdkSenders) shutdown(t *testing.T) {
	t.Helper()
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := s.logs.Shutdown(ctx); err != nil {
			t.Errorf("log provider shutdown: %v", err)
		}
		if err := s.traces.Shutdown(ctx); err != nil {
			t.Errorf("tracer provider shutdown: %v", err)
		}
	})
}

// TestOTLPSDKExporters: the OTel Go SDK's OTLP/HTTP log exporter and
// OTLP/gRPC trace exporter, gzip-compressed, send to `millrace otlp`;
// every log record and span lands once, decodes with pdata, keeps its
// body or name and service.name, and the log records get event_ids.
func TestOTLPSDKExporters(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	for _, topic := range []string{otlpLogsTopic, otlpMetricsTopic, otlpSpansTopic} {
		b.createTopic(t, topic, 1, nil)
	}
	p := startOTLP(t, b, "ship: {linger: 1ms}\n")
	const n = 30
	s := newSDKSenders(t, p, "sdk-shop")
	s.emit("sdk", 0, n, nil)
	s.shutdown(t)

	topics := readOTLPTopics(t, b)
	topics.waitFor(30*time.Second, "every log record and span", func() bool {
		return topics.logs["sdk-shop"] == n && topics.spans["sdk-shop"] == n
	})
	for i := range n {
		name := fmt.Sprintf("sdk-%d", i)
		if topics.bodies[name] != 1 || topics.names[name] != 1 {
			t.Errorf("%s: %d log records and %d spans, want one of each", name, topics.bodies[name], topics.names[name])
		}
	}
	if topics.noID > 0 || len(topics.ids) != n {
		t.Errorf("%d log records without an event_id and %d distinct ones; want 0 and %d", topics.noID, len(topics.ids), n)
	}
	if got := p.requests(t, "logs", "http", "200") + p.requests(t, "traces", "grpc", "OK"); got == 0 {
		t.Error("the receiver counted no successful export")
	}
}

// TestOTLPBrokerKilled: the broker is SIGKILLed between two halves of an
// SDK's stream of log records (OTLP/HTTP) and spans (OTLP/gRPC); while it
// is down the receiver answers 503 and UNAVAILABLE (ack_timeout 2s), the
// SDKs retry, and once the broker is back every log record is in
// otlp_logs (counted by the event_id the sender gave it, so a retried
// record is one record however often it was written) and every span in
// otlp_spans (by span ID).
func TestOTLPBrokerKilled(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	for _, topic := range []string{otlpLogsTopic, otlpMetricsTopic, otlpSpansTopic} {
		b.createTopic(t, topic, 1, nil)
	}
	p := startOTLP(t, b, `
ship: {linger: 1ms}
otlp: {ack_timeout: 2s, retry_after: 1s}
audit: {enabled: false}
`)
	const n = 100
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	s := newSDKSenders(t, p, "sdk-kill")
	spanIDs := s.emit("kill", 0, n/2, ids)
	topics := readOTLPTopics(t, b)
	topics.waitFor(30*time.Second, "the first half of the stream", func() bool {
		return len(topics.ids) == n/2 && len(topics.spanIDs) == n/2
	})

	b.stop(syscall.SIGKILL, 5*time.Second)
	spanIDs = append(spanIDs, s.emit("kill", n/2, n, ids)...)
	waitfor.Until(t, 60*time.Second, "503 and UNAVAILABLE answers while the broker is down", func() bool {
		p.exitedEarly("answering while the broker is down")
		return p.requests(t, "logs", "http", "503") > 0 && p.requests(t, "traces", "grpc", "Unavailable") > 0
	})
	b.start()
	b.waitReady()
	s.shutdown(t)

	topics.waitFor(60*time.Second, "every log record and span after the retries", func() bool {
		return len(topics.ids) >= n && len(topics.spanIDs) >= n
	})
	for _, id := range ids {
		if _, ok := topics.ids[id]; !ok {
			t.Errorf("log record with event_id %s is missing", id)
		}
	}
	for _, id := range spanIDs {
		if _, ok := topics.spanIDs[id]; !ok {
			t.Errorf("span %s is missing", id)
		}
	}
	if len(topics.ids) != n || len(topics.spanIDs) != n || topics.noID > 0 {
		t.Errorf("%d distinct event_ids, %d span IDs, %d log records without an id; want %d, %d, 0", len(topics.ids), len(topics.spanIDs), topics.noID, n, n)
	}

	// In the lake each log record and span is one row: the sink drops the
	// repeats (log records by event_id, spans by trace and span ID).
	lake := t.TempDir()
	for topic, schema := range map[string]string{otlpLogsTopic: "otel-logs", otlpSpansTopic: "otel-spans"} {
		sink := startProcess(t, "sink-"+schema, "sink", "-b", b.addr, "--group", "lake-"+schema, "--topic", topic,
			"--schema", schema, "--out", "file://"+lake, "--idle-timeout", "500ms", "--log-level", "warn")
		waitLanded(t, b, "lake-"+schema, topic, time.Minute, sink)
	}
	for topic, id := range map[string]string{otlpLogsTopic: "event_id", otlpSpansTopic: "trace_id || span_id"} {
		var rows, distinct int
		err := openDuck(t).QueryRow(fmt.Sprintf("SELECT count(*), count(DISTINCT %s) FROM read_parquet('%s')",
			id, filepath.Join(lake, topic, "dt=*", "hr=*", "*.parquet"))).Scan(&rows, &distinct)
		if err != nil {
			t.Fatal(err)
		}
		if rows != n || distinct != n {
			t.Errorf("%s in the lake: %d rows, %d distinct; want %d of each", topic, rows, distinct, n)
		}
	}
	t.Logf("log records written %d times for %d sent, spans %d for %d (a repeat is a record of a request answered 503 that the producer still wrote once the broker was back, beside the retry); 503 answers %v, UNAVAILABLE %v",
		topics.logs["sdk-kill"], n, topics.spans["sdk-kill"], n, p.requests(t, "logs", "http", "503"), p.requests(t, "traces", "grpc", "Unavailable"))
}
