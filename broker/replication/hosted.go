package replication

// One hosted partition's replication state, and the carrying out of its
// leader machine's decisions.

import (
	"sync"
	"sync/atomic"
	"time"

	"millrace/broker/cluster"
	"millrace/broker/log"
	"millrace/broker/replica"
)

// hosted is one hosted partition's replication state.
type hosted struct {
	m   *Manager
	tp  log.TopicPartition
	log *log.Log // a new log (topic re-created) gets a new hosted

	// highWatermark is the published high watermark: the leader's, or the
	// last one a follower heard from its leader.
	highWatermark atomic.Int64
	// leadingEpoch is the leader epoch while leading, -1 otherwise; read
	// lock-free by every request on the data path.
	leadingEpoch atomic.Int64

	mu        sync.Mutex // guards the following
	leader    *replica.Leader
	leading   bool
	epoch     int32
	state     *cluster.PartitionState // last state applied
	waiters   map[replica.RequestID]chan int16
	following *following
	// fencedAt is the newest leader epoch the store showed to be over (an
	// ISR compare-and-set lost to a newer state); -1 when none.
	fencedAt int32
}

func newHosted(m *Manager, tp log.TopicPartition, l *log.Log) *hosted {
	h := &hosted{m: m, tp: tp, log: l, waiters: map[replica.RequestID]chan int16{}, fencedAt: -1}
	h.leadingEpoch.Store(-1)
	return h
}

// apply makes the partition lead, follow or idle as state says.
func (h *hosted) apply(state *cluster.PartitionState, minISR int, sessionOK bool) {
	me := h.m.brokerID
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state = state
	switch {
	case state.Leader == me && !sessionOK:
		h.fenceLocked("the coordination session is lost")
	case state.Leader == me && state.LeaderEpoch <= h.fencedAt:
		// The model lags the store; the newer state is on its way.
	case state.Leader == me:
		if h.leading && state.LeaderEpoch == h.epoch {
			h.setMinISRLocked(minISR)
			return
		}
		h.stopFollowingLocked()
		h.becomeLeaderLocked(state, minISR)
	case state.Leader >= 0:
		if h.leading {
			h.fenceLocked("another broker leads")
		}
		if f := h.following; f != nil && f.leader == state.Leader && f.epoch == state.LeaderEpoch {
			return
		}
		h.stopFollowingLocked()
		h.startFollowingLocked(state.Leader, state.LeaderEpoch)
	default:
		if h.leading {
			h.fenceLocked("the partition has no leader")
		}
		h.stopFollowingLocked()
	}
}

func (h *hosted) setMinISRLocked(minISR int) {
	cfg := replica.Config{ReplicaLagTimeMax: h.m.cfg.ReplicaLagTimeMax, MinInsyncReplicas: minISR}
	if err := h.leader.SetConfig(cfg); err != nil {
		h.m.logger.Warn("replication settings rejected", "topic", h.tp.Topic, "partition", h.tp.Partition, "err", err)
	}
}

// becomeLeaderLocked starts (or continues, at a newer epoch) leading.
func (h *hosted) becomeLeaderLocked(state *cluster.PartitionState, minISR int) {
	m := h.m
	if h.leader == nil {
		l, err := replica.NewLeader(replica.Config{ReplicaLagTimeMax: m.cfg.ReplicaLagTimeMax, MinInsyncReplicas: minISR})
		if err != nil {
			m.logger.Error("creating the leader state", "topic", h.tp.Topic, "partition", h.tp.Partition, "err", err)
			return
		}
		h.leader = l
	} else {
		h.setMinISRLocked(minISR)
	}
	d, err := h.leader.BecomeLeader(replica.LeaderState{
		LocalID:       m.brokerID,
		LeaderEpoch:   state.LeaderEpoch,
		Replicas:      state.Replicas,
		ISR:           state.ISR,
		StateVersion:  state.StateVersion,
		LogEndOffset:  h.log.EndOffset(),
		HighWatermark: h.highWatermark.Load(),
	}, time.Now())
	if err != nil {
		m.logger.Error("cannot lead", "topic", h.tp.Topic, "partition", h.tp.Partition, "leader_epoch", state.LeaderEpoch, "err", err)
		return
	}
	wasLeading := h.leading
	h.leading, h.epoch = true, state.LeaderEpoch
	h.leadingEpoch.Store(int64(state.LeaderEpoch))
	h.applyLocked(d)
	if !wasLeading {
		m.logger.Info("leading", "topic", h.tp.Topic, "partition", h.tp.Partition, "leader_epoch", state.LeaderEpoch,
			"isr", state.ISR, "log_end_offset", h.log.EndOffset(), "high_watermark", h.highWatermark.Load())
	}
}

