package tail

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"millrace/internal/leaktest"

	"millrace/agents/ship"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const topic = "logs"

// logLine is the decoded record value.
type logLine struct {
	EventID     string            `json:"event_id"`
	TS          string            `json:"ts"`
	Host        string            `json:"host"`
	Source      string            `json:"source"`
	Offset      int64             `json:"offset"`
	Line        string            `json:"line"`
	Truncated   bool              `json:"truncated"`
	InvalidUTF8 bool              `json:"invalid_utf8"`
	Fields      map[string]string `json:"fields"`
	key, header string
}

func newCluster(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newShipper(t testing.TB, c *kfake.Cluster, cfg ship.Config) *ship.Shipper {
	t.Helper()
	cfg.Brokers = c.ListenAddrs()
	s, err := ship.New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// testConfig is a fast-ticking config following dir/*.log.
func testConfig(dir, dataDir string) Config {
	return Config{
		Paths:              []string{filepath.Join(dir, "*.log")},
		Topic:              topic,
		DataDir:            dataDir,
		Host:               "web-1",
		ScanFrequency:      100 * time.Millisecond,
		PollInterval:       20 * time.Millisecond,
		CheckpointInterval: 50 * time.Millisecond,
	}
}

// run starts a tailer on a fresh shipper and stops both at cleanup.
type harness struct {
	t       testing.TB
	cluster *kfake.Cluster
	shipper *ship.Shipper
	tailer  *Tailer
	cancel  context.CancelFunc
	stopped bool
}

func start(t testing.TB, c *kfake.Cluster, cfg Config, sc ship.Config) *harness {
	t.Helper()
	s := newShipper(t, c, sc)
	tl, err := New(cfg, s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := tl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, cluster: c, shipper: s, tailer: tl, cancel: cancel}
	t.Cleanup(func() { h.stop() })
	return h
}

// stop shuts down cleanly.
func (h *harness) stop() {
	if h.stopped {
		return
	}
	h.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.tailer.Shutdown(ctx); err != nil {
		h.t.Errorf("tailer shutdown: %v", err)
	}
	if err := h.shipper.Shutdown(ctx); err != nil {
		h.t.Errorf("shipper shutdown: %v", err)
	}
	h.cancel()
}

// kill stops abruptly, like SIGKILL: no final checkpoint, buffered records
// dropped.
func (h *harness) kill() {
	h.stopped = true
	h.cancel()
	h.shipper.Close()
	if err := h.tailer.Shutdown(context.Background()); err != nil {
		h.t.Errorf("joining killed tailer: %v", err)
	}
}

// consumer reads the topic from the start, accumulating records.
type consumer struct {
	cl  *kgo.Client
	got []logLine
}

func newConsumer(t testing.TB, c *kfake.Cluster) *consumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &consumer{cl: cl}
}

// waitFor polls until at least n records arrived or the deadline passes.
func (c *consumer) waitFor(t testing.TB, n int) []logLine {
	t.Helper()
	// Give up only after 30s without progress: under the race detector on a
	// loaded machine the fake broker is slow, but a loss shows as a stall.
	deadline := time.Now().Add(30 * time.Second)
	for len(c.got) < n && time.Now().Before(deadline) {
		before := len(c.got)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := c.cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var l logLine
			if err := json.Unmarshal(r.Value, &l); err != nil {
				t.Fatalf("record value is not JSON: %v: %q", err, r.Value)
			}
			l.key = string(r.Key)
			for _, hd := range r.Headers {
				if hd.Key == "event_id" {
					l.header = string(hd.Value)
				}
			}
			c.got = append(c.got, l)
		})
		if len(c.got) > before {
			deadline = time.Now().Add(30 * time.Second)
		}
	}
	if len(c.got) < n {
		t.Fatalf("got %d records, want %d", len(c.got), n)
	}
	return c.got
}

// settle polls a little longer and returns everything, for checks that no
// extra records arrive.
func (c *consumer) settle(t testing.TB, n int) []logLine {
	t.Helper()
	got := c.waitFor(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c.cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		var l logLine
		_ = json.Unmarshal(r.Value, &l)
		got = append(got, l)
	})
	c.got = got
	return got
}

func appendLines(t testing.TB, path, prefix string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%s line %06d\n", prefix, i)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
}

// lineSet counts records per line text.
func lineSet(ls []logLine) map[string]int {
	m := map[string]int{}
	for _, l := range ls {
		m[l.Line]++
	}
	return m
}

func wantLines(t testing.TB, got []logLine, prefix string, from, to int) {
	t.Helper()
	set := lineSet(got)
	for i := from; i < to; i++ {
		if s := fmt.Sprintf("%s line %06d", prefix, i); set[s] == 0 {
			t.Fatalf("line %q never arrived", s)
		}
	}
}

// registryOffset is the stored checkpoint of the entry last seen at path.
func registryOffset(t testing.TB, dataDir, path string) int64 {
	t.Helper()
	es, err := ReadRegistry(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Path == path {
			return e.Offset
		}
	}
	return -1
}
