// Package otlp is the OpenTelemetry Protocol receiver's core: OTLP/HTTP
// (POST /v1/logs, /v1/metrics, /v1/traces, protobuf or JSON, optionally
// gzipped) and OTLP/gRPC (the three Export services) produce each request
// to the broker through agents/ship in the shape the OpenTelemetry
// Collector's Kafka exporter writes (otlp_proto or otlp_json records on
// otlp_logs, otlp_metrics and otlp_spans), and answer only once the broker
// acknowledged them, as the beacon does.
//
// Answers follow the OTLP specification's "Failures" sections: a request
// whose records were all acknowledged is a success; records that can never
// be written (larger than a record may be, or refused by the broker) are a
// partial success with their count, which clients do not retry; a backed-up
// producer is 429 / RESOURCE_EXHAUSTED and an unacknowledged request 503 /
// UNAVAILABLE, both with a retry delay, which clients retry; a malformed
// request is 400 / INVALID_ARGUMENT.
//
// Every log record gets an event_id attribute (a UUIDv7) unless it has
// one, so the sink deduplicates retried OTLP logs as it does beacon events,
// and acknowledged log records, spans and data points are counted for the
// audit by the resource's service.name and the hour the sink files their
// rows under.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc"

	"millrace/audit"
	"millrace/internal/httpserver"
)

// Receiver serves OTLP over HTTP and gRPC. Build it with New, then Start
// and Shutdown it.
type Receiver struct {
	cfg      Config
	producer Producer
	logger   *slog.Logger
	metrics  *metrics
	security httpserver.Security
	inFlight chan struct{}  // a slot per request being decoded or published
	reading  *readingBudget // the bytes of HTTP bodies being read, before their slot
	audit    *audit.Counter

	httpServer *http.Server
	grpcServer *grpc.Server
	httpLn     net.Listener
	grpcLn     net.Listener
	wg         sync.WaitGroup // the serving goroutines
}

