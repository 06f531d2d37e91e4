// Package replication is millrace's replica manager (Kafka's
// ReplicaManager, docs/architecture.md §5): for every partition this broker
// hosts it leads or follows as the partition state in the coordination
// store says, owns the high watermark, the acks=all wait and the
// high-watermark checkpoint, and wakes the long-poll Fetches waiting on a
// partition. The wire handlers of broker/kafka find a Partition here and
// translate between the wire and its calls; the pure decisions are
// broker/replica's.
//
// The cluster model follows the state znodes through watches; there is no
// LeaderAndIsr request.
//
//   - Leading: a replica.Leader state machine is fed follower fetches
//     (leader.go), appends and ticks; its decisions are carried out here
//     (hosted.go): publish the high watermark to fetchers, write ISR
//     changes to the state znode with compare-and-set, answer acks=all
//     produces, stop leading when fenced.
//   - Following: a Follower (the inter-broker fetcher, injected) truncates
//     the log by leader epoch and copies the leader's log, reporting the
//     leader's high watermark back through its Followed handle.
//
// Reconciliation is level-triggered: one goroutine compares, after every
// model change and session change, what each partition should be doing
// with what it does, and changes only what differs. A broker whose
// coordination session is lost (cluster.SessionOK) stops leading at once:
// pending acks=all requests fail with NOT_LEADER_OR_FOLLOWER and no write
// is acknowledged until the model was re-read under a new session.
//
// Without multi-broker mode the manager is inert and the data path keeps
// its single-broker rules (every written record is committed).
package replication

import (
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"millrace/broker/cluster"
	"millrace/broker/log"
	"millrace/broker/replica"
)

// Deps are what the manager needs from the broker around it.
type Deps struct {
	// Cluster is the metadata model: partition states, topic settings,
	// the ISR writes. Required.
	Cluster *cluster.Cluster
	// BrokerID is this broker's ID.
	BrokerID int32
	// Checkpoint is the path of the high-watermark checkpoint
	// (checkpoint.go), kept in multi-broker mode; empty keeps none.
	Checkpoint string
	// Follower copies partitions from their leaders (multi-broker mode).
	Follower Follower
	// ISRChanged, when set, is told every ISR change this broker wrote as
	// leader (for the ISR shrink and expand counters).
	ISRChanged func(replica.ISRChange)
	// Logger receives the manager's log lines.
	Logger *slog.Logger
}

// Manager is the replica manager of one broker.
type Manager struct {
	cluster    *cluster.Cluster
	cfg        cluster.Config
	brokerID   int32
	checkpoint string
	follower   Follower
	isrChanged func(replica.ISRChange)
	logger     *slog.Logger
	waiters    *dataWaiters

	stopping chan struct{}
	stopOnce sync.Once
	again    chan struct{} // room for one signal: reconcile again soon
	started  bool          // set by Start, before any Close
	loopDone chan struct{}
	wg       sync.WaitGroup // ISR writers

	nextRequest atomic.Uint64

	// written is the checkpoint last written; only the loop, then Close
	// after it, touch it.
	written map[log.TopicPartition]int64

	mu         sync.Mutex // guards the following
	partitions map[log.TopicPartition]*hosted
	closed     bool
	// checkpointed holds the high watermarks read from the checkpoint at
	// startup, for the first reconciliation; nil afterwards.
	checkpointed map[log.TopicPartition]int64
}

// New builds the manager; Start runs it.
func New(deps Deps) *Manager {
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		cluster:    deps.Cluster,
		cfg:        deps.Cluster.Settings(),
		brokerID:   deps.BrokerID,
		checkpoint: deps.Checkpoint,
		follower:   deps.Follower,
		isrChanged: deps.ISRChanged,
		logger:     logger.With("component", "replication"),
		waiters:    newDataWaiters(),
		stopping:   make(chan struct{}),
		loopDone:   make(chan struct{}),
		again:      make(chan struct{}, 1),
		partitions: map[log.TopicPartition]*hosted{},
	}
	if m.cfg.Replicated {
		m.checkpointed = m.readCheckpoint()
		m.written = m.checkpointed
	}
	return m
}

// Replicated reports multi-broker mode.
func (m *Manager) Replicated() bool { return m.cfg.Replicated }

// Start runs the reconciliation loop (multi-broker mode only).
func (m *Manager) Start() {
	if m.cfg.Replicated {
		m.started = true
		go m.run()
	}
}

// readCheckpoint reads the high-watermark checkpoint; one that cannot be
// read is reported and treated as none.
func (m *Manager) readCheckpoint() map[log.TopicPartition]int64 {
	if m.checkpoint == "" {
		return nil
	}
	hws, err := readHighWatermarks(m.checkpoint)
	if err != nil {
		m.logger.Warn("ignoring the high-watermark checkpoint; partitions start from high watermark 0", "err", err)
		return nil
	}
	m.logger.Info("high-watermark checkpoint read", "path", m.checkpoint, "partitions", len(hws))
	return hws
}

