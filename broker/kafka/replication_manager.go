package kafka

// The replica manager (multi-broker mode, docs/architecture.md §5): for every partition
// this broker hosts, lead it or follow its leader as the partition state in
// the coordination store says (the cluster model follows the state znodes
// through watches; there is no LeaderAndIsr request).
//
//   - Leading: a replica.Leader state machine is fed follower fetches
//     (replication_leader.go), appends and ticks; its decisions are carried
//     out here: publish the high watermark to fetchers, write ISR changes to
//     the state znode with compare-and-set, answer acks=all produces, stop
//     leading when fenced.
//   - Following: a fetcher goroutine truncates the log by leader epoch and
//     then copies the leader's log with Fetch requests carrying this
//     broker's ID as replica ID (replication_follower.go).
//
// Reconciliation is level-triggered: one goroutine compares, after every
// model change and session change, what each partition should be doing
// with what it does, and changes only what differs. A broker whose
// coordination session is lost (cluster.SessionOK) stops leading at once:
// pending acks=all requests fail with NOT_LEADER_OR_FOLLOWER and no write
// is acknowledged until the model was re-read under a new session.
//
// Without multi-broker mode the replica manager is inert and the data path
// keeps its single-broker rules (every written record is committed).

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

// replicationManager is the replica manager of one broker
// (Broker.replicaManager).
type replicationManager struct {
	b      *Broker
	cfg    cluster.Config
	logger *slog.Logger

	stopping chan struct{}
	stopOnce sync.Once
	again    chan struct{} // room for one signal: reconcile again soon
	started  bool          // set by start, within New, before any Close
	loopDone chan struct{}
	wg       sync.WaitGroup // fetchers and ISR writers

	nextRequest atomic.Uint64

	// written is the checkpoint last written; only the loop, then Close
	// after it, touch it.
	written map[log.TopicPartition]int64

	mu         sync.Mutex // guards the following
	partitions map[log.TopicPartition]*replicaPartition
	closed     bool
	// checkpointed holds the high watermarks read from the checkpoint at
	// startup, for the first reconciliation; nil afterwards.
	checkpointed map[log.TopicPartition]int64
}

// replicaPartition is one hosted partition's replication state.
type replicaPartition struct {
	m   *replicationManager
	tp  log.TopicPartition
	log *log.Log // a new log (topic re-created) gets a new replicaPartition

	// highWatermark is the published high watermark: the leader's, or the
	// last one a follower heard from its leader.
	highWatermark atomic.Int64
	// leadingEpoch is the leader epoch while leading, -1 otherwise; read
	// lock-free by every request on the data path.
	leadingEpoch atomic.Int64

	mu      sync.Mutex // guards the following
	leader  *replica.Leader
	leading bool
	epoch   int32
	state   *cluster.PartitionState // last state applied
	waiters map[replica.RequestID]chan int16
	fetcher *fetcher
	// fencedAt is the newest leader epoch the store showed to be over (an
	// ISR compare-and-set lost to a newer state); -1 when none.
	fencedAt int32
}

func newReplicationManager(b *Broker) *replicationManager {
	m := &replicationManager{
		b:          b,
		cfg:        b.cluster.Settings(),
		logger:     b.logger.With("component", "replication"),
		stopping:   make(chan struct{}),
		loopDone:   make(chan struct{}),
		again:      make(chan struct{}, 1),
		partitions: map[log.TopicPartition]*replicaPartition{},
	}
	if m.cfg.Replicated {
		m.checkpointed = m.readCheckpoint()
		m.written = m.checkpointed
	}
	return m
}

// start runs the reconciliation loop (multi-broker mode only).
func (m *replicationManager) start() {
	if m.cfg.Replicated {
		m.started = true
		go m.run()
	}
}

// readCheckpoint reads the high-watermark checkpoint; one that cannot be
// read is reported and treated as none.
func (m *replicationManager) readCheckpoint() map[log.TopicPartition]int64 {
	if m.b.hwCheckpoint == "" {
		return nil
	}
	hws, err := readHighWatermarks(m.b.hwCheckpoint)
	if err != nil {
		m.logger.Warn("ignoring the high-watermark checkpoint; partitions start from high watermark 0", "err", err)
		return nil
	}
	m.logger.Info("high-watermark checkpoint read", "path", m.b.hwCheckpoint, "partitions", len(hws))
	return hws
}

