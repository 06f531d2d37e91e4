package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/intake"
	"millrace/agents/ship"
	"millrace/internal/clientauth"
	"millrace/pipeline/monitor"
)

// A standalone agent or sink publishes its own metrics to the ops topic as
// `millrace up` does (intake.Publisher: one record per component and
// interval), so `millrace top` and the console list it beside the
// appliance's parts. Its source names the process: host:tail:<name>,
// host:sink:<group>.

// opsOptions are the self-monitoring flags of a standalone process.
type opsOptions struct {
	topic, source string
	interval      time.Duration
}

// addOpsFlags declares the self-monitoring flags.
func addOpsFlags(f *pflag.FlagSet, o *opsOptions) {
	f.StringVar(&o.topic, "ops-metrics-topic", monitor.DefaultMetricsTopic, "topic this process publishes its own metrics to, for top and the console")
	f.DurationVar(&o.interval, "ops-metrics-interval", 10*time.Second, "time between publications of its own metrics (0 turns them off)")
	f.StringVar(&o.source, "ops-metrics-source", "", "name of this process in top and the console (default HOST:KIND:NAME; give one per process when several share a host and name)")
}

// source is the process's name on the ops topic: the --ops-metrics-source
// flag, else host:kind:name.
func (o opsOptions) sourceFor(kind, name string) string {
	if o.source != "" {
		return o.source
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + ":" + kind + ":" + name
}

// startOpsMetrics publishes reg's metrics every interval until the
// returned stop is called (which waits for the publisher and closes its
// producer). The producer is its own, with metrics of its own that are not
// published, so the process's ship counters count only its data. A zero
// interval publishes nothing.
func startOpsMetrics(o opsOptions, reg prometheus.Gatherer, brokers []string, security clientauth.Settings, source string, logger *slog.Logger) (stop func(), err error) {
	if o.interval <= 0 {
		return func() {}, nil
	}
	logger = logger.With("component", "ops-metrics", "topic", o.topic)
	producer, err := ship.New(ship.Config{Brokers: brokers, Security: security, ClientID: "millrace-ops-metrics",
		Compression: "zstd", Linger: 50 * time.Millisecond, MaxBufferedBytes: 4 << 20},
		prometheus.NewRegistry(), logger)
	if err != nil {
		return nil, fmt.Errorf("ops metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := producer.Start(ctx); err != nil {
		cancel()
		producer.Close()
		return nil, fmt.Errorf("ops metrics: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ensureOpsTopic(ctx, o.topic, brokers, security, logger)
		p := &intake.Publisher{Gatherer: reg, Producer: producer, Topic: o.topic, Source: source, Interval: o.interval, Logger: logger}
		// A first publication at once, so a short-lived process shows up.
		if err := p.PublishOnce(ctx, time.Now()); err != nil {
			logger.Warn("publishing ops metrics failed", "err", err)
		}
		p.Run(ctx)
	}()
	logger.Info("publishing own metrics", "source", source, "interval", o.interval)
	return func() {
		cancel()
		wg.Wait()
		shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		producer.Shutdown(shutdownCtx)
	}, nil
}

// ensureOpsTopic creates the ops topic when it is missing (one partition,
// the broker's replication factor), so self-monitoring works against a
// broker that does not create topics on demand. A failure is logged: the
// process's work does not depend on it.
func ensureOpsTopic(ctx context.Context, topic string, brokers []string, security clientauth.Settings, logger *slog.Logger) {
	opts, err := security.Opts()
	if err != nil {
		logger.Warn("ops metrics topic not checked", "err", err)
		return
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(brokers...), kgo.ClientID("millrace-ops-metrics"))...)
	if err != nil {
		logger.Warn("ops metrics topic not checked", "err", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) && ctx.Err() == nil {
		logger.Warn("ops metrics topic not created", "err", err)
	}
}
