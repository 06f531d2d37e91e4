package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	addCommand("bench", benchProduceCommand)
	addCommand("bench", benchConsumeCommand)
}

func benchProduceCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use: "produce [--topic T] [--records N] [--record-size B] [--partitions P] [--replication-factor R] [--acks all|1|0] " +
			"[--compression C] [--producers K] [--topic-config name=value]... [--broker-metrics URL]",
		Short: "produce records as fast as possible; report throughput and acknowledgement latency",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	var o benchProduceOptions
	f.StringVarP(&o.topic, "topic", "t", "millrace-bench", "topic (created when missing)")
	f.Int64VarP(&o.records, "records", "n", 1_000_000, "records to produce")
	f.IntVar(&o.size, "record-size", 100, "value bytes per record")
	f.IntVarP(&o.partitions, "partitions", "p", 1, "partitions when the topic is created")
	f.IntVarP(&o.replication, "replication-factor", "r", 1, "replication factor when the topic is created")
	f.StringVar(&o.acks, "acks", "1", "all, 1 or 0")
	f.StringVarP(&o.compression, "compression", "z", "none", "zstd, lz4, snappy, gzip or none")
	f.IntVar(&o.producers, "producers", 1, "concurrent producer clients")
	f.DurationVar(&o.linger, "linger", 5*time.Millisecond, "producer linger")
	f.IntVar(&o.batchBytes, "batch-bytes", 1<<20, "producer max batch bytes")
	f.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	f.StringVar(&o.brokerMetrics, "broker-metrics", "", brokerMetricsUsage)
	o.topicConfigs = keyValues{}
	f.Var(o.topicConfigs, "topic-config", "topic config `name=value` when the topic is created, e.g. millrace.flush.on.ack=true (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return benchProduce(cmd.Context(), e, o) }
	return cmd
}

// benchProduceOptions are the flags of bench produce.
type benchProduceOptions struct {
	topic, acks, compression, brokerMetrics              string
	records                                              int64
	size, partitions, replication, producers, batchBytes int
	linger                                               time.Duration
	quiet                                                bool
	topicConfigs                                         keyValues
}

func benchConsumeCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "consume [--topic T] [--records N] [--consumers K] [--broker-metrics URL]",
		Short: "consume records from the beginning as fast as possible; report throughput and poll latency",
		Args:  exactArgs(0),
	}
	f := cmd.Flags()
	var o benchConsumeOptions
	f.StringVarP(&o.topic, "topic", "t", "millrace-bench", "topic to read from the beginning")
	f.Int64VarP(&o.records, "records", "n", 1_000_000, "records to consume")
	f.IntVar(&o.consumers, "consumers", 1, "concurrent consumer clients, in one group")
	f.BoolVar(&o.quiet, "quiet", false, "no progress bar")
	f.StringVar(&o.brokerMetrics, "broker-metrics", "", brokerMetricsUsage)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return benchConsume(cmd.Context(), e, o) }
	return cmd
}

// benchConsumeOptions are the flags of bench consume.
type benchConsumeOptions struct {
	topic, brokerMetrics string
	records              int64
	consumers            int
	quiet                bool
}

// brokerMetricsUsage is the help of both benchmarks' --broker-metrics.
const brokerMetricsUsage = "`URL` of the broker's Prometheus /metrics (millrace broker --metrics-listen); " +
	"prints the broker's CPU time, allocation and GC cycles per record over the run"