// writeCheckpoint writes every replicated partition's high watermark, when
// any changed since the last write.
func (m *replicationManager) writeCheckpoint() {
	if m.b.hwCheckpoint == "" {
		return
	}
	m.mu.Lock()
	hws := make(map[log.TopicPartition]int64, len(m.partitions))
	for tp, rp := range m.partitions {
		hws[tp] = rp.highWatermark.Load()
	}
	m.mu.Unlock()
	if maps.Equal(hws, m.written) {
		return
	}
	if err := writeHighWatermarks(m.b.hwCheckpoint, hws); err != nil {
		m.logger.Warn("writing the high-watermark checkpoint", "path", m.b.hwCheckpoint, "err", err)
		return
	}
	m.written = hws
}

// replication returns the replica manager, or nil without multi-broker mode.
func (b *Broker) replication() *replicationManager {
	if !b.replicaManager.cfg.Replicated {
		return nil
	}
	return b.replicaManager
}

// Close stops reconciling, fences every leadership and stops the fetchers.
func (m *replicationManager) Close() error {
	m.stopOnce.Do(func() { close(m.stopping) })
	if m.started {
		<-m.loopDone
		m.writeCheckpoint()
	}
	m.mu.Lock()
	m.closed = true
	parts := m.partitions
	m.partitions = map[log.TopicPartition]*replicaPartition{}
	m.mu.Unlock()
	for _, rp := range parts {
		rp.shutdown()
	}
	m.wg.Wait()
	return nil
}

// tickInterval is how often leaders check their followers' lag.
func (m *replicationManager) tickInterval() time.Duration {
	return min(m.cfg.ReplicaLagTimeMax/4, 250*time.Millisecond)
}

func (m *replicationManager) run() {
	defer close(m.loopDone)
	ticker := time.NewTicker(m.tickInterval())
	defer ticker.Stop()
	checkpoint := time.NewTicker(highWatermarkCheckpointInterval)
	defer checkpoint.Stop()
	changes := m.b.cluster.Changes()
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
func (m *replicationManager) reconcileSoon() {
	select {
	case m.again <- struct{}{}:
	default:
	}
}

// partition returns a hosted partition's replication state, or nil.
func (m *replicationManager) partition(topic string, partition int32) *replicaPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.partitions[log.TopicPartition{Topic: topic, Partition: partition}]
}

// reconcile brings every hosted partition to the role its state asks for.
func (m *replicationManager) reconcile() {
	sessionOK := m.b.cluster.SessionOK()
	seen := map[log.TopicPartition]bool{}
	for _, t := range m.b.cluster.Topics() {
		minISR := m.minInsyncReplicas(t)
		for _, p := range t.Partitions {
			state, l, ok := m.b.cluster.Partition(t.Name, p.Partition)
			if !ok || l == nil {
				continue
			}
			tp := log.TopicPartition{Topic: t.Name, Partition: p.Partition}
			seen[tp] = true
			m.mu.Lock()
			rp := m.partitions[tp]
			if rp != nil && rp.log != l {
				delete(m.partitions, tp)
				m.mu.Unlock()
				rp.shutdown()
				m.mu.Lock()
				rp = nil
			}
			if rp == nil {
				if m.closed {
					m.mu.Unlock()
					return
				}
				rp = &replicaPartition{m: m, tp: tp, log: l, waiters: map[replica.RequestID]chan int16{}, fencedAt: -1}
				rp.leadingEpoch.Store(-1)
				// Committed before the restart, so known to be committed
				// now; a checkpoint ahead of a log cut short is clamped.
				rp.highWatermark.Store(min(m.checkpointed[tp], l.EndOffset()))
				m.partitions[tp] = rp
			}
			m.mu.Unlock()
			rp.apply(state, minISR, sessionOK)
		}
	}
	m.mu.Lock()
	// The checkpoint describes the logs as they were at startup: a
	// partition deleted and re-created later must not inherit it.
	m.checkpointed = nil
	var gone []*replicaPartition
	for tp, rp := range m.partitions {
		if !seen[tp] {
			gone = append(gone, rp)
			delete(m.partitions, tp)
		}
	}
	m.mu.Unlock()
	for _, rp := range gone {
		rp.shutdown()
	}
}

// minInsyncReplicas is a topic's min.insync.replicas: its override, else
// the broker-wide default (static or changed at runtime), else 1.
func (m *replicationManager) minInsyncReplicas(t *cluster.Topic) int {
	if n, err := strconv.Atoi(m.b.cluster.TopicSetting(t, "min.insync.replicas")); err == nil && n >= 1 {
		return n
	}
	return 1
}

