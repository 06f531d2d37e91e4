package ship

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// AckFunc is called exactly once per produced record: with a nil error once
// the broker acknowledged it, or with the reason it failed (see Classify and
// IsRetryable). It runs on the producer's callback goroutine, serially with
// all other acknowledgements, so it must be quick and must never block on the
// Shipper (no Produce or Flush inside it: hand such work to a goroutine).
// It is an alias, so that packages below the agents (audit) can name the
// same producer interface without importing this one.
type AckFunc = func(rec *kgo.Record, err error)

// Shipper produces records to the broker with bounded memory.
type Shipper struct {
	cfg      Config
	logger   *slog.Logger
	metrics  *metrics
	opts     []kgo.Opt
	room     *room
	health   *health   // what the brokers last answered, for Ready
	problems *problems // failures only the operator can fix, for Ready and the log

	client atomic.Pointer[kgo.Client] // nil before Start and after Close

	mu     sync.Mutex // guards the following
	closed bool
}

// New checks cfg (after applying defaults) and registers the Shipper's
// metrics with reg (nil registers nothing). It does not connect: Start does.
func New(cfg Config, reg prometheus.Registerer, logger *slog.Logger) (*Shipper, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Certificate and password files are read now, so a missing one
	// fails the agent at start.
	security, err := cfg.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("ship: %w", err)
	}
	s := &Shipper{cfg: cfg, logger: logger.With("component", "ship"), room: newRoom(cfg.MaxBufferedBytes), health: newHealth()}
	s.problems = newProblems(cfg, s.logger)
	m, err := newMetrics(reg, s)
	if err != nil {
		return nil, fmt.Errorf("ship: registering metrics: %w", err)
	}
	s.metrics = m
	c, _ := codec(cfg.Compression) // validated above
	opts := append(security,
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.ProducerLinger(cfg.Linger),
		kgo.ProducerBatchMaxBytes(cfg.MaxBatchBytes),
		kgo.ProducerBatchCompression(c),
		// The bytes bound is the Shipper's own (room), which counts
		// what records hold in memory, not only what they send.
		kgo.MaxBufferedRecords(cfg.MaxBufferedRecords),
		kgo.ProduceRequestTimeout(cfg.RequestTimeout),
		kgo.DialTimeout(cfg.DialTimeout),
		kgo.WithLogger(kgoLogger{s.logger}),
		kgo.WithHooks(batchHook{m}, s.health),
		// A broker that is down for a while must not cost the agent its
		// records: back off, but keep trying (bounded by DeliveryTimeout
		// when one is set).
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			d := 100 * time.Millisecond << min(tries, 5)
			return min(d, 2*time.Second)
		}),
	)
	if strings.EqualFold(cfg.Compression, "lz4") {
		opts = append(opts, kgo.WithCompressor(&lz4Compressor{}))
	}
	switch cfg.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if cfg.DisableIdempotence {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
	case "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "none":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	if cfg.DeliveryTimeout > 0 {
		opts = append(opts, kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout))
	}
	if cfg.DefaultTopic != "" {
		opts = append(opts, kgo.DefaultProduceTopic(cfg.DefaultTopic))
	}
	if *cfg.AutoCreateTopics {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	s.opts = opts
	return s, nil
}

// Config returns the configuration in use, defaults applied.
func (s *Shipper) Config() Config { return s.cfg }

// Start creates the producer client. It does not wait for the broker: a
// broker that is down at start is retried like one that goes down later.
func (s *Shipper) Start(_ context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.client.Load() != nil {
		return errors.New("ship: already started")
	}
	cl, err := kgo.NewClient(s.opts...)
	if err != nil {
		return fmt.Errorf("ship: creating client: %w", err)
	}
	s.client.Store(cl)
	// A first contact now, so that Ready has an answer without waiting
	// for the first record.
	cl.ForceMetadataRefresh()
	s.logger.Info("producer started", "brokers", s.cfg.Brokers, "acks", s.cfg.Acks,
		"compression", s.cfg.Compression, "max_buffered_bytes", s.cfg.MaxBufferedBytes)
	return nil
}

// Produce queues rec and calls ack once it is acknowledged or failed. When
// the buffer is full it waits for room until ctx ends (then ack gets the
// context's error). ctx also cancels the record while it is still buffered
// and not yet sent, so pass a context that lives as long as the record
// should keep being retried.
func (s *Shipper) Produce(ctx context.Context, rec *kgo.Record, ack AckFunc) {
	s.ProduceWrapped(ctx, rec, s.Wrap(ack))
}

// ProduceWrapped is Produce with an acknowledgement function already wrapped
// by Wrap, for callers that send many records through one function.
func (s *Shipper) ProduceWrapped(ctx context.Context, rec *kgo.Record, p Promise) {
	cl := s.client.Load()
	if cl == nil {
		s.fail(rec, p, s.notRunningErr())
		return
	}
	if err := s.room.take(ctx, RecordCost(rec)); err != nil {
		s.fail(rec, p, err)
		return
	}
	cl.Produce(ctx, rec, p)
}

