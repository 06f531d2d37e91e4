package cli

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { addCommand("bench", benchLatencyCommand) }

func benchLatencyCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use: "latency [--rate R] [--duration D] [--warmup W] [--record-size B] [--keys K] [--partitions P] [--acks all|1|0] " +
			"[--producers N] [--consumers N] [--compare ADDR] [--runs N]",
		Short: "produce at a fixed rate while consuming; report produce-ack and end-to-end latency percentiles",
		Long: `Producers send --rate records/s in total for --warmup then --duration while
consumers read the topic from its end as records arrive. Every record carries,
in the first 8 bytes of its value, the moment it was due by the fixed schedule;
produce-ack latency runs from then to the acknowledgement, end-to-end latency
from then to the consumer's delivery. Counting from the schedule rather than
from the send means a producer held up by a slow broker counts the wait
(no coordinated omission). Records due in the warm-up are produced and consumed
but not counted. "send lag" is how late the client itself sent records: when
it comes close to the latencies, the client's machine set them, not the broker.
With --compare ADDR the same load runs against that Kafka
address too, alternating (this, other, this, ...) for --runs rounds, and the
medians of the runs' percentiles are printed side by side.
The client collects garbage only when its heap reaches 1 GiB, so that its own
collections do not set the latencies it measures; GOGC or GOMEMLIMIT in the
environment override that.`,
		Args: exactArgs(0),
	}
	f := cmd.Flags()
	var o benchLatencyOptions
	f.StringVarP(&o.topic, "topic", "t", "millrace-latency", "topic (created when missing; each run reads from its end)")
	f.Float64Var(&o.rate, "rate", 10_000, "records per second, all producers together")
	f.DurationVar(&o.duration, "duration", 60*time.Second, "measured time of each run, after the warm-up")
	f.DurationVar(&o.warmup, "warmup", 10*time.Second, "time at the start of each run whose records are not counted")
	f.IntVar(&o.size, "record-size", 100, "value bytes per record (at least 8: the due time travels in the value)")
	f.IntVar(&o.keys, "keys", 0, "distinct keys, spread over the records in turn (0: no keys)")
	f.IntVarP(&o.partitions, "partitions", "p", 1, "partitions when the topic is created")
	f.IntVarP(&o.replication, "replication-factor", "r", 1, "replication factor when the topic is created")
	f.StringVar(&o.acks, "acks", "all", "all, 1 or 0 (with 0 there is no acknowledgement to time)")
	f.StringVarP(&o.compression, "compression", "z", "none", "zstd, lz4, snappy, gzip or none")
	f.IntVar(&o.producers, "producers", 1, "producer clients, each sending --rate/--producers records/s")
	f.IntVar(&o.consumers, "consumers", 1, "consumer clients, each reading its share of the partitions")
	f.DurationVar(&o.linger, "linger", 0, "producer linger (0: send as soon as a request may go)")
	f.StringVar(&o.compare, "compare", "", "another Kafka `address` to run the same load against, alternating runs (same TLS/SASL flags)")
	f.IntVar(&o.runs, "runs", 1, "runs against each address; with several the medians are printed")
	f.BoolVar(&o.quiet, "quiet", false, "no progress line")
	o.topicConfigs = keyValues{}
	f.Var(o.topicConfigs, "topic-config", "topic config `name=value` when the topic is created (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return benchLatency(cmd.Context(), e, o) }
	return cmd
}

// benchHeapLimit is the heap at which bench latency's client collects
// garbage (see quietCollector).
const benchHeapLimit = 1 << 30

// quietCollector keeps the client's own garbage collection out of the
// latencies it measures. franz-go allocates a few hundred bytes per record
// sent and received, and the client's live heap is a few MiB, so with the
// default GOGC it collects 20–30 times a second at 50,000 records/s, each
// time taking a quarter of the cores and stalling sends for milliseconds.
// Collecting only when the heap reaches benchHeapLimit makes that a few
// times a minute. GOGC or GOMEMLIMIT in the environment take precedence.
func quietCollector() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(benchHeapLimit)
}

