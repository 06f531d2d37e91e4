package tier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Delayed remote fetch. A Fetch whose offset is below the local log start
// does not read remote storage on its own goroutine: it submits the read to
// a ReadPool, a bounded set of reader goroutines with a bounded queue
// (Kafka's remote.log.reader.threads and remote.log.reader.max.pending.tasks),
// and answers when the read completes or when ReadPoolConfig.MaxWait has
// passed (Kafka's DelayedRemoteFetch, with remote.fetch.max.wait.ms of
// KIP-1018), with no records for a read still running. The read goes on and
// fills the chunk cache, so the consumer's next Fetch finds it there. A
// store that stops answering therefore costs a consumer of old data empty
// answers, and never holds the local partitions of the same Fetch, or the
// Fetches after it on the connection, longer than MaxWait.

// ReadPoolConfig configures a ReadPool; zero fields take the defaults.
type ReadPoolConfig struct {
	// Threads is the number of reader goroutines (Kafka's
	// remote.log.reader.threads); default 10.
	Threads int
	// MaxPending is the number of reads that may wait for a goroutine
	// (remote.log.reader.max.pending.tasks); default 100. A read beyond
	// it is refused, and its Fetch answers with no records after MaxWait.
	MaxPending int
	// MaxWait is how long a Fetch waits for its remote reads
	// (remote.fetch.max.wait.ms, KIP-1018); default 500 ms.
	MaxWait time.Duration
	// MaxReadBytes bounds the bytes one read returns, whatever the Fetch
	// asked for (the first batch is still returned whole), so the memory
	// of the reads in flight is bounded; default 8 MiB.
	MaxReadBytes int
	// ReadTimeout bounds one read, after which its goroutine takes the
	// next; default 30 s.
	ReadTimeout time.Duration
}

// Defaults of ReadPoolConfig.
const (
	DefaultReaderThreads = 10
	DefaultMaxPending    = 100
	DefaultRemoteMaxWait = 500 * time.Millisecond
	DefaultMaxReadBytes  = 8 << 20
	DefaultReadTimeout   = 30 * time.Second
)

// Validate rejects negative values.
func (c ReadPoolConfig) Validate() error {
	var errs []error
	if c.Threads < 0 {
		errs = append(errs, fmt.Errorf("tier: remote.log.reader.threads %d must not be negative", c.Threads))
	}
	if c.MaxPending < 0 {
		errs = append(errs, fmt.Errorf("tier: remote.log.reader.max.pending.tasks %d must not be negative", c.MaxPending))
	}
	if c.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("tier: remote.fetch.max.wait.ms %v must not be negative", c.MaxWait))
	}
	if c.MaxReadBytes < 0 || c.ReadTimeout < 0 {
		errs = append(errs, fmt.Errorf("tier: a remote read limit of %d bytes or %v must not be negative", c.MaxReadBytes, c.ReadTimeout))
	}
	return errors.Join(errs...)
}