// fenceLocked stops leading: pending acks=all requests fail with
// NOT_LEADER_OR_FOLLOWER and none is acknowledged afterwards.
func (h *hosted) fenceLocked(why string) {
	h.leadingEpoch.Store(-1)
	if !h.leading {
		return
	}
	h.leading = false
	h.applyLocked(h.leader.Fence())
	h.m.logger.Info("stopped leading", "topic", h.tp.Topic, "partition", h.tp.Partition, "leader_epoch", h.epoch, "why", why)
}

// shutdown fences and stops the partition for good (deleted, moved, or
// the broker is stopping).
func (h *hosted) shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fenceLocked("the partition is no longer replicated here")
	h.stopFollowingLocked()
	for id, ch := range h.waiters {
		ch <- replica.ErrNotLeaderOrFollower.Code
		delete(h.waiters, id)
	}
}

// appendedLocked tells the leader machine how far the log has grown.
func (h *hosted) appendedLocked() {
	d, err := h.leader.Appended(h.log.EndOffset())
	if err != nil {
		h.m.logger.Warn("leader log end went back", "topic", h.tp.Topic, "partition", h.tp.Partition, "err", err)
		return
	}
	h.applyLocked(d)
}

// applyLocked carries out a leader machine's decisions.
func (h *hosted) applyLocked(d replica.Decisions) {
	if d.HighWatermarkChanged {
		h.highWatermark.Store(d.HighWatermark)
		h.m.NotifyData(h.tp.Topic, h.tp.Partition)
	}
	for _, id := range d.Completed {
		h.answerLocked(id, 0)
	}
	for _, f := range d.Failed {
		code := replica.ErrNotLeaderOrFollower.Code
		if ke, ok := f.Err.(*replica.KafkaError); ok {
			code = ke.Code
		}
		h.answerLocked(f.ID, code)
	}
	if d.ProposeISR != nil && h.state != nil {
		change := *d.ProposeISR
		next := &cluster.PartitionState{
			Topic: h.tp.Topic, Partition: h.tp.Partition, Replicas: h.state.Replicas,
			Leader: h.m.brokerID, LeaderEpoch: change.LeaderEpoch, ISR: change.ISR,
			ControllerEpoch: h.state.ControllerEpoch,
		}
		h.m.logger.Info("changing the ISR", "topic", h.tp.Topic, "partition", h.tp.Partition, "isr", change.ISR, "added", change.Added, "removed", change.Removed)
		h.m.wg.Add(1)
		go h.writeISR(change, next)
	}
	if d.Fenced {
		h.leading = false
		h.leadingEpoch.Store(-1)
	}
}

func (h *hosted) answerLocked(id replica.RequestID, code int16) {
	if ch, ok := h.waiters[id]; ok {
		ch <- code // buffered, one answer per request
		delete(h.waiters, id)
	}
}

// writeISR writes a proposed ISR with compare-and-set and reports the
// outcome to the leader machine; after a failure it re-reads the state so
// the machine can tell a lost race (fenced) from a write that succeeded
// with its answer lost.
func (h *hosted) writeISR(change replica.ISRChange, next *cluster.PartitionState) {
	defer h.m.wg.Done()
	c := h.m.cluster
	version, err := c.WritePartitionState(next, change.ExpectedVersion)
	var observed *cluster.PartitionState
	if err != nil {
		var rerr error
		if observed, rerr = c.ReadPartitionState(h.tp.Topic, h.tp.Partition); rerr != nil {
			h.m.logger.Warn("ISR write outcome unknown; stopping leading until the state is known", "topic", h.tp.Topic, "partition", h.tp.Partition, "write_err", err, "read_err", rerr)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leader == nil {
		return
	}
	switch {
	case err == nil:
		// Counted only here, where the leader saw its write succeed (as
		// Kafka counts them); a write whose answer was lost is not.
		if h.m.isrChanged != nil {
			h.m.isrChanged(change)
		}
		h.applyLocked(h.leader.ISRWritten(change.ID, version))
	case observed == nil:
		h.fenceLocked("the ISR write's outcome is unknown")
		h.m.reconcileSoon()
	default:
		d, ferr := h.leader.ISRWriteFailed(change.ID, replica.ObservedState{
			Leader: observed.Leader, LeaderEpoch: observed.LeaderEpoch, ISR: observed.ISR, Version: observed.StateVersion,
		})
		if ferr != nil {
			h.m.logger.Warn("ISR write failure not understood", "topic", h.tp.Topic, "partition", h.tp.Partition, "err", ferr)
		}
		h.applyLocked(d)
		if d.Fenced {
			// Never lead again at this epoch: the store says it is over,
			// even if this broker's model has not caught up yet.
			h.fencedAt = max(h.fencedAt, h.epoch)
			h.m.logger.Info("fenced by the partition state", "topic", h.tp.Topic, "partition", h.tp.Partition,
				"leader", observed.Leader, "leader_epoch", observed.LeaderEpoch)
		}
	}
}
