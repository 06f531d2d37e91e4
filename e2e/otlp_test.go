package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"millrace/internal/waitfor"
	"millrace/schemas/otel"
)

// The OTLP receiver's topics (agents/otlp's defaults).
const (
	otlpLogsTopic    = "otlp_logs"
	otlpMetricsTopic = "otlp_metrics"
	otlpSpansTopic   = "otlp_spans"
)

// otlpProc is a `millrace otlp` process: its HTTP and gRPC addresses and
// its Prometheus /metrics URL.
type otlpProc struct {
	*process
	httpAddr, grpcAddr, metricsURL string
}

// startOTLP runs `millrace otlp` against b with the YAML config yaml and
// waits until both transports accept connections.
func startOTLP(t *testing.T, b *broker, yaml string) *otlpProc {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "otlp.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &otlpProc{
		httpAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		grpcAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p.metricsURL = "http://" + metricsAddr + "/metrics"
	p.process = startProcess(t, "otlp", "otlp", "-b", b.addr, "--config", cfg, "--http-listen", p.httpAddr,
		"--grpc-listen", p.grpcAddr, "--metrics-listen", metricsAddr, "--ops-metrics-interval", "0")
	p.waitLog("millrace otlp serving", 1, 20*time.Second)
	return p
}

// requests is the receiver's count of answers with code to signal's
// requests over transport (millrace_otlp_requests_total).
func (p *otlpProc) requests(t *testing.T, signal, transport, code string) float64 {
	t.Helper()
	return scrapeCounterOr(t, p.metricsURL, fmt.Sprintf(`millrace_otlp_requests_total{code=%q,signal=%q,transport=%q}`, code, signal, transport))
}

// seeds are the bootstrap addresses of a broker this test did not start
// itself (up's embedded one).
type seeds []string

func (s seeds) seeds() []string { return s }

// telemetrygenBin is the OpenTelemetry Collector's load generator, which
// `make deps` builds into .bin.
func telemetrygenBin(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../.bin/telemetrygen")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("telemetrygen is not installed (make deps builds it into .bin): %v", err)
	}
	return bin
}

// otlpTopics reads the receiver's three topics from their start and
// decodes every record with pdata's unmarshalers, as a consumer of the
// Collector's Kafka exporter does.
type otlpTopics struct {
	t  *testing.T
	cl *kgo.Client

	logs    map[string]int      // log records by service.name
	points  map[string]int      // metric data points by service.name
	spans   map[string]int      // spans by service.name
	records map[string]int      // records read, by topic
	bodies  map[string]int      // log records by body
	names   map[string]int      // spans by name
	ids     map[string]struct{} // the log records' event_ids
	noID    int                 // log records without one
	spanIDs map[string]struct{} // the spans' IDs
}

func readOTLPTopics(t *testing.T, k kafka) *otlpTopics {
	t.Helper()
	return &otlpTopics{t: t, cl: kafkaClient(t, k, kgo.ConsumeTopics(otlpLogsTopic, otlpMetricsTopic, otlpSpansTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond)),
		logs: map[string]int{}, points: map[string]int{}, spans: map[string]int{}, records: map[string]int{},
		bodies: map[string]int{}, names: map[string]int{}, ids: map[string]struct{}{}, spanIDs: map[string]struct{}{}}
}

// poll reads what arrived within a second and adds it up.
func (o *otlpTopics) poll() {
	o.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	o.cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		o.records[r.Topic]++
		switch r.Topic {
		case otlpLogsTopic:
			ld, err := new(plog.ProtoUnmarshaler).UnmarshalLogs(r.Value)
			if err != nil {
				o.t.Fatalf("%s offset %d is not OTLP LogsData: %v", r.Topic, r.Offset, err)
			}
			o.addLogs(ld)
		case otlpMetricsTopic:
			md, err := new(pmetric.ProtoUnmarshaler).UnmarshalMetrics(r.Value)
			if err != nil {
				o.t.Fatalf("%s offset %d is not OTLP MetricsData: %v", r.Topic, r.Offset, err)
			}
			for _, rm := range md.ResourceMetrics().All() {
				n := 0
				for _, sm := range rm.ScopeMetrics().All() {
					for _, m := range sm.Metrics().All() {
						n += otel.PointCount(m)
					}
				}
				o.points[serviceName(rm.Resource().Attributes().AsRaw())] += n
			}
		case otlpSpansTopic:
			td, err := new(ptrace.ProtoUnmarshaler).UnmarshalTraces(r.Value)
			if err != nil {
				o.t.Fatalf("%s offset %d is not OTLP TracesData: %v", r.Topic, r.Offset, err)
			}
			for _, rs := range td.ResourceSpans().All() {
				service := serviceName(rs.Resource().Attributes().AsRaw())
				for _, ss := range rs.ScopeSpans().All() {
					for _, span := range ss.Spans().All() {
						o.spans[service]++
						o.names[span.Name()]++
						o.spanIDs[span.SpanID().String()] = struct{}{}
					}
				}
			}
		}
	})
}