// writeCheckpoint writes every replicated partition's high watermark, when
// any changed since the last write.
func (m *Manager) writeCheckpoint() {
	if m.checkpoint == "" {
		return
	}
	m.mu.Lock()
	hws := make(map[log.TopicPartition]int64, len(m.partitions))
	for tp, h := range m.partitions {
		hws[tp] = h.highWatermark.Load()
	}
	m.mu.Unlock()
	if maps.Equal(hws, m.written) {
		return
	}
	if err := writeHighWatermarks(m.checkpoint, hws); err != nil {
		m.logger.Warn("writing the high-watermark checkpoint", "path", m.checkpoint, "err", err)
		return
	}
	m.written = hws
}

// Close stops reconciling, fences every leadership and stops the
// followers.
func (m *Manager) Close() error {
	m.stopOnce.Do(func() { close(m.stopping) })
	if m.started {
		<-m.loopDone
		m.writeCheckpoint()
	}
	m.mu.Lock()
	m.closed = true
	parts := m.partitions
	m.partitions = map[log.TopicPartition]*hosted{}
	m.mu.Unlock()
	for _, h := range parts {
		h.shutdown()
	}
	m.wg.Wait()
	return nil
}

// tickInterval is how often leaders check their followers' lag.
func (m *Manager) tickInterval() time.Duration {
	return min(m.cfg.ReplicaLagTimeMax/4, 250*time.Millisecond)
}

func (m *Manager) run() {
	defer close(m.loopDone)
	ticker := time.NewTicker(m.tickInterval())
	defer ticker.Stop()
	checkpoint := time.NewTicker(highWatermarkCheckpointInterval)
	defer checkpoint.Stop()
	changes := m.cluster.Changes()
	m.reconcile()
	for {
		select {
		case <-m.stopping:
			return
		case <-changes:
			m.reconcile()
		case <-m.again:
			m.reconcile()
		case now := <-ticker.C:
			m.tick(now)
		case <-checkpoint.C:
			m.writeCheckpoint()
		}
	}
}

// reconcileSoon asks the loop for another reconciliation.
func (m *Manager) reconcileSoon() {
	select {
	case m.again <- struct{}{}:
	default:
	}
}

// hostedPartition returns a hosted partition's replication state, or nil.
func (m *Manager) hostedPartition(topic string, partition int32) *hosted {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.partitions[log.TopicPartition{Topic: topic, Partition: partition}]
}

// reconcile brings every hosted partition to the role its state asks for.
func (m *Manager) reconcile() {
	sessionOK := m.cluster.SessionOK()
	seen := map[log.TopicPartition]bool{}
	for _, t := range m.cluster.Topics() {
		minISR := m.minInsyncReplicas(t)
		for _, p := range t.Partitions {
			state, l, ok := m.cluster.Partition(t.Name, p.Partition)
			if !ok || l == nil {
				continue
			}
			tp := log.TopicPartition{Topic: t.Name, Partition: p.Partition}
			seen[tp] = true
			m.mu.Lock()
			h := m.partitions[tp]
			if h != nil && h.log != l {
				delete(m.partitions, tp)
				m.mu.Unlock()
				h.shutdown()
				m.mu.Lock()
				h = nil
			}
			if h == nil {
				if m.closed {
					m.mu.Unlock()
					return
				}
				h = newHosted(m, tp, l)
				// Committed before the restart, so known to be committed
				// now; a checkpoint ahead of a log cut short is clamped.
				h.highWatermark.Store(min(m.checkpointed[tp], l.EndOffset()))
				m.partitions[tp] = h
			}
			m.mu.Unlock()
			h.apply(state, minISR, sessionOK)
		}
	}
	m.mu.Lock()
	// The checkpoint describes the logs as they were at startup: a
	// partition deleted and re-created later must not inherit it.
	m.checkpointed = nil
	var gone []*hosted
	for tp, h := range m.partitions {
		if !seen[tp] {
			gone = append(gone, h)
			delete(m.partitions, tp)
		}
	}
	m.mu.Unlock()
	for _, h := range gone {
		h.shutdown()
	}
}

// minInsyncReplicas is a topic's min.insync.replicas: its override, else
// the broker-wide default (static or changed at runtime), else 1.
func (m *Manager) minInsyncReplicas(t *cluster.Topic) int {
	if n, err := strconv.Atoi(m.cluster.TopicSetting(t, "min.insync.replicas")); err == nil && n >= 1 {
		return n
	}
	return 1
}

// tick lets time pass on every leader: followers lagging for longer than
// replica.lag.time.max.ms are proposed for removal from the ISR.
func (m *Manager) tick(now time.Time) {
	m.mu.Lock()
	parts := make([]*hosted, 0, len(m.partitions))
	for _, h := range m.partitions {
		parts = append(parts, h)
	}
	m.mu.Unlock()
	for _, h := range parts {
		h.mu.Lock()
		if h.leading {
			h.appendedLocked()
			h.applyLocked(h.leader.Tick(now))
		}
		h.mu.Unlock()
	}
}

// CleanerBound is the offset the log cleaner must not clean past on tp:
// the partition's high watermark, on its leader and on its followers, so
// no record a new leader could truncate away is used to remove another
// (broker/log/cleaner.go). A single broker has no bound (-1). A
// replicated partition this broker holds no replica state for yet is not
// cleaned (false).
func (m *Manager) CleanerBound(tp log.TopicPartition) (int64, bool) {
	if !m.cfg.Replicated {
		return -1, true
	}
	h := m.hostedPartition(tp.Topic, tp.Partition)
	if h == nil {
		return 0, false
	}
	return h.highWatermark.Load(), true
}
