package otlp

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"millrace/agents/ship"
	"millrace/internal/httpserver"
)

func dial(t *testing.T, r *Receiver) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(r.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestGRPCRoundTrip: the three Export services, gzip-compressed, produce
// records holding exactly what was sent (logs plus their event_id).
func TestGRPCRoundTrip(t *testing.T) {
	t.Parallel()
	r, p := startReceiver(t, Config{})
	cc := dial(t, r)
	ctx := context.Background()
	ld, md, td := testLogs(1, 2), testMetrics(2), testTraces(2)
	if _, err := plogotlp.NewGRPCClient(cc).Export(ctx, plogotlp.NewExportRequestFromLogs(ld)); err != nil {
		t.Fatal(err)
	}
	if _, err := pmetricotlp.NewGRPCClient(cc).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md)); err != nil {
		t.Fatal(err)
	}
	if _, err := ptraceotlp.NewGRPCClient(cc).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}
	recs := p.records()
	if len(recs) != 3 || recs[0].Topic != DefaultLogsTopic || recs[1].Topic != DefaultMetricsTopic || recs[2].Topic != "otlp_spans" {
		t.Fatalf("records %+v", recs)
	}
	gotLogs, err := new(plog.ProtoUnmarshaler).UnmarshalLogs(recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := new(plog.ProtoMarshaler).MarshalLogs(ld)
	have, _ := new(plog.ProtoMarshaler).MarshalLogs(withoutEventIDs(t, gotLogs))
	sameProto(t, "logs", have, want)
	gotMetrics, err := new(pmetric.ProtoUnmarshaler).UnmarshalMetrics(recs[1].Value)
	if err != nil {
		t.Fatal(err)
	}
	want, _ = new(pmetric.ProtoMarshaler).MarshalMetrics(md)
	have, _ = new(pmetric.ProtoMarshaler).MarshalMetrics(gotMetrics)
	sameProto(t, "metrics", have, want)
	gotTraces, err := new(ptrace.ProtoUnmarshaler).UnmarshalTraces(recs[2].Value)
	if err != nil {
		t.Fatal(err)
	}
	want, _ = new(ptrace.ProtoMarshaler).MarshalTraces(td)
	have, _ = new(ptrace.ProtoMarshaler).MarshalTraces(gotTraces)
	sameProto(t, "traces", have, want)
}

// TestGRPCRetryAnswers: a backed-up producer is RESOURCE_EXHAUSTED and an
// unavailable broker UNAVAILABLE, each with RetryInfo (without it OTLP
// clients do not retry RESOURCE_EXHAUSTED); a message over the limit is
// refused by gRPC itself.
func TestGRPCRetryAnswers(t *testing.T) {
	t.Parallel()
	r, p := startReceiver(t, Config{MaxBodyBytes: 1 << 10, MaxDecodedBytes: 4 << 10})
	client := plogotlp.NewGRPCClient(dial(t, r))
	req := plogotlp.NewExportRequestFromLogs(testLogs(1, 1))
	for _, c := range []struct {
		tryErr   error
		buffered int64
		want     codes.Code
	}{
		{nil, ship.DefaultMaxBufferedRecords, codes.ResourceExhausted},
		{ship.ErrClosed, 0, codes.Unavailable},
	} {
		p.set(nil, c.tryErr, c.buffered)
		_, err := client.Export(context.Background(), req)
		st := status.Convert(err)
		if st.Code() != c.want || len(st.Details()) != 1 {
			t.Fatalf("%v, want %v with RetryInfo", err, c.want)
		}
		if ri, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || ri.GetRetryDelay().AsDuration() != DefaultRetryAfter {
			t.Fatalf("details %v", st.Details())
		}
	}
	p.set(nil, nil, 0)
	big := testLogs(1, 1)
	big.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body().SetStr(strings.Repeat("x", 8<<10))
	if _, err := client.Export(context.Background(), plogotlp.NewExportRequestFromLogs(big)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("an oversized message: %v", err)
	}
}

// TestAuth: with a token file, HTTP and gRPC requests without the token are
// refused and with it served.
func TestAuth(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "0123456789abcdef0123"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, p := startReceiver(t, Config{Auth: httpserver.AuthConfig{TokenFile: tokenFile}})
	body, _ := new(plog.ProtoMarshaler).MarshalLogs(testLogs(1, 1))
	url := "http://" + r.HTTPAddr().String() + "/v1/logs"
	for _, c := range []struct {
		authorization string
		want          int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong-token-wrong-token", http.StatusUnauthorized}, {"Bearer " + token, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", contentProto)
		if c.authorization != "" {
			req.Header.Set("Authorization", c.authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("HTTP %q: status %d, want %d", c.authorization, resp.StatusCode, c.want)
		}
	}
	client := plogotlp.NewGRPCClient(dial(t, r))
	req := plogotlp.NewExportRequestFromLogs(testLogs(1, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Export(ctx, req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("gRPC without a token: %v", err)
	}
	if _, err := client.Export(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), req); err != nil {
		t.Fatalf("gRPC with the token: %v", err)
	}
	if n := len(p.records()); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
}

// TestGRPCDeepNesting: a log body nested 10,000 AnyValue levels deep is
// refused by pdata's decoder (it stops at 100 levels) without harm, and
// the server serves the next request.
func TestGRPCDeepNesting(t *testing.T) {
	t.Parallel()
	r, p := startReceiver(t, Config{})
	client := plogotlp.NewGRPCClient(dial(t, r))
	ld := testLogs(1, 1)
	v := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body()
	for range 10_000 {
		v = v.SetEmptySlice().AppendEmpty()
	}
	// gRPC answers INTERNAL for any message its codec cannot decode; the
	// Export handler never sees it.
	if _, err := client.Export(context.Background(), plogotlp.NewExportRequestFromLogs(ld)); err == nil {
		t.Fatal("10,000 levels taken")
	}
	if _, err := client.Export(context.Background(), plogotlp.NewExportRequestFromLogs(testLogs(1, 1))); err != nil {
		t.Fatal(err)
	}
	if n := len(p.records()); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
}
