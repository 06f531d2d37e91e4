package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/schemas"
	"millrace/schemas/format"
	"millrace/sinks/iceberg"
	"millrace/store"
)

// Worker is one member of a sink's consumer group. Create it with New, run it
// with Start, stop it with Shutdown.
type Worker struct {
	cfg Config
	// schema and timeField change only with a registry-typed table's
	// evolution (registry.go), holding w.landing and w.mu.
	schema    *schemas.Schema
	timeField int              // index of Config.TimestampField, or -1 for the schema's time field
	registry  *registrySchemas // schema registry's; nil for the built-in schemas
	identity  string           // the identity partition's field (tablepartition.go), "" without one
	layout    Layout
	store     store.Store
	logger    *slog.Logger
	metrics   *metrics
	now       func() time.Time

	// Set by Start (tests set fakes directly).
	client   *kgo.Client
	commit   committer
	dlq      deadLetterSink
	audit    auditPublisher // nil: no audit records
	progress progressSource
	batches  batchReader
	probe    stallProbe // nil: no stall checks
	// decompressor is the bounded one, for reading batches directly.
	decompressor kgo.Decompressor
	seek         func(tp topicPartition, offset int64) // moves the fetch position past an undecodable batch
	fence        ownershipChecker                      // nil: never fenced (fence.go)
	history      dedupHistory                          // nil: dedup state starts empty (dedup.go)
	tables       *iceberg.Catalog                      // Format iceberg's catalog; nil for hive
	maintenance  *maintainer                           // Format iceberg's scheduled maintenance; nil when off

	cancel context.CancelFunc
	done   chan struct{} // closed when the poll loop has returned

	// landing serialises landings: the poll loop's, the rebalance
	// callbacks' (a revoked partition is landed before onRevoked returns,
	// and Shutdown's timeout path can run onRevoked while the poll loop is
	// still landing), Shutdown's and fail's discards. It is held through a
	// landing's I/O (creates, fence checks, publishes, the audit publish,
	// the commit, or with Format iceberg the wait for the commit ahead:
	// pipeline.go), never through a dedup replay (rebuild.go) or a stall
	// check's listings and reads (stall.go). The methods
	// that run a landing's actions say that the caller holds it. Taken
	// before mu, never while holding mu.
	landing sync.Mutex // guards the following, and every field of a *partitionState
	core    *lander    // the decisions (core.go)
	// pipeline is Format iceberg's commit in flight (pipeline.go); nil:
	// every commit runs in line, on the landing goroutine.
	pipeline *commitPipeline

	// mu guards the in-memory state that goroutines outside a landing read
	// or write: which partitions are assigned (onAssigned adds them while
	// nothing lands), the buckets waiting for markers and why the worker
	// stopped. It is held for short sections that never do store, network
	// or Kafka I/O, so Err, the marker bookkeeping and the rebalance
	// callbacks' bookkeeping never wait for a landing. A *partitionState is
	// written only before it is put in parts, or holding landing.
	mu               sync.Mutex // guards the following
	parts            map[topicPartition]*partitionState
	pending          map[string]map[int64]struct{} // topic -> buckets (Unix seconds) with files but no marker yet
	lastSuccessCheck time.Time
	err              error // why the worker stopped on its own
}