// benchLatencyOptions are the flags of bench latency.
type benchLatencyOptions struct {
	topic, acks, compression, compare string
	rate                              float64
	duration, warmup, linger          time.Duration
	size, keys, partitions, replication,
	producers, consumers, runs int
	quiet        bool
	topicConfigs keyValues
}

// stampBytes is the size of the due time at the head of every value.
const stampBytes = 8

// drainTimeout bounds how long consumers may take, once the producers are
// done, to read every acknowledged record before the run fails.
const drainTimeout = 30 * time.Second

func (o benchLatencyOptions) validate() error {
	switch {
	case !(o.rate > 0) || math.IsInf(o.rate, 0):
		return usageError("--rate must be a positive number of records per second")
	case o.duration <= 0 || o.warmup < 0:
		return usageError("--duration must be positive and --warmup not negative")
	case o.size < stampBytes:
		return usageError("--record-size must be at least %d: the due time travels in the value", stampBytes)
	case o.keys < 0 || o.partitions <= 0 || o.replication <= 0 || o.producers <= 0 || o.consumers <= 0 || o.runs <= 0:
		return usageError("--keys must not be negative; --partitions, --replication-factor, --producers, --consumers and --runs must be positive")
	case o.rate*(o.warmup+o.duration).Seconds() < 1:
		return usageError("--rate × (--warmup + --duration) is less than one record")
	}
	return nil
}

// benchLatency runs the fixed-rate load --runs times against -b (and, with
// --compare, alternately against the other address) and prints each run and,
// for several runs, the medians.
func benchLatency(ctx context.Context, e *env, o benchLatencyOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	quietCollector()
	targets := []*env{e}
	if o.compare != "" {
		other := *e.client
		other.brokers = o.compare
		targets = append(targets, &env{stdin: e.stdin, stdout: e.stdout, stderr: e.stderr, client: &other})
	}
	for _, t := range targets {
		if err := ensureTopic(ctx, t, o.topic, o.partitions, o.replication, o.topicConfigs); err != nil {
			return err
		}
	}
	results := make([][]latencyRun, len(targets))
	for run := 1; run <= o.runs; run++ {
		for i, t := range targets {
			r, err := runLatency(ctx, t, o)
			if err != nil {
				return fmt.Errorf("run %d against %s: %w", run, t.client.brokers, err)
			}
			r.printRun(e.stdout, run, o)
			results[i] = append(results[i], r)
		}
	}
	if len(targets) > 1 || o.runs > 1 {
		printMedians(e.stdout, results)
	}
	return nil
}

// latencyRun is what one run measured against one address.
type latencyRun struct {
	target          string
	partitions      int   // of the topic as found, which an existing topic decides
	acked, consumed int64 // counted records (due after the warm-up)
	measured        time.Duration
	ack, endToEnd   latencyQuantiles
	sendLag         latencyQuantiles // how late the client sent records: its own stalls
}

// latencyQuantiles are the percentiles the report shows.
type latencyQuantiles struct{ p50, p99, p999, max time.Duration }