func (o *otlpTopics) addLogs(ld plog.Logs) {
	for _, rl := range ld.ResourceLogs().All() {
		service := serviceName(rl.Resource().Attributes().AsRaw())
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				o.logs[service]++
				o.bodies[lr.Body().AsString()]++
				if id, ok := lr.Attributes().Get("event_id"); ok && id.Str() != "" {
					o.ids[id.Str()] = struct{}{}
				} else {
					o.noID++
				}
			}
		}
	}
}

// waitFor polls until cond holds, failing after limit with what was read.
func (o *otlpTopics) waitFor(limit time.Duration, what string, cond func() bool) {
	o.t.Helper()
	defer reportLastSeen(o.t, func() string {
		return fmt.Sprintf("records %v, logs %v, points %v, spans %v, %d event_ids", o.records, o.logs, o.points, o.spans, len(o.ids))
	})()
	waitfor.Until(o.t, limit, what, func() bool {
		o.poll()
		return cond()
	})
}

func serviceName(attrs map[string]any) string {
	s, _ := attrs["service.name"].(string)
	return s
}

// equalCounts reports whether got holds exactly want's counts (a key
// missing from want must be absent or zero in got).
func equalCounts(got, want map[string]int) bool {
	for k, n := range got {
		if want[k] != n {
			return false
		}
	}
	for k, n := range want {
		if got[k] != n {
			return false
		}
	}
	return true
}