// New checks cfg and returns a worker that lands into st. reg may be nil.
func New(cfg Config, st store.Store, reg prometheus.Registerer, logger *slog.Logger) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil {
		return nil, errors.New("lake: no store")
	}
	if cfg.Schema == SchemaRegistry && cfg.Source == nil {
		rc, err := newRegistryClient(cfg.Registry)
		if err != nil {
			return nil, err
		}
		cfg.Source = rc
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	schema, _ := cfg.eventSchema() // checked by Validate
	if cfg.Format == FormatIceberg {
		st = tableStore{Store: st, namespace: cfg.Iceberg.namespace()}
	}
	w := &Worker{cfg: cfg, schema: schema, timeField: -1, layout: LayoutOf(cfg.PartitionBy), store: st,
		logger: logger.With("component", "lake", "group", cfg.Group), metrics: newMetrics(reg), now: time.Now,
		done: make(chan struct{}), parts: map[topicPartition]*partitionState{}, pending: map[string]map[int64]struct{}{},
		core: newLander(landerLimits{rollRows: cfg.RollRows, rollBytes: cfg.RollBytes, rollAge: cfg.RollAge,
			idleTimeout: cfg.IdleTimeout, maxOpenFiles: cfg.MaxOpenFiles})}
	if cfg.Format == FormatIceberg {
		w.identity = cfg.Iceberg.identityField()
		w.core.limits.deadLetterBytes = maxWindowDeadLetterBytes
	}
	if cfg.Schema == SchemaRegistry {
		// The columns come from the registry at Start (fixSchema).
		w.registry = &registrySchemas{source: cfg.Source, columns: map[int][]format.Column{}, fits: map[int]*schemas.Schema{}}
		return w, nil
	}
	if cfg.TimestampField != "" && cfg.TimestampField != schema.TimeField {
		w.timeField = schema.FieldIndex(cfg.TimestampField)
	}
	return w, nil
}

// Start joins the group and starts landing records in a goroutine of its own,
// which runs until Shutdown or a failure (see Done and Err). ctx bounds only
// the start: connecting and creating the dead-letter topics. A worker that
// fails to start has unregistered its metrics and needs no Shutdown.
func (w *Worker) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			w.metrics.unregister()
		}
	}()
	decompressor, err := boundedDecompressor(w.cfg.MaxDecompressedBatchBytes)
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	reset := kgo.NewOffset().AtStart()
	if w.cfg.StartAt == "latest" {
		reset = kgo.NewOffset().AtEnd()
	}
	security, err := w.cfg.Security.Opts()
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	if w.registry != nil {
		if err := w.fixSchema(ctx); err != nil {
			return err
		}
	}
	var tables *tableCommitter
	if w.cfg.Format == FormatIceberg {
		cat, opened, openErr := openTables(ctx, w.cfg, w.store, w.schema, w.logger)
		if openErr != nil {
			return openErr
		}
		defer func() {
			if err != nil {
				cat.Close()
			}
		}()
		for _, tbl := range opened {
			if err := w.cfg.Iceberg.checkSpec(tbl, w.schema.TimeField); err != nil {
				return err
			}
		}
		tables = &tableCommitter{catalog: cat, group: w.cfg.Group, store: w.store, logger: w.logger,
			tables: opened, from: map[topicPartition]int64{}}
		// The table, not the group, says where each partition starts.
		security = append(slices.Clip(security), kgo.AdjustFetchOffsetsFn(tables.startOffsets))
	}
	cl, err := kgo.NewClient(append(slices.Clip(security),
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.ClientID("millrace-sink"),
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.Topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		// Offsets are committed by the worker, after publishing, never by
		// the client on a timer.
		kgo.DisableAutoCommit(),
		// Rebalance callbacks run only between two polls, so a window is
		// never half-processed when its partition is revoked.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(w.onAssigned),
		kgo.OnPartitionsRevoked(w.onRevoked),
		kgo.OnPartitionsLost(w.onLost),
		// Bounded, and every batch it cannot decode stops its partition
		// with the batch's offsets, for describeBatches and
		// skipRangeLocked (badbatch.go).
		kgo.WithDecompressor(stoppingDecompressor{decompressor}),
	)...)
	if err != nil {
		return fmt.Errorf("lake: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return fmt.Errorf("lake: cannot reach brokers %v: %w", w.cfg.Brokers, err)
	}
	if w.cfg.Format != FormatIceberg {
		// Iceberg mode's dead letters go to a table (deadletter.go).
		w.ensureDeadLetterTopics(ctx, cl)
		w.dlq = &kgoDeadLetters{client: cl}
	}
	w.client = cl
	w.commit = &kgoCommitter{client: cl, group: w.cfg.Group}
	if tables != nil {
		tables.next, w.commit, w.tables = w.commit, tables, tables.catalog
		w.pipeline = &commitPipeline{}
	}
	if w.cfg.AuditTopic != "off" {
		w.ensureTopic(ctx, cl, w.cfg.AuditTopic)
		w.audit = &kgoAudit{client: cl, topic: w.cfg.AuditTopic, brokers: w.cfg.Brokers, security: security}
		if w.cfg.Lake != "" {
			w.announce(cl)
		}
	}
	w.progress = &kgoProgress{client: cl, group: w.cfg.Group}
	reader := &kgoBatchReader{client: cl, decompressor: decompressor}
	w.batches, w.decompressor = reader, decompressor
	w.probe = &kgoStallProbe{reader: reader, group: w.cfg.Group, startAt: w.cfg.StartAt}
	w.seek = kgoSeek(cl)
	w.fence = &kgoOwnership{client: cl, group: w.cfg.Group}
	w.history = &kgoHistory{client: cl, group: w.cfg.Group, reader: reader, decompressor: decompressor}
	runCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.run(runCtx)
	if tables != nil && !w.cfg.Iceberg.Maintenance.Disabled {
		w.maintenance = w.newMaintainer(tables)
		w.maintenance.start()
	}
	w.logger.Info("sink worker started", "topics", w.cfg.Topics, "schema", w.schema.Name)
	return nil
}

