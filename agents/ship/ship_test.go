package ship

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"
	"millrace/internal/leaktest"

	"millrace/internal/clientauth"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startShipper creates a Shipper with cfg (brokers set to c's) and
// metrics registered with reg (nil registers nothing), and starts it.
func startShipper(t *testing.T, c *kfake.Cluster, cfg Config, reg prometheus.Registerer) *Shipper {
	t.Helper()
	cfg.Brokers = c.ListenAddrs()
	s, err := New(cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no brokers", Config{}, "at least one broker"},
		{"bad broker", Config{Brokers: []string{"localhost"}}, "not host:port"},
		{"bad acks", Config{Brokers: []string{"a:1"}, Acks: "two"}, "acks"},
		{"bad compression", Config{Brokers: []string{"a:1"}, Compression: "brotli"}, "compression"},
		{"tiny batch", Config{Brokers: []string{"a:1"}, MaxBatchBytes: 10}, "max_batch_bytes"},
		{"buffer below batch", Config{Brokers: []string{"a:1"}, MaxBatchBytes: 1 << 20, MaxBufferedBytes: 1 << 10}, "max_buffered_bytes"},
		{"sasl without user", Config{Brokers: []string{"a:1"}, Security: clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "PLAIN", Password: "p"}}}, "ship: sasl: username is empty"},
		{"tls key without cert", Config{Brokers: []string{"a:1"}, Security: clientauth.Settings{TLS: &clientauth.TLS{Key: "k.pem"}}}, "ship: tls: key is set without cert"},
		{"ok", Config{Brokers: []string{"a:1"}, Compression: "zstd"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.WithDefaults().Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestConfigYAML reads tls: and sasl: next to brokers:, as agents'
// ship: sections write them.
func TestConfigYAML(t *testing.T) {
	const doc = `
brokers: [b1:9093]
tls: {ca: /etc/millrace/ca.pem, server_name: kafka.internal}
sasl: {mechanism: SCRAM-SHA-512, username: tail, password_file: /etc/millrace/tail.pass}
`
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	want := clientauth.Settings{
		TLS:  &clientauth.TLS{CA: "/etc/millrace/ca.pem", ServerName: "kafka.internal"},
		SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-512", Username: "tail", PasswordFile: "/etc/millrace/tail.pass"},
	}
	if !reflect.DeepEqual(c.Security, want) {
		t.Errorf("security %+v %+v, want %+v %+v", c.Security.TLS, c.Security.SASL, want.TLS, want.SASL)
	}
	if err := c.WithDefaults().Validate(); err != nil {
		t.Error(err)
	}
	// The files are read by New, so a missing one stops the agent at
	// start rather than at its first record.
	if _, err := New(c, nil, nil); err == nil || !strings.Contains(err.Error(), "ship: tls: reading the CA file") {
		t.Errorf("New with a missing CA file: %v", err)
	}
	c.Security.TLS = nil
	if _, err := New(c, nil, nil); err == nil || !strings.Contains(err.Error(), "ship: sasl: reading the password file") {
		t.Errorf("New with a missing password file: %v", err)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		kind      Kind
		retryable bool
	}{
		{ErrBufferFull, KindBufferFull, true},
		{kgo.ErrMaxBuffered, KindBufferFull, true},
		{kgo.ErrRecordTimeout, KindTimeout, true},
		{kerr.NotLeaderForPartition, KindBroker, true},
		{kerr.MessageTooLarge, KindTooLarge, false},
		{kerr.InvalidRecord, KindRejected, false},
		{kerr.TopicAuthorizationFailed, KindDenied, true},
		{fmt.Errorf("wrapped: %w", kerr.SaslAuthenticationFailed), KindDenied, true},
		{fmt.Errorf("wrapped: %w", kgo.ErrClientClosed), KindClosed, false},
		{context.Canceled, KindCanceled, true},
	} {
		if got := Classify(tc.err); got != tc.kind {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.kind)
		}
		if got := IsRetryable(tc.err); got != tc.retryable {
			t.Errorf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.retryable)
		}
	}
}

func TestProduceAcknowledgesEveryRecord(t *testing.T) {
	for _, comp := range []string{"zstd", "lz4", "snappy", "gzip", "none"} {
		t.Run(comp, func(t *testing.T) {
			c := newCluster(t)
			reg := prometheus.NewRegistry()
			s := startShipper(t, c, Config{Compression: comp}, reg)
			const n = 500
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failed []error
			wg.Add(n)
			for i := range n {
				s.Produce(context.Background(), &kgo.Record{Topic: "t", Key: []byte("k"), Value: fmt.Appendf(nil, "v%d", i)}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						failed = append(failed, err)
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if len(failed) > 0 {
				t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
			}
			if got := testutil.ToFloat64(s.metrics.records.WithLabelValues("t")); got != n {
				t.Fatalf("records metric %v, want %d", got, n)
			}
			if got := countRecords(t, c, "t"); got != n {
				t.Fatalf("broker holds %d records, want %d", got, n)
			}
			if cnt, err := testutil.GatherAndCount(reg, "millrace_ship_ack_latency_seconds"); err != nil || cnt != 1 {
				t.Fatalf("latency histogram: count %d err %v", cnt, err)
			}
		})
	}
}

func countRecords(t *testing.T, c *kfake.Cluster, topic string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		got := fs.NumRecords()
		n += got
		if got == 0 {
			return n
		}
	}
}

// stallProduce makes the cluster hold every produce request until release
// is closed, as a broker that accepts connections but cannot write would.
func stallProduce(c *kfake.Cluster, release <-chan struct{}) {
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case <-release:
			c.DropControl()
			return nil, nil, false
		default:
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
}

func TestTryProduceAnswersBufferFull(t *testing.T) {
	c := newCluster(t)
	release := make(chan struct{})
	stallProduce(c, release)
	s := startShipper(t, c, Config{MaxBatchBytes: 1024, MaxBufferedBytes: 4096, MaxBufferedRecords: 1000}, nil)
	var acked sync.WaitGroup
	var full bool
	value := make([]byte, 200)
	for range 100 {
		acked.Add(1)
		err := s.TryProduce(context.Background(), &kgo.Record{Topic: "t", Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("record failed: %v", err)
			}
			acked.Done()
		})
		if errors.Is(err, ErrBufferFull) {
			acked.Done()
			full = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("TryProduce never reported a full buffer while the broker was stalled")
	}
	if s.BufferedBytes() == 0 || s.fill() <= 0.5 {
		t.Fatalf("buffer fill %v bytes %d, want a nearly full buffer", s.fill(), s.BufferedBytes())
	}
	// A blocking Produce waits and gives up with the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	errCh := make(chan error, 1)
	s.Produce(ctx, &kgo.Record{Topic: "t", Value: make([]byte, 3000)}, func(_ *kgo.Record, err error) { errCh <- err })
	cancel()
	if err := <-errCh; Classify(err) != KindCanceled {
		t.Fatalf("blocked Produce ended with %v, want a canceled error", err)
	}
	close(release)
	acked.Wait()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := s.TryProduce(context.Background(), &kgo.Record{Topic: "t"}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryProduce after Shutdown: %v, want ErrClosed", err)
	}
}

func TestShutdownDeadlineFailsUnacknowledged(t *testing.T) {
	c := newCluster(t)
	release := make(chan struct{})
	defer close(release)
	stallProduce(c, release)
	s := startShipper(t, c, Config{}, nil)
	errCh := make(chan error, 1)
	s.Produce(context.Background(), &kgo.Record{Topic: "t", Value: []byte("x")}, func(_ *kgo.Record, err error) { errCh <- err })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown reported success with an unacknowledged record")
	}
	if err := <-errCh; err == nil {
		t.Fatal("record acknowledged although the broker never answered")
	}
}

// TestProduceWrappedKeepsMetrics sends records through one wrapped promise:
// every acknowledgement reaches the caller and the metrics, and the latency
// runs from each record's timestamp (kgo's produce time when it is zero).
func TestProduceWrappedKeepsMetrics(t *testing.T) {
	c := newCluster(t)
	reg := prometheus.NewRegistry()
	s := startShipper(t, c, Config{}, reg)
	// n records read 2s ago, then n whose timestamp kgo sets at produce.
	const n = 200
	var wg sync.WaitGroup
	var failed atomic.Int64
	p := s.Wrap(func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
		}
		wg.Done()
	})
	latency := func() (uint64, float64) {
		var m dto.Metric
		if err := s.metrics.ackLatency.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	readAt := time.Now().Add(-2 * time.Second)
	for phase := range 2 {
		wg.Add(n)
		for i := range n {
			r := &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i)}
			if phase == 0 {
				r.Timestamp = readAt
			}
			s.ProduceWrapped(context.Background(), r, p)
		}
		wg.Wait()
		// Measured from the produce call, the first phase's samples would
		// sum to a fraction of a second; from a zero timestamp, the second
		// phase's to decades. Each phase has far less than 30s on a
		// loopback fake broker.
		count, sum := latency()
		const samples = n / latencySampling
		switch {
		case phase == 0 && (count != samples || sum < 2*samples || sum > 2*samples+30):
			t.Fatalf("ack latency of records read 2s ago: %d samples, sum %.2fs; want %d, just over %ds", count, sum, samples, 2*samples)
		case phase == 1 && (count != 2*samples || sum > 2*samples+30):
			t.Fatalf("ack latency after records stamped at produce: %d samples, sum %.2fs; want %d, less than %ds", count, sum, 2*samples, 2*samples+30)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if failed.Load() > 0 {
		t.Fatalf("%d records failed", failed.Load())
	}
	if got := testutil.ToFloat64(s.metrics.records.WithLabelValues("t")); got != 2*n {
		t.Fatalf("records metric %v, want %d", got, 2*n)
	}
}