// fail settles a record that never reached the client. The promise gives
// back the record's room, so the record holds it first.
func (s *Shipper) fail(rec *kgo.Record, p Promise, err error) {
	s.room.hold(RecordCost(rec))
	p(rec, err)
}

// TryProduce is Produce that never waits: when the buffer is full it returns
// ErrBufferFull at once and ack is not called. Under a race with other
// producers kgo may still find its record bound reached; ack then receives
// ErrBufferFull. Any other failure is reported through ack.
func (s *Shipper) TryProduce(ctx context.Context, rec *kgo.Record, ack AckFunc) error {
	cl := s.client.Load()
	if cl == nil {
		return s.notRunningErr()
	}
	if cl.BufferedProduceRecords() >= int64(s.cfg.MaxBufferedRecords) || !s.room.tryTake(RecordCost(rec)) {
		s.metrics.errors.WithLabelValues(string(KindBufferFull)).Inc()
		return ErrBufferFull
	}
	cl.TryProduce(ctx, rec, s.Wrap(ack))
	return nil
}

// Promise is an acknowledgement function with the shipper's metrics added
// (see Wrap), ready to hand to kgo.
type Promise func(rec *kgo.Record, err error)

// Wrap adds the shipper's bookkeeping to ack: it gives back the record's
// room in the buffer, and counts records, bytes and acknowledgement latency
// on success, errors by kind on failure. A caller that sends many
// records through one function wraps it once and uses ProduceWrapped: a
// wrapper made per record cost an allocation and a clock read each, about a
// sixth of the tailer's CPU per line. The latency runs from the record's
// timestamp, which kgo sets when the record is produced unless the caller
// set it (the tailer sets the time the line was read); it is observed for
// one acknowledged record in latencySampling.
func (s *Shipper) Wrap(ack AckFunc) Promise {
	// The counters of the topic last acknowledged: a caller's records
	// mostly go to one topic, so most records skip the map lookup.
	var last atomic.Pointer[topicCounters]
	return func(r *kgo.Record, err error) {
		size := recordBytes(r)
		s.room.give(size + RecordOverhead)
		if err != nil {
			if errors.Is(err, kgo.ErrMaxBuffered) {
				err = fmt.Errorf("%w: %w", ErrBufferFull, err)
			}
			s.metrics.errors.WithLabelValues(string(Classify(err))).Inc()
			s.problems.failed(r.Topic, err, time.Now())
		} else {
			s.problems.acknowledged(r.Topic)
			c := last.Load()
			if c == nil || c.topic != r.Topic {
				c = s.metrics.forTopic(r.Topic)
				last.Store(c)
			}
			c.records.Inc()
			c.bytes.Add(float64(size))
			if s.metrics.acked.Add(1)%latencySampling == 0 {
				s.metrics.ackLatency.Observe(time.Since(r.Timestamp).Seconds())
			}
		}
		if ack != nil {
			ack(r, err)
		}
	}
}

func (s *Shipper) notRunningErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return ErrNotStarted
}

// Flush waits until every record produced so far is acknowledged or failed,
// or ctx ends.
func (s *Shipper) Flush(ctx context.Context) error {
	cl := s.client.Load()
	if cl == nil {
		return nil
	}
	return cl.Flush(ctx)
}

// Shutdown flushes buffered records until ctx's deadline, then closes the
// client; records still unacknowledged at that point fail with a closed
// error. It returns the flush error, if any.
func (s *Shipper) Shutdown(ctx context.Context) error {
	flushErr := s.Flush(ctx)
	if flushErr != nil {
		s.logger.Warn("shutdown before every record was acknowledged", "buffered_records", s.BufferedRecords(), "err", flushErr)
	}
	s.Close()
	return flushErr
}

// Close stops the client at once, failing buffered records (like a crash,
// without losing the process). Safe to call more than once.
func (s *Shipper) Close() {
	s.mu.Lock()
	s.closed = true
	cl := s.client.Swap(nil)
	s.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
}

// BufferedRecords is the number of records produced and not yet acknowledged.
func (s *Shipper) BufferedRecords() int64 {
	if cl := s.client.Load(); cl != nil {
		return cl.BufferedProduceRecords()
	}
	return 0
}

// BufferedBytes is the room in the buffer held by records produced and not
// yet acknowledged: their bytes plus RecordOverhead each.
func (s *Shipper) BufferedBytes() int64 {
	return s.room.used.Load()
}

// fill is the buffer use as a fraction of its limit.
func (s *Shipper) fill() float64 {
	r := float64(s.BufferedRecords()) / float64(s.cfg.MaxBufferedRecords)
	b := float64(s.BufferedBytes()) / float64(s.cfg.MaxBufferedBytes)
	return max(r, b)
}

// kgoLogger sends kgo's log lines to slog, quietly: kgo's info level is
// chatty about every connection, so it is logged at debug.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	if k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, keyvals...)
	default:
		k.l.Debug(msg, keyvals...)
	}
}
