package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/broker/coord"
	"millrace/broker/log"
	"millrace/store"
)

// Partition is what the tier needs of one partition this broker hosts; the
// broker assembles it from the cluster model and the replica manager,
// which the tier does not import.
type Partition struct {
	Topic     string
	TopicID   [16]byte // zero when the cluster has none
	Partition int32
	Log       *log.Log
	// Leader: this broker leads the partition, at LeaderEpoch. Only the
	// leader uploads, expires remote segments and sweeps.
	Leader      bool
	LeaderEpoch int32
	// HighWatermark bounds what may be uploaded: only a segment wholly
	// below it, which no new leader can truncate away. -1: every record
	// is committed (a single broker).
	HighWatermark int64
}

// Host tells the tier about the broker's partitions and topics.
type Host struct {
	// Partitions returns the partitions this broker hosts whose topic has
	// remote.storage.enable.
	Partitions func() []Partition
	// TopicIDs returns every existing topic's ID by name; the remote data
	// of a topic not in it (or of another ID) is removed once its state
	// is older than the sweep grace.
	TopicIDs func() map[string][16]byte
	// Controller reports whether this broker removes deleted topics'
	// remote data (one broker does, the controller).
	Controller func() bool
	// Index, when set, is the index the manager keeps current: the broker
	// opens its read side over it before the manager, whose partitions
	// come from the replicas of a wire server that needs the read side.
	// Nil: the manager makes its own.
	Index *Index
}

// Manager uploads closed segments of the partitions this broker leads,
// expires remote segments by total retention, sweeps unreferenced objects,
// and tells every hosted tiered log how far it is stored remotely.
type Manager struct {
	cfg     Config
	store   store.Store
	coord   coord.Store
	host    Host
	logger  *slog.Logger
	metrics *metrics
	now     func() time.Time
	// uploadTimeoutBase is the least time one object's upload may take
	// (upload.go); a field so that tests can shorten it.
	uploadTimeoutBase time.Duration
	// copyThrottle paces uploads to remote.log.manager.copy.max.bytes.per.second;
	// nil: unlimited.
	copyThrottle *log.Throttle

	mu sync.Mutex // guards the following
	// swept is when each partition was last swept, and at which leader
	// epoch: a new leadership sweeps at once.
	swept map[log.TopicPartition]sweepMark
	// topics and vanished track topic IDs for the removal of deleted
	// topics' objects that no state references (sweep.go).
	topics   map[string]string    // topic name -> encoded ID, as last seen
	vanished map[string]time.Time // topic prefix -> when its topic was first seen gone
	// remote summarizes each hosted partition's remote state (summary.go).
	remote map[log.TopicPartition]Remote
	cancel context.CancelFunc // ends Start's loops; nil before Start
	done   chan struct{}      // closed when Start's loops have returned

	// index is the read side's view of the remote states (index.go).
	index *Index
	// stateMu serializes a state's write or read with its noting in
	// index, so the round's commits and refreshLeaders' reads cannot note
	// an older state after a newer one.
	stateMu sync.Mutex
}

// leadershipCheckInterval is how often Start's second loop looks for
// partitions this broker began to lead (or follow) since the index noted
// them; bounded by remote.log.manager.task.interval.ms.
const leadershipCheckInterval = time.Second

type sweepMark struct {
	epoch int32
	at    time.Time
}

// New returns a manager; Start runs it. st is the remote object store, cs
// the coordination store holding the remote state.
func New(cfg Config, st store.Store, cs coord.Store, host Host, reg prometheus.Registerer, logger *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mx, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	if host.Index == nil {
		host.Index = NewIndex()
	}
	return &Manager{cfg: cfg, store: st, coord: cs, host: host, metrics: mx, now: time.Now, uploadTimeoutBase: uploadTimeoutBase,
		logger: logger.With("component", "tier"), swept: map[log.TopicPartition]sweepMark{},
		topics: map[string]string{}, vanished: map[string]time.Time{}, remote: map[log.TopicPartition]Remote{},
		index: host.Index, copyThrottle: cfg.copyThrottle()}, nil
}

// Index is the remote state of the partitions this broker hosts, for the
// read side (OpenReadSide) and broker/kafka's Deps.RemoteIndex.
func (m *Manager) Index() *Index { return m.index }

