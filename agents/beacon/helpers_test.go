package beacon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"millrace/internal/leaktest"

	"millrace/agents/ship"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const (
	topic      = "clicks"
	dlqTopic   = "clicks.dlq"
	opsTopic   = "ops.metrics"
	opsDLQ     = "ops.metrics.dlq"
	testOrigin = "https://shop.example.com"
)

// harness is a beacon on an httptest server producing to a kfake cluster.
type harness struct {
	t       testing.TB
	cluster *kfake.Cluster
	shipper *ship.Shipper
	server  *Server
	reg     *prometheus.Registry
	http    *httptest.Server
}

func newCluster(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic, dlqTopic, opsTopic, opsDLQ))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// newHarness starts a cluster, a shipper and a beacon. shipCfg may be the
// zero Config.
func newHarness(t testing.TB, cfg Config, shipCfg ship.Config) *harness {
	t.Helper()
	h := &harness{t: t, cluster: newCluster(t), reg: prometheus.NewRegistry()}
	shipCfg.Brokers = h.cluster.ListenAddrs()
	if shipCfg.Linger == 0 {
		shipCfg.Linger = time.Millisecond
	}
	sh, err := ship.New(shipCfg, h.reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.Close)
	h.shipper = sh
	srv, err := New(cfg, sh, h.reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.server = srv
	h.http = httptest.NewServer(srv.Handler())
	t.Cleanup(h.http.Close)
	return h
}

// do sends a request and returns the answer with its body read.
func (h *harness) do(method, path, contentType, body string, header map[string]string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.http.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := h.http.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp, string(b)
}

func (h *harness) post(path, contentType, body string) (*http.Response, result) {
	h.t.Helper()
	resp, b := h.do(http.MethodPost, path, contentType, body, nil)
	var res result
	if err := json.Unmarshal([]byte(b), &res); err != nil {
		h.t.Fatalf("answer %d %q is not a JSON result: %v", resp.StatusCode, b, err)
	}
	return resp, res
}

// endOffset is the number of records in a topic.
func (h *harness) endOffset(topic string) int64 {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		h.t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			h.t.Fatal(o.Err)
		}
		n += o.Offset
	})
	return n
}

// records reads every record of a topic (the count is taken first from the
// end offsets, so the read stops exactly there).
func (h *harness) records(topic string) []*kgo.Record {
	h.t.Helper()
	want := h.endOffset(topic)
	if want == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("read %d of %d records of %s before the deadline", len(out), want, topic)
		}
		fs.EachError(func(_ string, _ int32, err error) { h.t.Fatalf("fetch %s: %v", topic, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// events decodes every record value of a topic.
func (h *harness) events(topic string) []map[string]any {
	h.t.Helper()
	var out []map[string]any
	for _, r := range h.records(topic) {
		var m map[string]any
		if err := json.Unmarshal(r.Value, &m); err != nil {
			h.t.Fatalf("record %q: %v", r.Value, err)
		}
		out = append(out, m)
	}
	return out
}

// byType indexes click events by their "type" (the last one wins).
func byType(evs []map[string]any) map[string]map[string]any {
	m := make(map[string]map[string]any)
	for _, e := range evs {
		t, _ := e["type"].(string)
		m[t] = e
	}
	return m
}