// Done is closed when the worker stops landing: after Shutdown began, or on
// a failure reported by Err.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err reports why the worker stopped on its own, or nil.
func (w *Worker) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Shutdown stops polling, lands every open window (publish, then commit)
// within ctx — what cannot be landed in time is discarded and rewritten by the
// next owner — leaves the group and unregisters the worker's metrics. It is
// also how a worker that stopped on its own (Err) leaves the group.
func (w *Worker) Shutdown(ctx context.Context) error {
	if w.cancel == nil {
		return errors.New("lake: Shutdown before Start")
	}
	defer w.metrics.unregister()
	if w.tables != nil {
		defer w.tables.Close() // after the last commit
	}
	if w.maintenance != nil {
		// First: a run in progress ends before the catalog closes, and
		// does not compete with the last landings.
		w.maintenance.shutdown()
		w.maintenance.metrics.unregister()
	}
	w.cancel()
	select {
	case <-w.done:
	case <-ctx.Done():
		// The poll loop is still publishing; it holds nothing that the group
		// needs, so leave anyway. Its unfinished window is rewritten.
		w.client.Close()
		<-w.done
		// The commit in flight ends before the catalog closes.
		w.landing.Lock()
		if err := w.settle(); err != nil {
			w.logger.Warn("the last window's commit failed; the next owner lands it again", "err", err)
		}
		w.landing.Unlock()
		return fmt.Errorf("lake: shutdown: %w", ctx.Err())
	}
	w.landing.Lock()
	var err error
	if w.Err() == nil {
		// Lands every window; after a failed one the rest are discarded.
		err = w.runActions(ctx, w.core.shutdown(), nil)
		if serr := w.settle(); err == nil {
			err = serr // the last window's commit
		}
	}
	w.landing.Unlock()
	w.client.Close() // leaves the group; onRevoked finds nothing left to land
	return err
}

// run polls and lands records until ctx ends or landing fails.
func (w *Worker) run(ctx context.Context) {
	defer close(w.done)
	// Publishing and committing run to completion even when ctx ends, so a
	// shutdown never cuts a window between a publish and its commit.
	work := context.WithoutCancel(ctx)
	for {
		pollCtx, cancel := context.WithTimeout(ctx, w.pollWait())
		fetches := w.client.PollFetches(pollCtx)
		cancel()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			w.client.AllowRebalance()
			return
		}
		err := w.handle(work, fetches)
		w.client.AllowRebalance()
		if err != nil {
			w.fail(work, err)
			return
		}
	}
}

// pollWait bounds a poll so idle windows are noticed on time.
func (w *Worker) pollWait() time.Duration {
	d := w.cfg.IdleTimeout / 4
	if d > time.Second {
		d = time.Second
	}
	if d < 10*time.Millisecond {
		d = 10 * time.Millisecond
	}
	return d
}