// Start runs a round every remote.log.manager.task.interval.ms until
// Close, and, beside it, reads the remote state of a partition as soon as
// this broker leads it (refreshLeaders), which a round busy uploading
// would not do for a while.
func (m *Manager) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	m.mu.Lock()
	m.cancel, m.done = cancel, make(chan struct{})
	done := m.done
	m.mu.Unlock()
	var loops sync.WaitGroup
	every := func(interval time.Duration, run func(context.Context)) {
		loops.Go(func() {
			ticker := time.NewTicker(interval)
			defer ticker.Stop()
			for {
				run(ctx)
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
				}
			}
		})
	}
	every(m.cfg.TaskInterval, m.RunOnce)
	every(min(m.cfg.TaskInterval, leadershipCheckInterval), m.refreshLeaders)
	go func() {
		loops.Wait()
		close(done)
	}()
}

// refreshLeaders reads the remote state of every hosted tiered partition
// whose leadership, leader epoch or topic ID changed since the index noted
// it: a new leader answers ListOffsets and Fetch from the state as its
// predecessor left it, not as of this broker's last round.
func (m *Manager) refreshLeaders(ctx context.Context) {
	for _, p := range m.host.Partitions() {
		if ctx.Err() != nil {
			return
		}
		if m.index.current(p) {
			continue
		}
		if err := m.readState(p); err != nil {
			m.logger.Warn("reading the remote state", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
	}
}

// readState reads p's remote state and notes it; the log learns how far
// it is remote, so its local retention may delete that.
func (m *Manager) readState(p Partition) error {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	st, _, exists, err := ReadState(m.coord, p.Topic, p.Partition)
	if err != nil {
		return err
	}
	current := exists && st.TopicID == EncodeTopicID(p.TopicID)
	m.noteRemote(p, st, current)
	if current {
		p.Log.SetRemoteEnd(st.End())
	}
	return nil
}

// Close stops Start's loop, cancelling an upload under way (its objects
// are left for the sweep), and waits for it. It does not close the stores.
func (m *Manager) Close() error {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.cancel = nil
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// RunOnce runs one round: every hosted tiered partition, then, on the
// controller, the remote data of deleted topics. Errors are logged and
// counted; the next round retries.
func (m *Manager) RunOnce(ctx context.Context) {
	leading, hosted := map[log.TopicPartition]bool{}, map[log.TopicPartition]bool{}
	for _, p := range m.host.Partitions() {
		if ctx.Err() != nil {
			return
		}
		tp := log.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		hosted[tp] = true
		logger := m.logger.With("topic", p.Topic, "partition", p.Partition)
		if !p.Leader {
			m.follow(p, logger)
			continue
		}
		leading[tp] = true
		if err := m.lead(ctx, p, logger); err != nil && ctx.Err() == nil {
			if errors.Is(err, errConflict) {
				logger.Info("remote state changed under this leader; retrying next round", "err", err)
			} else {
				logger.Warn("tiered storage round failed; retrying next round", "err", err)
			}
		}
	}
	m.forgetPartitions(leading)
	m.forgetRemote(hosted)
	if m.host.TopicIDs == nil {
		return
	}
	// Every broker notes which topics vanished, so a broker that becomes
	// the controller knows them; the controller removes their data.
	topics := m.host.TopicIDs()
	m.noteVanished(topics)
	if m.host.Controller != nil && m.host.Controller() {
		if err := m.removeDeletedTopics(ctx, topics); err != nil && ctx.Err() == nil {
			m.logger.Warn("removing the remote data of deleted topics; retrying next round", "err", err)
		}
		if err := m.removeVanished(ctx, topics); err != nil && ctx.Err() == nil {
			m.logger.Warn("removing the unrecorded objects of deleted topics; retrying next round", "err", err)
		}
	}
}

// follow tells a follower's log how far the leader has uploaded, so its
// local retention may delete what is remote.
func (m *Manager) follow(p Partition, logger *slog.Logger) {
	if err := m.readState(p); err != nil {
		logger.Warn("reading the remote state", "err", err)
	}
}

// lead is one leader's round on a partition: sweep when due, upload what
// is closed and committed, expire by total retention.
func (m *Manager) lead(ctx context.Context, p Partition, logger *slog.Logger) error {
	w, err := m.openWriter(p)
	if err != nil {
		return err
	}
	if w == nil {
		m.noteRemote(p, State{}, false)
		logger.Debug("remote state belongs to an earlier topic of this name; waiting for its removal")
		return nil
	}
	m.noteRemote(p, w.state, w.exists)
	if err := m.sweepIfDue(ctx, w); err != nil {
		logger.Warn("sweeping unreferenced remote objects", "err", err)
	}
	uploadErr := m.upload(ctx, w, logger)
	p.Log.SetRemoteEnd(w.state.End())
	m.metrics.lag.WithLabelValues(p.Topic, strconv.Itoa(int(p.Partition))).Set(float64(max(p.Log.EndOffset()-w.state.End(), 0)))
	if uploadErr == nil {
		uploadErr = m.expire(ctx, w, logger)
	}
	m.noteRemote(p, w.state, w.exists)
	return uploadErr
}

// forgetPartitions drops the bookkeeping of partitions no longer led here.
func (m *Manager) forgetPartitions(leading map[log.TopicPartition]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tp := range m.swept {
		if !leading[tp] {
			delete(m.swept, tp)
			m.metrics.lag.DeleteLabelValues(tp.Topic, strconv.Itoa(int(tp.Partition)))
		}
	}
}

// writer is a leader's view of one partition's remote state during a round.
type writer struct {
	p       Partition
	topicID string
	state   State
	version int32
	exists  bool
}

// openWriter reads the state for the leader of p; nil when the state is
// of another topic ID (a deleted topic's, not removed yet).
func (m *Manager) openWriter(p Partition) (*writer, error) {
	st, version, exists, err := ReadState(m.coord, p.Topic, p.Partition)
	if err != nil {
		return nil, err
	}
	w := &writer{p: p, topicID: EncodeTopicID(p.TopicID), state: st, version: version, exists: exists}
	if exists && st.TopicID != w.topicID {
		return nil, nil
	}
	if err := checkEpoch(st, p.LeaderEpoch, p.Topic, p.Partition); err != nil {
		return nil, err
	}
	return w, nil
}

// commit writes next as the partition's state, and notes it in the index
// at once: an uploaded segment is readable before the local log may
// delete it, an expired one unreadable before its objects go.
func (m *Manager) commit(w *writer, next State) error {
	next.TopicID = w.topicID
	next.LeaderEpoch = max(w.state.LeaderEpoch, w.p.LeaderEpoch)
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	version, err := writeState(m.coord, w.p.Topic, w.p.Partition, next, w.version, w.exists)
	if err != nil {
		return err
	}
	w.state, w.version, w.exists = next, version, true
	m.noteRemote(w.p, next, true)
	return nil
}

// removeSegments removes the objects of segments the state no longer
// references; a failure leaves them to the sweep.
func (m *Manager) removeSegments(ctx context.Context, segments []Segment) error {
	var errs []error
	for _, s := range segments {
		for _, suffix := range suffixes {
			if err := m.store.Remove(ctx, s.Key+suffix); err != nil {
				errs = append(errs, fmt.Errorf("tier: removing %s: %w", s.Key+suffix, err))
			}
		}
	}
	return errors.Join(errs...)
}

// metrics are the write side's Prometheus metrics.
type metrics struct {
	uploadedBytes    prometheus.Counter
	uploadedSegments prometheus.Counter
	uploadErrors     prometheus.Counter
	expiredSegments  prometheus.Counter
	sweptObjects     prometheus.Counter
	lag              *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		uploadedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tier_uploaded_bytes_total", Help: "Bytes of segment objects (log, indexes, producer snapshot) this broker stored remotely.",
		}),
		uploadedSegments: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tier_uploaded_segments_total", Help: "Segments this broker uploaded and recorded in the remote state.",
		}),
		uploadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tier_upload_errors_total", Help: "Segment uploads that failed (store or state errors); each is retried next round, and local retention waits for it.",
		}),
		expiredSegments: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tier_expired_segments_total", Help: "Remote segments removed by retention.ms, retention.bytes or DeleteRecords.",
		}),
		sweptObjects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "millrace_tier_swept_objects_total", Help: "Unreferenced remote objects (left by interrupted uploads) the sweep removed.",
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "millrace_tier_remote_lag_offsets", Help: "How far the newest remote offset trails the local log end, per partition this broker leads.",
		}, []string{"topic", "partition"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.uploadedBytes, m.uploadedSegments, m.uploadErrors, m.expiredSegments, m.sweptObjects, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("tier: registering metrics: %w", err)
		}
	}
	return m, nil
}