// New checks cfg (after defaults), reads its TLS and credential files and
// registers the receiver's metrics with reg (nil registers none). logger
// nil discards.
func New(cfg Config, producer Producer, reg prometheus.Registerer, logger *slog.Logger) (*Receiver, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if producer == nil {
		return nil, errors.New("otlp: a producer is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "otlp")
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	sec, err := httpserver.LoadSecurity(cfg.TLS, cfg.Auth, reg, logger)
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	return &Receiver{cfg: cfg, producer: producer, logger: logger, metrics: m, security: sec,
		inFlight: make(chan struct{}, cfg.MaxInFlight),
		// Twice what the slots decode from at once: room for the next
		// bodies to arrive while the slots are busy.
		reading: &readingBudget{max: 2 * int64(cfg.MaxInFlight) * cfg.MaxBodyBytes}}, nil
}

// SetAudit makes the receiver count acknowledged log records in c, by
// source (the resource's service.name) and hour; nil counts nothing. Call
// it before Start.
func (r *Receiver) SetAudit(c *audit.Counter) { r.audit = c }

// Start listens on the configured addresses and serves until Shutdown.
func (r *Receiver) Start(_ context.Context) error {
	if r.cfg.HTTPAddr != "" {
		ln, err := r.security.Listen(r.cfg.HTTPAddr, "OTLP/HTTP", r.logger)
		if err != nil {
			return fmt.Errorf("otlp: http: %w", err)
		}
		r.httpLn = ln
		r.httpServer = httpserver.New(r.security.Protect(r.HTTPHandler()), httpserver.Timeouts{}, r.logger)
	}
	if r.cfg.GRPCAddr != "" {
		ln, err := httpserver.Listen(r.cfg.GRPCAddr, nil)
		if err != nil {
			if r.httpLn != nil {
				_ = r.httpLn.Close()
			}
			return fmt.Errorf("otlp: grpc: %w", err)
		}
		r.grpcLn = ln
		r.grpcServer = r.newGRPCServer()
	}
	if r.httpServer != nil {
		r.wg.Go(func() {
			if err := r.httpServer.Serve(r.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				r.logger.Error("OTLP/HTTP server stopped", "err", err)
			}
		})
	}
	if r.grpcServer != nil {
		r.wg.Go(func() {
			if err := r.grpcServer.Serve(r.grpcLn); err != nil {
				r.logger.Error("OTLP/gRPC server stopped", "err", err)
			}
		})
	}
	return nil
}

// HTTPAddr is the address the HTTP server listens on (nil before Start or
// without one).
func (r *Receiver) HTTPAddr() net.Addr {
	if r.httpLn == nil {
		return nil
	}
	return r.httpLn.Addr()
}

// GRPCAddr is the address the gRPC server listens on (nil before Start or
// without one).
func (r *Receiver) GRPCAddr() net.Addr {
	if r.grpcLn == nil {
		return nil
	}
	return r.grpcLn.Addr()
}

// Shutdown stops accepting requests and waits for those in progress until
// ctx ends, then closes what is left; it returns when every goroutine the
// receiver started has ended.
func (r *Receiver) Shutdown(ctx context.Context) error {
	var err error
	if r.httpServer != nil {
		if err = r.httpServer.Shutdown(ctx); err != nil {
			_ = r.httpServer.Close()
		}
	}
	if r.grpcServer != nil {
		stopped := make(chan struct{})
		go func() { r.grpcServer.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			r.grpcServer.Stop()
			<-stopped
			err = errors.Join(err, ctx.Err())
		}
	}
	r.wg.Wait()
	return err
}

// acquire takes an in-flight slot; false means too many requests are in
// progress.
func (r *Receiver) acquire() bool {
	select {
	case r.inFlight <- struct{}{}:
		return true
	default:
		return false
	}
}

func (r *Receiver) release() { <-r.inFlight }

// exportLogs produces a logs request.
func (r *Receiver) exportLogs(ctx context.Context, ld plog.Logs) outcome {
	r.metrics.received.WithLabelValues("logs").Add(float64(ld.LogRecordCount()))
	if err := addEventIDs(ld); err != nil {
		return outcome{retry: retryUnavailable, message: "generating event IDs failed: " + err.Error()}
	}
	parts := []part[plog.Logs]{{data: ld, items: ld.LogRecordCount()}}
	if r.cfg.PartitionLogsByResourceAttributes {
		parts = splitByResource(logsSignal, ld, true)
	}
	return exportParts(r, ctx, logsSignal, r.cfg.LogsTopic, parts, auditAcked(r, r.cfg.LogsTopic, logAudit))
}

// exportMetrics produces a metrics request.
func (r *Receiver) exportMetrics(ctx context.Context, md pmetric.Metrics) outcome {
	r.metrics.received.WithLabelValues("metrics").Add(float64(md.DataPointCount()))
	parts := []part[pmetric.Metrics]{{data: md, items: md.DataPointCount()}}
	if r.cfg.PartitionMetricsByResourceAttributes {
		parts = splitByResource(metricsSignal, md, true)
	}
	return exportParts(r, ctx, metricsSignal, r.cfg.MetricsTopic, parts, auditAcked(r, r.cfg.MetricsTopic, metricAudit))
}

// exportTraces produces a traces request.
func (r *Receiver) exportTraces(ctx context.Context, td ptrace.Traces) outcome {
	r.metrics.received.WithLabelValues("traces").Add(float64(td.SpanCount()))
	parts := []part[ptrace.Traces]{{data: td, items: td.SpanCount()}}
	if r.cfg.PartitionTracesByID {
		parts = splitTracesByID(td)
	}
	return exportParts(r, ctx, tracesSignal, r.cfg.TracesTopic, parts, auditAcked(r, r.cfg.TracesTopic, spanAudit))
}

// auditAcked makes, for a record's part of a request, what counts its
// items for the audit once the broker acknowledged it; nil with the audit
// off. The counts are taken when the part is encoded, so a retried
// request counts again: the counter is not distinct, and the sink's
// deduplicated rows make up the difference.
func auditAcked[T any](r *Receiver, topic string, count func(T, time.Time) map[auditKey]int64) func(T) func() {
	if r.audit == nil {
		return nil
	}
	now := time.Now()
	return func(d T) func() {
		counts := count(d, now)
		return func() {
			for k, n := range counts {
				r.audit.Add(topic, k.source, time.Unix(k.hour*3600, 0), n)
			}
		}
	}
}

// exportParts encodes parts into records, publishes them and counts the
// outcome.
func exportParts[T any](r *Receiver, ctx context.Context, s signal[T], topic string, parts []part[T], acked func(T) func()) outcome {
	recs, refused, why := encodeParts(s, r.cfg.Encoding, topic, r.cfg.MaxRecordBytes, parts, acked)
	produced := r.metrics.produced.WithLabelValues(s.name)
	for i := range recs {
		items, prev := recs[i].items, recs[i].acked
		recs[i].acked = func() {
			produced.Add(float64(items))
			if prev != nil {
				prev()
			}
		}
	}
	o := r.publish(ctx, recs)
	if o.retry != retryNone {
		// Nothing was acknowledged; the whole request comes again.
		return o
	}
	o.rejected += refused
	if refused > 0 {
		o.message = joinMessages(why, o.message)
	}
	r.metrics.refused.WithLabelValues(s.name).Add(float64(o.rejected))
	if o.rejected > 0 {
		r.logger.Warn("items refused", "signal", s.name, "topic", topic, "refused", o.rejected, "why", o.message)
	}
	return o
}

func joinMessages(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