func (c ReadPoolConfig) withDefaults() ReadPoolConfig {
	if c.Threads == 0 {
		c.Threads = DefaultReaderThreads
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultRemoteMaxWait
	}
	if c.MaxReadBytes == 0 {
		c.MaxReadBytes = DefaultMaxReadBytes
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	return c
}

// ReadPool runs remote reads on a bounded set of goroutines. Start it with
// NewReadPool; Close stops it and waits for its goroutines.
type ReadPool struct {
	reader Reader
	cfg    ReadPoolConfig
	queue  chan *PendingRead
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards closed, so Submit never sends on a closed queue
	closed bool

	// Kafka's RemoteFetchRequestsPerSec, RemoteFetchErrorsPerSec and the
	// read latency, as Prometheus metrics.
	reads, refused, failed prometheus.Counter
	latency                prometheus.Histogram
}

// PendingRead is a read submitted to a ReadPool.
type PendingRead struct {
	req    ReadRequest
	notify chan<- struct{}
	done   chan struct{}
	// Set before done is closed.
	batches Batches
	err     error
}

// Done is closed when the read has completed.
func (r *PendingRead) Done() <-chan struct{} { return r.done }

// Result is the read's answer; call it after Done is closed.
func (r *PendingRead) Result() (Batches, error) { return r.batches, r.err }

// NewReadPool starts cfg.Threads goroutines reading through reader. reg,
// when not nil, receives its metrics: reads, refused and failed reads, and
// the time reads take.
func NewReadPool(reader Reader, cfg ReadPoolConfig, reg prometheus.Registerer) (*ReadPool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &ReadPool{
		reader: reader, cfg: cfg, queue: make(chan *PendingRead, cfg.MaxPending),
		reads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_remote_reads_total", Help: "Fetch reads of tiered segments run on the remote reader threads (the remote fetch rate).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_remote_reads_refused_total", Help: "Fetch reads of tiered segments refused because remote.log.reader.max.pending.tasks reads were waiting.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_remote_read_errors_total", Help: "Fetch reads of tiered segments that failed.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "millrace_remote_read_duration_seconds", Help: "Time a fetch read of a tiered segment took on its reader thread, chunk cache hits included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{p.reads, p.refused, p.failed, p.latency} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("tier: registering the remote read metrics: %w", err)
			}
		}
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(cfg.Threads)
	for range cfg.Threads {
		go func() {
			defer p.wg.Done()
			p.work()
		}()
	}
	return p, nil
}

// MaxWait is how long a Fetch waits for its remote reads.
func (p *ReadPool) MaxWait() time.Duration { return p.cfg.MaxWait }

// Submit queues a read, its MaxBytes capped at MaxReadBytes. When the read
// completes, notify (when not nil) gets a value if it has room: one
// buffered channel serves all of a Fetch's reads. It returns false, and no
// read, when the queue is full or the pool closed.
func (p *ReadPool) Submit(req ReadRequest, notify chan<- struct{}) (*PendingRead, bool) {
	req.MaxBytes = min(req.MaxBytes, p.cfg.MaxReadBytes)
	r := &PendingRead{req: req, notify: notify, done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	select {
	case p.queue <- r:
		return r, true
	default:
		p.refused.Inc()
		return nil, false
	}
}

// OffsetForTimestamp runs the reader's search by timestamp for a
// ListOffsets, bounded by ctx and by ReadTimeout (Kafka's
// remote.list.offsets.request.timeout.ms has the same 30 s default). It
// runs on the caller's goroutine, not the pool's: a ListOffsets has
// nothing to answer without it, and its chunks stay in the cache when it
// times out, for the client's retry.
func (p *ReadPool) OffsetForTimestamp(ctx context.Context, topic string, partition int32, ts int64) (TimestampOffset, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReadTimeout)
	defer cancel()
	return p.reader.OffsetForTimestamp(ctx, topic, partition, ts)
}

// EpochAt runs the reader's EpochAt on the caller's goroutine, bounded by
// ctx and by MaxWait: ListOffsets earliest, which every consumer resetting
// to the start sends, answers its offset without the epoch rather than
// wait longer on a slow store.
func (p *ReadPool) EpochAt(ctx context.Context, topic string, partition int32, offset int64) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.MaxWait)
	defer cancel()
	return p.reader.EpochAt(ctx, topic, partition, offset)
}

func (p *ReadPool) work() {
	for r := range p.queue {
		if p.ctx.Err() != nil {
			r.finish(Batches{}, p.ctx.Err())
			continue
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.ReadTimeout)
		b, err := p.reader.Read(ctx, r.req)
		cancel()
		p.reads.Inc()
		p.latency.Observe(time.Since(start).Seconds())
		if err != nil {
			p.failed.Inc()
		}
		r.finish(b, err)
	}
}

func (r *PendingRead) finish(b Batches, err error) {
	r.batches, r.err = b, err
	close(r.done)
	if r.notify != nil {
		select {
		case r.notify <- struct{}{}:
		default:
		}
	}
}

// Close cancels the reads in progress, fails the queued ones and waits
// for the goroutines.
func (p *ReadPool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		close(p.queue)
	}
	p.mu.Unlock()
	p.wg.Wait()
}