// runLatency produces at the fixed rate for warm-up + duration, waits for
// the consumers to read every acknowledged record, and measures.
func runLatency(ctx context.Context, e *env, o benchLatencyOptions) (latencyRun, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	produceOpts, err := producerOpts(o.acks, o.compression, "hash")
	if err != nil {
		return latencyRun{}, err
	}
	produceOpts = append(produceOpts, kgo.DefaultProduceTopic(o.topic), kgo.ProducerLinger(o.linger))

	// Consumers start at the end offsets listed before the first send, so
	// they read exactly this run's records.
	adm, closeAdmin, err := e.newAdmin(ctx)
	if err != nil {
		return latencyRun{}, err
	}
	ends, err := adm.ListEndOffsets(ctx, o.topic)
	closeAdmin()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return latencyRun{}, fmt.Errorf("list end offsets of %s: %w", o.topic, err)
	}
	starts := make([]map[int32]kgo.Offset, o.consumers)
	ends.Each(func(l kadm.ListedOffset) {
		i := int(l.Partition) % o.consumers
		if starts[i] == nil {
			starts[i] = map[int32]kgo.Offset{}
		}
		starts[i][l.Partition] = kgo.NewOffset().At(l.Offset)
	})

	var (
		ack, endToEnd       = newLatencyRecorder(), newLatencyRecorder()
		sendLag             = newLatencyRecorder()
		sent, acked         atomic.Int64 // all records
		consumed            atomic.Int64 // all records
		countedAcked        atomic.Int64
		countedConsumed     atomic.Int64
		errMu               sync.Mutex
		runErr              error // guarded by errMu
		producers, readers  sync.WaitGroup
		consumeCtx, stopAll = context.WithCancel(ctx)
	)
	defer stopAll()
	fail := func(err error) {
		errMu.Lock()
		if runErr == nil {
			runErr = err
		}
		errMu.Unlock()
		cancel()
		stopAll()
	}
	failed := func() error {
		errMu.Lock()
		defer errMu.Unlock()
		return runErr
	}
	base := time.Now() // every stamp is monotonic time since base
	warmup := o.warmup
	total := o.warmup + o.duration

	for _, partitions := range starts {
		if partitions == nil {
			continue
		}
		cl, err := e.newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: partitions}),
			kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(4<<20))
		if err != nil {
			fail(err)
			break
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer cl.Close()
			var batch []time.Duration
			for consumeCtx.Err() == nil {
				fetches := cl.PollFetches(consumeCtx)
				delivered := time.Since(base)
				if consumeCtx.Err() != nil {
					return
				}
				fetches.EachError(func(t string, p int32, err error) { fail(fmt.Errorf("fetch %s/%d: %w", t, p, err)) })
				batch = batch[:0]
				var n int64
				fetches.EachRecord(func(r *kgo.Record) {
					n++
					if due := readStamp(r.Value); due >= warmup {
						batch = append(batch, delivered-due)
					}
				})
				endToEnd.record(batch...)
				countedConsumed.Add(int64(len(batch)))
				consumed.Add(n)
			}
		}()
	}

	perProducer := o.rate / float64(o.producers)
	for k := 0; k < o.producers && ctx.Err() == nil; k++ {
		cl, err := e.newClient(produceOpts...)
		if err != nil {
			fail(err)
			break
		}
		// Producers start a fraction of an interval apart so their
		// records interleave instead of arriving in lockstep.
		p := newPacer(perProducer, time.Duration(float64(k)/o.rate*float64(time.Second)))
		n := p.dueBy(total - 1)
		producers.Add(1)
		// Records and their values are reused once acknowledged, and one
		// promise serves them all (it reads the due time back from the
		// value): at these rates allocation per record would otherwise run
		// the client's collector many times a second.
		records := sync.Pool{New: func() any {
			value := make([]byte, o.size)
			for i := stampBytes; i < len(value); i++ {
				value[i] = 'a' + byte(i%26)
			}
			return &kgo.Record{Value: value}
		}}
		promise := func(r *kgo.Record, err error) {
			due := readStamp(r.Value)
			*r = kgo.Record{Key: r.Key[:0], Value: r.Value}
			records.Put(r)
			if err != nil {
				fail(fmt.Errorf("produce: %w", err))
				return
			}
			acked.Add(1)
			if due >= warmup {
				ack.record(time.Since(base) - due)
				countedAcked.Add(1)
			}
		}
		go func() {
			defer producers.Done()
			defer cl.Close()
			p.run(ctx, base, n, func(i int64, due time.Duration) {
				r := records.Get().(*kgo.Record)
				binary.BigEndian.PutUint64(r.Value, uint64(due))
				if o.keys > 0 {
					r.Key = strconv.AppendInt(r.Key, (i*int64(o.producers)+int64(k))%int64(o.keys), 10)
				}
				if due >= warmup {
					sendLag.record(time.Since(base) - due)
				}
				sent.Add(1)
				cl.Produce(ctx, r, promise)
			})
			if err := cl.Flush(ctx); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("flush: %w", err))
			}
		}()
	}

	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	if !o.quiet {
		progress.Add(1)
		go func() {
			defer progress.Done()
			printProgress(e.stderr, e.client.brokers, base, total, &sent, &acked, &consumed, endToEnd, progressDone)
		}()
	}
	producers.Wait()
	// With acks=0 nothing is acknowledged: every sent record counts.
	want := acked.Load()
	if o.acks == "0" {
		want = sent.Load()
	}
	deadline := time.NewTimer(drainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for failed() == nil && consumed.Load() < want {
		select {
		case <-consumeCtx.Done():
		case <-deadline.C:
			fail(fmt.Errorf("consumers read %d of %d records within %s of the last send", consumed.Load(), want, drainTimeout))
		case <-tick.C:
		}
		if consumeCtx.Err() != nil {
			break
		}
	}
	stopAll()
	readers.Wait()
	close(progressDone)
	progress.Wait()
	if err := failed(); err != nil {
		return latencyRun{}, err
	}
	if err := ctx.Err(); err != nil {
		return latencyRun{}, err
	}
	return latencyRun{
		target: e.client.brokers, partitions: len(ends[o.topic]), acked: countedAcked.Load(), consumed: countedConsumed.Load(),
		measured: o.duration, ack: ack.quantiles(), endToEnd: endToEnd.quantiles(),
		sendLag: sendLag.quantiles(),
	}, nil
}