// BenchmarkPromise is the shipper's own cost per acknowledged record: the
// metrics Wrap adds around the caller's function.
func BenchmarkPromise(b *testing.B) {
	s, err := New(Config{Brokers: []string{"127.0.0.1:1"}}, prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	p := s.Wrap(func(*kgo.Record, error) {})
	r := &kgo.Record{Key: []byte("host:/var/log/app.log"), Value: make([]byte, 300), Timestamp: time.Now()}
	for b.Loop() {
		p(r, nil)
	}
}

// TestProduceAuthenticates ships to a broker that requires SASL: with the
// configured user the record is acknowledged; with a wrong password it
// fails with an error the agents retry, since the record itself is fine.
func TestProduceAuthenticates(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "tail", "right"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	produce := func(password string) error {
		cfg := Config{Security: clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-512", Username: "tail", Password: password}},
			DeliveryTimeout: time.Second}
		s := startShipper(t, c, cfg, nil)
		defer s.Close()
		errc := make(chan error, 1)
		s.Produce(context.Background(), &kgo.Record{Topic: "t", Value: []byte("line")}, func(_ *kgo.Record, err error) { errc <- err })
		return <-errc
	}
	if err := produce("right"); err != nil {
		t.Fatalf("authenticated produce: %v", err)
	}
	err = produce("wrong")
	if err == nil {
		t.Fatal("a wrong password produced")
	}
	t.Logf("wrong password: %v (kind %s)", err, Classify(err))
	if !IsRetryable(err) {
		t.Errorf("error %v (kind %s) is permanent: an agent would drop the record for its own misconfiguration", err, Classify(err))
	}
}