// handle lands one poll's records: the dedup rebuilds first, then the
// records, then the stall checks and the markers that came due.
func (w *Worker) handle(ctx context.Context, fetches kgo.Fetches) error {
	w.rebuildDedups(ctx, fetches)
	if err := w.land(ctx, fetches); err != nil {
		return err
	}
	// A partition stuck at a malformed batch delivers nothing at all.
	w.checkStalls(ctx)
	w.maybeWriteMarkers(ctx)
	return nil
}

// land hands one poll's records to the lander and runs its decisions.
func (w *Worker) land(ctx context.Context, fetches kgo.Fetches) error {
	var undecodable []undecodableBatch
	fetches.EachError(func(topic string, partition int32, err error) {
		if tooLarge, ok := errors.AsType[*kgo.ErrDecompressTooLarge](err); ok {
			undecodable = append(undecodable, undecodableBatch{tp: topicPartition{topic, partition},
				first: tooLarge.Offset, next: tooLarge.NextOffset, err: err})
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			w.logger.Warn("fetch failed; retrying", "topic", topic, "partition", partition, "err", err)
		}
	})
	// Read before the landing lock: a direct fetch from the broker.
	letters := w.describeBatches(ctx, undecodable)
	w.landing.Lock()
	defer w.landing.Unlock()
	var err error
	fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if err != nil || len(ftp.Records) == 0 {
			return
		}
		p := w.assign(topicPartition{ftp.Topic, ftp.Partition})
		// Once per fetch, not per record: reading the clock cost 4% of
		// landing a click event.
		now := w.now()
		w.core.delivered(p.tp, now)
		p.progressAt = now
		for i, r := range ftp.Records {
			p.dedup.prefetch(ftp.Records, i)
			if err = w.processRecord(ctx, p, r); err != nil {
				return
			}
		}
		last := ftp.Records[len(ftp.Records)-1].Offset
		p.position = last + 1
		w.metrics.lag.WithLabelValues(ftp.Topic, strconv.Itoa(int(ftp.Partition))).Set(float64(ftp.HighWatermark - last - 1))
	})
	if err != nil {
		return err
	}
	// After the records: a partition's records in this poll all come
	// before its undecodable batch, which stopped its fetching.
	for i, b := range undecodable {
		if p := w.partition(b.tp); p != nil { // assigned (no revoke runs during a poll)
			w.skipRangeLocked(p, letters[i], b.first, b.next)
		}
	}
	return w.flushIdle(ctx)
}

// flushIdle lands the windows of partitions that delivered nothing for
// IdleTimeout. The caller holds w.landing.
func (w *Worker) flushIdle(ctx context.Context) error {
	if err := w.collect(); err != nil {
		return err
	}
	return w.runActions(ctx, w.core.tick(w.now()), nil)
}

// fail stops the worker after a landing failure: every window is discarded,
// nothing more is committed.
func (w *Worker) fail(ctx context.Context, err error) {
	w.landing.Lock()
	defer w.landing.Unlock()
	// A commit in flight was of a window before the failure: it ends
	// (committed or not) before the worker stops.
	if serr := w.settle(); serr != nil && serr != err {
		w.logger.Warn("the commit in flight failed too", "err", serr)
	}
	w.discardEach(ctx, w.core.failed())
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	w.logger.Error("sink worker stopped; unlanded records are landed again from the committed offsets", "err", err)
}

// partition returns tp's state, nil when tp is not assigned.
func (w *Worker) partition(tp topicPartition) *partitionState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.parts[tp]
}

// assign returns tp's state, made when tp has none yet.
func (w *Worker) assign(tp topicPartition) *partitionState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.partitionLocked(tp)
}

// forget removes tp's state: tp is no longer assigned.
func (w *Worker) forget(tp topicPartition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.parts, tp)
}

// partitionLocked returns tp's state, made when tp has none yet. The
// caller holds w.mu.
func (w *Worker) partitionLocked(tp topicPartition) *partitionState {
	p := w.parts[tp]
	if p == nil {
		p = &partitionState{tp: tp, row: w.schema.NewRow(), position: -1, checkedAt: -1, progressAt: w.now(),
			member: w.memberID()}
		w.parts[tp] = p
	}
	return p
}