// readStamp returns the due time a producer wrote at the head of the value.
func readStamp(value []byte) time.Duration {
	if len(value) < stampBytes {
		return -1
	}
	return time.Duration(binary.BigEndian.Uint64(value))
}

// pacer spaces records evenly: record i is due at offset + i/rate. Sending
// whatever is due at each wake-up keeps the long-run rate exact however late
// the timer fires, and stamping each record with its due time (not the send)
// charges a late send to the latency, as an open-loop load generator must.
type pacer struct {
	interval float64 // nanoseconds between records
	offset   time.Duration
}

func newPacer(rate float64, offset time.Duration) pacer {
	return pacer{interval: float64(time.Second) / rate, offset: offset}
}

// due is when record i is due, since the run's start.
func (p pacer) due(i int64) time.Duration {
	return p.offset + time.Duration(float64(i)*p.interval)
}

// run calls send for records 0..n-1 in order, none before it is due
// (measured from base), sleeping until the next is due and sending every
// record due at each wake-up, until done or ctx ends.
func (p pacer) run(ctx context.Context, base time.Time, n int64, send func(i int64, due time.Duration)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for next := int64(0); next < n && ctx.Err() == nil; {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		for upTo := min(p.dueBy(time.Since(base)), n); next < upTo; next++ {
			send(next, p.due(next))
		}
		if next < n {
			timer.Reset(p.due(next) - time.Since(base))
		}
	}
}

// dueBy is how many records are due at elapsed (records 0..dueBy-1).
func (p pacer) dueBy(elapsed time.Duration) int64 {
	if elapsed < p.offset {
		return 0
	}
	return int64(float64(elapsed-p.offset)/p.interval) + 1
}

// latencyRecorder is an HDR histogram (1µs to 1 minute, 3 significant
// digits: values within 0.1%) for the whole run, and one for the last second
// for the progress line.
type latencyRecorder struct {
	mu       sync.Mutex // guards the following
	total    *hdrhistogram.Histogram
	interval *hdrhistogram.Histogram
}

func newLatencyRecorder() *latencyRecorder {
	newHist := func() *hdrhistogram.Histogram {
		return hdrhistogram.New(int64(time.Microsecond), int64(time.Minute), 3)
	}
	return &latencyRecorder{total: newHist(), interval: newHist()}
}

func (r *latencyRecorder) record(ds ...time.Duration) {
	if len(ds) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range ds {
		// Out of range values are clamped: a minute-long stall still
		// shows as the max rather than vanishing.
		v := min(max(int64(d), 0), r.total.HighestTrackableValue())
		// Within range RecordValue cannot fail.
		_ = r.total.RecordValue(v)
		_ = r.interval.RecordValue(v)
	}
}

func quantilesOf(h *hdrhistogram.Histogram) latencyQuantiles {
	if h.TotalCount() == 0 {
		return latencyQuantiles{}
	}
	return latencyQuantiles{
		p50:  time.Duration(h.ValueAtQuantile(50)),
		p99:  time.Duration(h.ValueAtQuantile(99)),
		p999: time.Duration(h.ValueAtQuantile(99.9)),
		max:  time.Duration(h.Max()),
	}
}