// tick lets time pass on every leader: followers lagging for longer than
// replica.lag.time.max.ms are proposed for removal from the ISR.
func (m *replicationManager) tick(now time.Time) {
	m.mu.Lock()
	parts := make([]*replicaPartition, 0, len(m.partitions))
	for _, rp := range m.partitions {
		parts = append(parts, rp)
	}
	m.mu.Unlock()
	for _, rp := range parts {
		rp.mu.Lock()
		if rp.leading {
			rp.appendedLocked()
			rp.applyLocked(rp.leader.Tick(now))
		}
		rp.mu.Unlock()
	}
}

// apply makes the partition lead, follow or idle as state says.
func (rp *replicaPartition) apply(state *cluster.PartitionState, minISR int, sessionOK bool) {
	me := rp.m.b.cfg.BrokerID
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.state = state
	switch {
	case state.Leader == me && !sessionOK:
		rp.fenceLocked("the coordination session is lost")
	case state.Leader == me && state.LeaderEpoch <= rp.fencedAt:
		// The model lags the store; the newer state is on its way.
	case state.Leader == me:
		if rp.leading && state.LeaderEpoch == rp.epoch {
			rp.setMinISRLocked(minISR)
			return
		}
		rp.stopFetcherLocked()
		rp.becomeLeaderLocked(state, minISR)
	case state.Leader >= 0:
		if rp.leading {
			rp.fenceLocked("another broker leads")
		}
		if f := rp.fetcher; f != nil && f.leader == state.Leader && f.epoch == state.LeaderEpoch {
			return
		}
		rp.stopFetcherLocked()
		rp.startFetcherLocked(state.Leader, state.LeaderEpoch)
	default:
		if rp.leading {
			rp.fenceLocked("the partition has no leader")
		}
		rp.stopFetcherLocked()
	}
}

func (rp *replicaPartition) setMinISRLocked(minISR int) {
	cfg := replica.Config{ReplicaLagTimeMax: rp.m.cfg.ReplicaLagTimeMax, MinInsyncReplicas: minISR}
	if err := rp.leader.SetConfig(cfg); err != nil {
		rp.m.logger.Warn("replication settings rejected", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "err", err)
	}
}

// becomeLeaderLocked starts (or continues, at a newer epoch) leading.
func (rp *replicaPartition) becomeLeaderLocked(state *cluster.PartitionState, minISR int) {
	m := rp.m
	if rp.leader == nil {
		l, err := replica.NewLeader(replica.Config{ReplicaLagTimeMax: m.cfg.ReplicaLagTimeMax, MinInsyncReplicas: minISR})
		if err != nil {
			m.logger.Error("creating the leader state", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "err", err)
			return
		}
		rp.leader = l
	} else {
		rp.setMinISRLocked(minISR)
	}
	d, err := rp.leader.BecomeLeader(replica.LeaderState{
		LocalID:       m.b.cfg.BrokerID,
		LeaderEpoch:   state.LeaderEpoch,
		Replicas:      state.Replicas,
		ISR:           state.ISR,
		StateVersion:  state.StateVersion,
		LogEndOffset:  rp.log.EndOffset(),
		HighWatermark: rp.highWatermark.Load(),
	}, time.Now())
	if err != nil {
		m.logger.Error("cannot lead", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "leader_epoch", state.LeaderEpoch, "err", err)
		return
	}
	wasLeading := rp.leading
	rp.leading, rp.epoch = true, state.LeaderEpoch
	rp.leadingEpoch.Store(int64(state.LeaderEpoch))
	rp.applyLocked(d)
	if !wasLeading {
		m.logger.Info("leading", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "leader_epoch", state.LeaderEpoch,
			"isr", state.ISR, "log_end_offset", rp.log.EndOffset(), "high_watermark", rp.highWatermark.Load())
	}
}

// fenceLocked stops leading: pending acks=all requests fail with
// NOT_LEADER_OR_FOLLOWER and none is acknowledged afterwards.
func (rp *replicaPartition) fenceLocked(why string) {
	rp.leadingEpoch.Store(-1)
	if !rp.leading {
		return
	}
	rp.leading = false
	rp.applyLocked(rp.leader.Fence())
	rp.m.logger.Info("stopped leading", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "leader_epoch", rp.epoch, "why", why)
}

