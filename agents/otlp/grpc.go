package otlp

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // registers the gzip decompressor OTLP clients may use
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// newGRPCServer builds the gRPC server with the three Export services.
// gRPC bounds each message, decompressed, by MaxRecvMsgSize.
func (r *Receiver) newGRPCServer() *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(r.cfg.MaxDecodedBytes)),
		grpc.ChainUnaryInterceptor(r.grpcIntercept),
	}
	if r.security.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(r.security.TLS)))
	}
	s := grpc.NewServer(opts...)
	plogotlp.RegisterGRPCServer(s, &logsServer{r: r})
	pmetricotlp.RegisterGRPCServer(s, &metricsServer{r: r})
	ptraceotlp.RegisterGRPCServer(s, &tracesServer{r: r})
	return s
}

// grpcIntercept checks credentials, takes an in-flight slot and counts the
// answer.
func (r *Receiver) grpcIntercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	signal := grpcSignal(info.FullMethod)
	resp, err := func() (any, error) {
		if r.security.Auth != nil && !r.grpcAuthorized(ctx, info.FullMethod) {
			return nil, status.Error(codes.Unauthenticated, "missing or invalid credentials; send the bearer token or basic-auth credentials in the authorization metadata")
		}
		if !r.acquire() {
			return nil, r.retryStatus(codes.Unavailable, "too many OTLP requests in progress")
		}
		defer r.release()
		return handler(ctx, req)
	}()
	r.metrics.requests.WithLabelValues(signal, "grpc", status.Code(err).String()).Inc()
	return resp, err
}

func grpcSignal(method string) string {
	switch {
	case strings.Contains(method, ".logs."):
		return "logs"
	case strings.Contains(method, ".metrics."):
		return "metrics"
	}
	return "traces"
}

// grpcAuthorized checks the authorization metadata with the HTTP server's
// Auth, so both transports take the same credentials and count the same
// failures.
func (r *Receiver) grpcAuthorized(ctx context.Context, method string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	if err != nil {
		return false
	}
	req.URL.Path = method
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			req.Header.Set("Authorization", v[0])
		}
	}
	ok := false
	r.security.Auth.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ok = true })).ServeHTTP(discardWriter{}, req)
	return ok
}

// discardWriter takes the HTTP refusal grpcAuthorized does not send.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// retryStatus is a retryable failure with RetryInfo: OTLP clients retry
// RESOURCE_EXHAUSTED only when it carries one.
func (r *Receiver) retryStatus(code codes.Code, msg string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.cfg.RetryAfter)})
	if err != nil {
		return status.Error(code, msg)
	}
	return st.Err()
}

// grpcError is the error of an outcome that asks for a retry, or nil.
func (r *Receiver) grpcError(o outcome) error {
	switch o.retry {
	case retryBackedUp:
		return r.retryStatus(codes.ResourceExhausted, o.message)
	case retryUnavailable:
		return r.retryStatus(codes.Unavailable, o.message)
	}
	return nil
}

type logsServer struct {
	plogotlp.UnimplementedGRPCServer
	r *Receiver
}

// Export produces a logs request.
func (s *logsServer) Export(ctx context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	o := s.r.exportLogs(ctx, req.Logs())
	resp := plogotlp.NewExportResponse()
	if err := s.r.grpcError(o); err != nil {
		return resp, err
	}
	if o.rejected > 0 {
		resp.PartialSuccess().SetRejectedLogRecords(int64(o.rejected))
		resp.PartialSuccess().SetErrorMessage(o.message)
	}
	return resp, nil
}

type metricsServer struct {
	pmetricotlp.UnimplementedGRPCServer
	r *Receiver
}

// Export produces a metrics request.
func (s *metricsServer) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	o := s.r.exportMetrics(ctx, req.Metrics())
	resp := pmetricotlp.NewExportResponse()
	if err := s.r.grpcError(o); err != nil {
		return resp, err
	}
	if o.rejected > 0 {
		resp.PartialSuccess().SetRejectedDataPoints(int64(o.rejected))
		resp.PartialSuccess().SetErrorMessage(o.message)
	}
	return resp, nil
}

type tracesServer struct {
	ptraceotlp.UnimplementedGRPCServer
	r *Receiver
}

// Export produces a traces request.
func (s *tracesServer) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	o := s.r.exportTraces(ctx, req.Traces())
	resp := ptraceotlp.NewExportResponse()
	if err := s.r.grpcError(o); err != nil {
		return resp, err
	}
	if o.rejected > 0 {
		resp.PartialSuccess().SetRejectedSpans(int64(o.rejected))
		resp.PartialSuccess().SetErrorMessage(o.message)
	}
	return resp, nil
}