// TestOTLPTelemetrygen runs `millrace up` with its OTLP receiver and
// sends logs, metrics and traces with telemetrygen, over OTLP/HTTP and
// over OTLP/gRPC: the banner names the endpoints, every record of the
// three topics decodes with pdata's unmarshalers, the counts per service
// are what was sent, and every log record carries an event_id.
func TestOTLPTelemetrygen(t *testing.T) {
	t.Parallel()
	tg := telemetrygenBin(t)
	dir := t.TempDir()
	kafkaAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	httpAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	grpcAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg := filepath.Join(dir, "millrace.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`data: %s
broker: {listen: %q}
http: {listen: "127.0.0.1:%d", metrics_listen: "127.0.0.1:%d"}
schema_registry: {enabled: false}
otlp: {http_addr: %q, grpc_addr: %q}
syslog: {enabled: false}
ops_metrics: {interval: -1s}
audit: {interval: 200ms}
sinks:
  - {name: otel-logs, out: lake, topics: [otlp_logs], schema: otel-logs, roll_age: 1s, idle_timeout: 1s}
  - {name: otel-spans, out: lake, topics: [otlp_spans], schema: otel-spans, roll_age: 1s, idle_timeout: 1s}
  - {name: otel-metrics, out: lake, topics: [otlp_metrics], schema: otel-metrics, roll_age: 1s, idle_timeout: 1s}
`, filepath.Join(dir, "data"), kafkaAddr, freePort(t), freePort(t), httpAddr, grpcAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	up := startProcess(t, "up", "up", "--config", cfg)
	up.waitLog("Stop with Ctrl-C", 1, 60*time.Second)
	banner := fmt.Sprintf("OTLP (OpenTelemetry)     http://%s (POST /v1/logs, /v1/metrics, /v1/traces), gRPC %s", httpAddr, grpcAddr)
	if !strings.Contains(up.log(), banner) {
		t.Errorf("up's banner lacks %q", banner)
	}

	const logs, metrics, traces = 20, 10, 5
	count := map[string]int{"logs": logs, "metrics": metrics, "traces": traces}
	var sends [][]string
	for _, transport := range []string{"http", "grpc"} {
		for _, signal := range []string{"logs", "metrics", "traces"} {
			args := []string{signal, "--otlp-insecure", "--rate", "0", "--service", "tg-" + transport, "--" + signal, strconv.Itoa(count[signal])}
			if transport == "http" {
				args = append(args, "--otlp-http", "--otlp-endpoint", httpAddr)
			} else {
				args = append(args, "--otlp-endpoint", grpcAddr)
			}
			sends = append(sends, args)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(sends))
	for i, args := range sends {
		wg.Go(func() {
			_, stderr, err := runErr(60*time.Second, "", tg, args...)
			if err != nil {
				errs[i] = fmt.Errorf("telemetrygen %s: %v\n%s", strings.Join(args, " "), err, tail([]byte(stderr), 2048))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// telemetrygen's traces each have a parent span and one child span.
	wantLogs := map[string]int{"tg-http": logs, "tg-grpc": logs}
	wantPoints := map[string]int{"tg-http": metrics, "tg-grpc": metrics}
	wantSpans := map[string]int{"tg-http": 2 * traces, "tg-grpc": 2 * traces}
	topics := readOTLPTopics(t, seeds{kafkaAddr})
	topics.waitFor(30*time.Second, "every log record, data point and span in the topics", func() bool {
		return equalCounts(topics.logs, wantLogs) && equalCounts(topics.points, wantPoints) && equalCounts(topics.spans, wantSpans)
	})
	if topics.noID > 0 || len(topics.ids) != 2*logs {
		t.Errorf("%d log records without an event_id, %d distinct event_ids; want none without and %d", topics.noID, len(topics.ids), 2*logs)
	}

	// The sinks land a row per log record, span and data point, and the
	// audit finds as many rows in the lake as the receiver accepted, per
	// service.name.
	want := map[string]map[string]int{"otlp_logs": wantLogs, "otlp_metrics": wantPoints, "otlp_spans": wantSpans}
	got := map[string]map[string]int{}
	var out string
	defer reportLastSeen(t, func() string { return fmt.Sprintf("accepted=landed rows %v in the last audit:\n%s", got, out) })()
	waitfor.Until(t, 90*time.Second, "the audit to reconcile every service's log records, points and spans", func() bool {
		var code int
		out, code = runAudit(t, "audit", "-b", kafkaAddr, "--since", "2h", "--json")
		if code != 0 && code != 1 {
			return false
		}
		got = map[string]map[string]int{}
		for _, l := range decodeReport(t, out).Lines {
			if want[l.Topic] != nil && l.Accepted == l.Landed {
				if got[l.Topic] == nil {
					got[l.Topic] = map[string]int{}
				}
				got[l.Topic][l.Source] += int(l.Landed)
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})

	// The warehouse's view: DuckDB counts the log records by service_name
	// over the files the table's current snapshot lists.
	files := icebergDataFiles(t, loadIcebergTable(t, openIcebergDirCatalog(t.Context(), t, filepath.Join(dir, "data", "lake")), "otlp_logs"))
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = "'" + localFilePath(i, f) + "'"
	}
	rows, err := openDuck(t).Query(`SELECT service_name, count(*), count(DISTINCT event_id) FROM read_parquet([` + strings.Join(quoted, ", ") + `]) GROUP BY service_name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	byService := map[string]int{}
	for rows.Next() {
		var service string
		var n, distinct int
		if err := rows.Scan(&service, &n, &distinct); err != nil {
			t.Fatal(err)
		}
		if n != distinct {
			t.Errorf("%s: %d log records in the lake, %d distinct event ids", service, n, distinct)
		}
		byService[service] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(byService) != fmt.Sprint(wantLogs) {
		t.Errorf("DuckDB counts %v log records by service_name, want %v", byService, wantLogs)
	}
}

// otlpPost sends body to the receiver's path with the content type and
// encoding given and returns the status.
func otlpPost(t *testing.T, url, contentType, encoding string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