// benchProduce writes --records records of --record-size bytes as fast as the
// producers can, like Kafka's producer perf test, and reports throughput and
// per-record acknowledgement latency.
func benchProduce(ctx context.Context, e *env, o benchProduceOptions) error {
	if o.records <= 0 || o.size < 0 || o.producers <= 0 {
		return usageError("--records and --producers must be positive, --record-size not negative")
	}
	if err := ensureTopic(ctx, e, o.topic, o.partitions, o.replication, o.topicConfigs); err != nil {
		return err
	}
	// Unkeyed records under the hash partitioner stick to one partition per
	// batch, as Kafka's default partitioner does: large batches, even spread.
	opts, err := producerOpts(o.acks, o.compression, "hash")
	if err != nil {
		return err
	}
	opts = append(opts, kgo.DefaultProduceTopic(o.topic), kgo.ProducerLinger(o.linger),
		kgo.ProducerBatchMaxBytes(int32(o.batchBytes)), kgo.MaxBufferedRecords(250_000))
	if o.acks != "all" && o.acks != "-1" {
		// Without idempotence kgo keeps one produce request in flight per
		// broker; Kafka's clients default to five, as an idempotent kgo
		// producer does. Ordering across retries does not matter here.
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(5))
	}

	value := make([]byte, o.size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	var (
		done    atomic.Int64
		bytes   atomic.Int64
		hist    latencyHistogram
		errMu   sync.Mutex
		firstEr error
		wg      sync.WaitGroup
	)
	usage, err := startBrokerUsage(ctx, o.brokerMetrics)
	if err != nil {
		return err
	}
	progress := startProgress(e.stderr, o.quiet, "produce", o.records, &done)
	start := time.Now()
	per := o.records / int64(o.producers)
	for i := 0; i < o.producers; i++ {
		n := per
		if i == 0 {
			n += o.records % int64(o.producers)
		}
		cl, err := e.newClient(opts...)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for j := int64(0); j < n && ctx.Err() == nil; j++ {
				sent := time.Now()
				cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
					if err != nil {
						errMu.Lock()
						if firstEr == nil {
							firstEr = err
						}
						errMu.Unlock()
						return
					}
					hist.record(time.Since(sent))
					bytes.Add(int64(len(r.Value)))
					done.Add(1)
				})
			}
			cl.Flush(ctx)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	progress()
	if firstEr != nil {
		return fmt.Errorf("produce: %w", firstEr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	printSummary(e.stdout, "produce", done.Load(), bytes.Load(), elapsed, &hist, "ack latency")
	return usage.report(ctx, e.stdout, done.Load())
}

// benchConsume reads --records records from the beginning of the topic and
// reports throughput and how long each poll took.
func benchConsume(ctx context.Context, e *env, o benchConsumeOptions) error {
	if o.records <= 0 || o.consumers <= 0 {
		return usageError("--records and --consumers must be positive")
	}
	opts := []kgo.Opt{kgo.ConsumeTopics(o.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Larger fetches cost the client more (page faults on huge
		// buffers) than they save in round trips.
		kgo.FetchMaxBytes(16 << 20), kgo.FetchMaxPartitionBytes(4 << 20)}
	if o.consumers > 1 {
		opts = append(opts, kgo.ConsumerGroup(fmt.Sprintf("millrace-bench-%d", time.Now().UnixNano())), kgo.DisableAutoCommit())
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		done  atomic.Int64
		bytes atomic.Int64
		hist  latencyHistogram
		wg    sync.WaitGroup
		errMu sync.Mutex
		ferr  error
	)
	usage, err := startBrokerUsage(ctx, o.brokerMetrics)
	if err != nil {
		return err
	}
	progress := startProgress(e.stderr, o.quiet, "consume", o.records, &done)
	start := time.Now()
	for i := 0; i < o.consumers; i++ {
		cl, err := e.newClient(opts...)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for ctx.Err() == nil {
				polled := time.Now()
				fetches := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return
				}
				fetches.EachError(func(t string, p int32, err error) {
					errMu.Lock()
					if ferr == nil {
						ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
					}
					errMu.Unlock()
					cancel()
				})
				var n, b int64
				fetches.EachRecord(func(r *kgo.Record) { n++; b += int64(len(r.Value) + len(r.Key)) })
				if n > 0 {
					hist.record(time.Since(polled))
				}
				bytes.Add(b)
				if done.Add(n) >= o.records {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	progress()
	if ferr != nil {
		return ferr
	}
	if done.Load() < o.records {
		return fmt.Errorf("interrupted after %d of %d records", done.Load(), o.records)
	}
	printSummary(e.stdout, "consume", done.Load(), bytes.Load(), elapsed, &hist, "poll latency")
	// ctx is cancelled once every record is in: scrape under the caller's.
	return usage.report(parent, e.stdout, done.Load())
}

// ensureTopic creates the topic with configs unless it exists (an existing
// topic keeps its own configs).
func ensureTopic(ctx context.Context, e *env, topic string, partitions, replication int, configs map[string]string) error {
	adm, done, err := e.newAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	var topicConfigs map[string]*string
	for name, value := range configs {
		if topicConfigs == nil {
			topicConfigs = map[string]*string{}
		}
		topicConfigs[name] = &value
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), int16(replication), topicConfigs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	// In a cluster, brokers learn of a new topic a moment after it is
	// created, and a leader named in the metadata serves its partition a
	// moment after that; producing before then would stall the client on
	// its metadata refresh and spoil the measurement, and listing offsets
	// would fail with UNKNOWN_TOPIC_OR_PARTITION.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := topicServed(ctx, adm, topic)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s is not served after 30s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// topicServed is nil once every partition of topic has a leader in the
// metadata and answers ListOffsets.
func topicServed(ctx context.Context, adm *kadm.Client, topic string) error {
	topics, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = topics.Error()
	}
	if err != nil {
		return err
	}
	if len(topics[topic].Partitions) == 0 {
		return errors.New("no partitions in the metadata yet")
	}
	for _, p := range topics[topic].Partitions {
		if p.Leader < 0 || p.Err != nil {
			return fmt.Errorf("partition %d has no leader yet", p.Partition)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	return err
}

// startProgress draws a progress bar on w until the returned stop is called.
func startProgress(w io.Writer, quiet bool, what string, total int64, done *atomic.Int64) (stop func()) {
	if quiet {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		start := time.Now()
		for {
			n := done.Load()
			frac := math.Min(1, float64(n)/float64(total))
			bar := strings.Repeat("=", int(frac*30)) + strings.Repeat(" ", 30-int(frac*30))
			rate := float64(n) / math.Max(time.Since(start).Seconds(), 1e-3)
			fmt.Fprintf(w, "\r%s [%s] %5.1f%% %d/%d  %.0f rec/s ", what, bar, 100*frac, n, total, rate)
			select {
			case <-quit:
				fmt.Fprintln(w)
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

func printSummary(w io.Writer, what string, n, bytes int64, elapsed time.Duration, h *latencyHistogram, latencyName string) {
	secs := elapsed.Seconds()
	fmt.Fprintf(w, "%s: %d records, %.1f MB in %.2fs: %.0f records/s, %.1f MB/s; %s p50 %s p99 %s p999 %s max %s\n",
		what, n, float64(bytes)/1e6, secs, float64(n)/secs, float64(bytes)/1e6/secs, latencyName,
		h.quantile(0.50), h.quantile(0.99), h.quantile(0.999), h.max())
}

// latencyHistogram counts durations in logarithmic buckets 5% wide, from 1µs
// to about 30 minutes: constant memory for any number of records, quantiles
// within 5%. Lock-free, since every acknowledged record is recorded.
type latencyHistogram struct {
	buckets [450]atomic.Int64
	count   atomic.Int64
	maxSeen atomic.Int64 // nanoseconds
}

const bucketGrowth = 1.05

func (h *latencyHistogram) record(d time.Duration) {
	i := 0
	if us := float64(d) / float64(time.Microsecond); us > 1 {
		i = min(int(math.Log(us)/math.Log(bucketGrowth)), len(h.buckets)-1)
	}
	h.buckets[i].Add(1)
	h.count.Add(1)
	for {
		m := h.maxSeen.Load()
		if int64(d) <= m || h.maxSeen.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *latencyHistogram) quantile(q float64) time.Duration {
	count := h.count.Load()
	if count == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(count)))
	var seen int64
	for i := range h.buckets {
		if seen += h.buckets[i].Load(); seen >= rank {
			d := time.Duration(math.Pow(bucketGrowth, float64(i+1)) * float64(time.Microsecond))
			return roundSignificant(min(d, h.max()))
		}
	}
	return h.max()
}

func (h *latencyHistogram) max() time.Duration {
	return roundSignificant(time.Duration(h.maxSeen.Load()))
}

// roundSignificant keeps three significant digits (266ms, 1.23ms), all the
// precision the 5% buckets have.
func roundSignificant(d time.Duration) time.Duration {
	unit := time.Duration(1)
	for d >= unit*1000 {
		unit *= 10
	}
	return d.Round(unit)
}