func (r *latencyRecorder) quantiles() latencyQuantiles {
	r.mu.Lock()
	defer r.mu.Unlock()
	return quantilesOf(r.total)
}

// takeInterval returns the last interval's quantiles and starts a new one.
func (r *latencyRecorder) takeInterval() (latencyQuantiles, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, n := quantilesOf(r.interval), r.interval.TotalCount()
	r.interval.Reset()
	return q, n
}

// printProgress writes one line a second until done.
func printProgress(w io.Writer, target string, base time.Time, total time.Duration, sent, acked, consumed *atomic.Int64,
	endToEnd *latencyRecorder, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastSent int64
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		// Loaded in this order so that no count shows more acknowledged
		// than sent.
		c, a, s := consumed.Load(), acked.Load(), sent.Load()
		q, n := endToEnd.takeInterval()
		fmt.Fprintf(w, "%s %3.0fs/%.0fs: sent %d (%d/s) acked %d consumed %d; last second end-to-end p50 %s p99 %s max %s (%d counted)\n",
			target, time.Since(base).Seconds(), total.Seconds(), s, s-lastSent, a, c,
			roundSignificant(q.p50), roundSignificant(q.p99), roundSignificant(q.max), n)
		lastSent = s
	}
}

// printRun writes one run's result.
func (r latencyRun) printRun(w io.Writer, run int, o benchLatencyOptions) {
	fmt.Fprintf(w, "run %d against %s: %g records/s of %d B, %d partition(s), acks=%s, %d producer(s), %s measured after %s warm-up: %d acked (%.0f/s), %d consumed\n",
		run, r.target, o.rate, o.size, r.partitions, o.acks, o.producers, o.duration, o.warmup,
		r.acked, float64(r.acked)/r.measured.Seconds(), r.consumed)
	ack := r.ack.String()
	if o.acks == "0" {
		ack = "none: with acks=0 the client calls a record done once it is written"
	}
	fmt.Fprintf(w, "  produce-ack  %s\n  end-to-end   %s\n  send lag     %s\n", ack, r.endToEnd, r.sendLag)
}

func (q latencyQuantiles) String() string {
	return fmt.Sprintf("p50 %s p99 %s p99.9 %s max %s",
		roundSignificant(q.p50), roundSignificant(q.p99), roundSignificant(q.p999), roundSignificant(q.max))
}

// printMedians writes, per address, the median over its runs of each
// percentile, addresses side by side.
func printMedians(w io.Writer, results [][]latencyRun) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "medians of %d run(s)", len(results[0]))
	for _, runs := range results {
		fmt.Fprintf(tw, "\t%s", runs[0].target)
	}
	fmt.Fprintln(tw)
	rows := []struct {
		name string
		pick func(latencyRun) time.Duration
	}{
		{"produce-ack p50", func(r latencyRun) time.Duration { return r.ack.p50 }},
		{"produce-ack p99", func(r latencyRun) time.Duration { return r.ack.p99 }},
		{"produce-ack p99.9", func(r latencyRun) time.Duration { return r.ack.p999 }},
		{"produce-ack max", func(r latencyRun) time.Duration { return r.ack.max }},
		{"end-to-end p50", func(r latencyRun) time.Duration { return r.endToEnd.p50 }},
		{"end-to-end p99", func(r latencyRun) time.Duration { return r.endToEnd.p99 }},
		{"end-to-end p99.9", func(r latencyRun) time.Duration { return r.endToEnd.p999 }},
		{"end-to-end max", func(r latencyRun) time.Duration { return r.endToEnd.max }},
		{"send lag p99", func(r latencyRun) time.Duration { return r.sendLag.p99 }},
		{"send lag max", func(r latencyRun) time.Duration { return r.sendLag.max }},
	}
	for _, row := range rows {
		fmt.Fprint(tw, row.name)
		for _, runs := range results {
			values := make([]time.Duration, len(runs))
			for i, r := range runs {
				values[i] = row.pick(r)
			}
			fmt.Fprintf(tw, "\t%s", roundSignificant(median(values)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// median of values; the mean of the middle two for an even count.
func median(values []time.Duration) time.Duration {
	s := slices.Clone(values)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