// sortedPartitionsLocked lists the partitions in a fixed order, so the
// stall checks (stall.go) run in the same order every time. Its caller holds
// w.landing (the partitions' fields are a landing's to read); it takes w.mu
// itself for the list.
func (w *Worker) sortedPartitionsLocked() []*partitionState {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*partitionState, 0, len(w.parts))
	for _, p := range w.parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].tp.topic != out[j].tp.topic {
			return out[i].tp.topic < out[j].tp.topic
		}
		return out[i].tp.partition < out[j].tp.partition
	})
	return out
}

// onAssigned removes what earlier owners of the new partitions left
// unpublished, before any of their records is read, and picks up the
// _SUCCESS markers they left due. It takes only w.mu, to record the
// assignment, and asks the store holding no lock: the poll loop hands out no
// record while a rebalance callback runs.
func (w *Worker) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	for topic, partitions := range assigned {
		set := map[int32]func(string) bool{}
		w.mu.Lock()
		for _, p := range partitions {
			w.partitionLocked(topicPartition{topic, p})
			set[p] = finalNameMatcher(p)
		}
		w.mu.Unlock()
		match := func(name string) bool {
			for _, m := range set {
				if m(name) {
					return true
				}
			}
			return false
		}
		n, err := w.store.Cleanup(ctx, topic+"/", match)
		if err != nil {
			w.logger.Warn("cleaning up leftovers failed; they stay hidden and are retried on the next assignment",
				"topic", topic, "err", err)
		}
		w.recoverPending(ctx, topic)
		w.logger.Info("partitions assigned", "topic", topic, "partitions", partitions, "leftovers_removed", n)
	}
}

// onRevoked lands the revoked partitions' windows (publish, then commit with
// the generation that still owns them) and forgets them.
func (w *Worker) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	w.landing.Lock()
	defer w.landing.Unlock()
	work := context.WithoutCancel(ctx)
	gone := map[topicPartition]bool{}
	// The revoked partitions' last commits end before they are given up.
	defer w.giveUp(gone)
	for topic, partitions := range revoked {
		for _, id := range partitions {
			tp := topicPartition{topic, id}
			if w.partition(tp) == nil {
				continue
			}
			gone[tp] = true
			if err := w.runActions(work, w.core.revoked(tp, w.Err() != nil), nil); err != nil {
				w.logger.Warn("landing a revoked partition failed; its next owner rewrites the window",
					"topic", topic, "partition", id, "err", err)
			}
			w.forget(tp)
			w.metrics.lag.DeleteLabelValues(topic, strconv.Itoa(int(id)))
		}
		w.logger.Info("partitions revoked", "topic", topic, "partitions", partitions)
	}
}

// onLost discards the lost partitions' windows: another member may own them
// already, so nothing may be committed for them.
func (w *Worker) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	w.landing.Lock()
	defer w.landing.Unlock()
	gone := map[topicPartition]bool{}
	for topic, partitions := range lost {
		for _, id := range partitions {
			gone[topicPartition{topic, id}] = true
		}
	}
	// As a commit in progress did before the pipeline: it ends first.
	w.giveUp(gone)
	for topic, partitions := range lost {
		for _, id := range partitions {
			tp := topicPartition{topic, id}
			if w.partition(tp) != nil {
				w.discardEach(context.WithoutCancel(ctx), w.core.lost(tp))
				w.forget(tp)
				w.metrics.lag.DeleteLabelValues(topic, strconv.Itoa(int(id)))
			}
		}
		w.logger.Warn("partitions lost", "topic", topic, "partitions", partitions)
	}
}

// ensureDeadLetterTopics creates `<topic>.dlq` (one partition) for every
// topic that lacks one. A failure is only logged: the broker may create
// topics on first use.
func (w *Worker) ensureDeadLetterTopics(ctx context.Context, cl *kgo.Client) {
	for _, t := range w.cfg.Topics {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t+".dlq", 1, -1
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			w.logger.Warn("could not create the dead-letter topic", "topic", t+".dlq", "err", err)
		}
	}
}