// shutdown fences and stops the partition for good (deleted, moved, or
// the broker is stopping).
func (rp *replicaPartition) shutdown() {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.fenceLocked("the partition is no longer replicated here")
	rp.stopFetcherLocked()
	for id, ch := range rp.waiters {
		ch <- replica.ErrNotLeaderOrFollower.Code
		delete(rp.waiters, id)
	}
}

// appendedLocked tells the leader machine how far the log has grown.
func (rp *replicaPartition) appendedLocked() {
	d, err := rp.leader.Appended(rp.log.EndOffset())
	if err != nil {
		rp.m.logger.Warn("leader log end went back", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "err", err)
		return
	}
	rp.applyLocked(d)
}

// applyLocked carries out a leader machine's decisions.
func (rp *replicaPartition) applyLocked(d replica.Decisions) {
	if d.HighWatermarkChanged {
		rp.highWatermark.Store(d.HighWatermark)
		rp.m.b.notifyData(rp.tp.Topic, rp.tp.Partition)
	}
	for _, id := range d.Completed {
		rp.answerLocked(id, 0)
	}
	for _, f := range d.Failed {
		code := replica.ErrNotLeaderOrFollower.Code
		if ke, ok := f.Err.(*replica.KafkaError); ok {
			code = ke.Code
		}
		rp.answerLocked(f.ID, code)
	}
	if d.ProposeISR != nil && rp.state != nil {
		change := *d.ProposeISR
		next := &cluster.PartitionState{
			Topic: rp.tp.Topic, Partition: rp.tp.Partition, Replicas: rp.state.Replicas,
			Leader: rp.m.b.cfg.BrokerID, LeaderEpoch: change.LeaderEpoch, ISR: change.ISR,
			ControllerEpoch: rp.state.ControllerEpoch,
		}
		rp.m.logger.Info("changing the ISR", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "isr", change.ISR, "added", change.Added, "removed", change.Removed)
		rp.m.wg.Add(1)
		go rp.writeISR(change, next)
	}
	if d.Fenced {
		rp.leading = false
		rp.leadingEpoch.Store(-1)
	}
}

func (rp *replicaPartition) answerLocked(id replica.RequestID, code int16) {
	if ch, ok := rp.waiters[id]; ok {
		ch <- code // buffered, one answer per request
		delete(rp.waiters, id)
	}
}

// writeISR writes a proposed ISR with compare-and-set and reports the
// outcome to the leader machine; after a failure it re-reads the state so
// the machine can tell a lost race (fenced) from a write that succeeded
// with its answer lost.
func (rp *replicaPartition) writeISR(change replica.ISRChange, next *cluster.PartitionState) {
	defer rp.m.wg.Done()
	c := rp.m.b.cluster
	version, err := c.WritePartitionState(next, change.ExpectedVersion)
	var observed *cluster.PartitionState
	if err != nil {
		var rerr error
		if observed, rerr = c.ReadPartitionState(rp.tp.Topic, rp.tp.Partition); rerr != nil {
			rp.m.logger.Warn("ISR write outcome unknown; stopping leading until the state is known", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "write_err", err, "read_err", rerr)
		}
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.leader == nil {
		return
	}
	switch {
	case err == nil:
		// Counted only here, where the leader saw its write succeed (as
		// Kafka counts them); a write whose answer was lost is not.
		rp.m.b.metrics.isrChanged(change)
		rp.applyLocked(rp.leader.ISRWritten(change.ID, version))
	case observed == nil:
		rp.fenceLocked("the ISR write's outcome is unknown")
		rp.m.reconcileSoon()
	default:
		d, ferr := rp.leader.ISRWriteFailed(change.ID, replica.ObservedState{
			Leader: observed.Leader, LeaderEpoch: observed.LeaderEpoch, ISR: observed.ISR, Version: observed.StateVersion,
		})
		if ferr != nil {
			rp.m.logger.Warn("ISR write failure not understood", "topic", rp.tp.Topic, "partition", rp.tp.Partition, "err", ferr)
		}
		rp.applyLocked(d)
		if d.Fenced {
			// Never lead again at this epoch: the store says it is over,
			// even if this broker's model has not caught up yet.
			rp.fencedAt = max(rp.fencedAt, rp.epoch)
			rp.m.logger.Info("fenced by the partition state", "topic", rp.tp.Topic, "partition", rp.tp.Partition,
				"leader", observed.Leader, "leader_epoch", observed.LeaderEpoch)
		}
	}
}
