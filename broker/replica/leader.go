package replica

// The leader side of one partition: a state machine fed by the caller with
// the events below, in order, under the caller's lock. Each returns the
// Decisions the caller must carry out:
//
//   - HighWatermark: publish to fetchers and the high-watermark checkpoint
//     when HighWatermarkChanged. It never moves backward while this broker
//     leads.
//   - ProposeISR: write {leader, leader_epoch, isr, controller_epoch} to the
//     partition state znode with compare-and-set on ExpectedVersion, then
//     report ISRWritten or ISRWriteFailed with the proposal's ID. The ISR in
//     force does not change until ISRWritten (KIP-497's pending ISR).
//   - Completed / Failed: answer those acks=all produce requests.
//   - Fenced: this broker no longer leads; stop serving produce and fetch as
//     leader and become a follower when the new state arrives.
//
// The machine holds no clock: every event that depends on time carries it.

import (
	"fmt"
	"slices"
	"time"
)

// RequestID names a pending acks=all produce request. The caller chooses it;
// it must be unique among the requests pending on one Leader.
type RequestID uint64

// LeaderState is what the broker knows when it becomes (or remains) leader:
// the partition state read from the coordination store plus its own log.
type LeaderState struct {
	// LocalID is this broker's ID; it must be in Replicas and ISR.
	LocalID int32
	// LeaderEpoch is the epoch of this leadership.
	LeaderEpoch int32
	// Replicas is the assignment, ISR the in-sync set from the state znode,
	// StateVersion that znode's version (the compare-and-set token).
	Replicas     []int32
	ISR          []int32
	StateVersion int32
	// LogEndOffset is the local log's end offset now; it is also the first
	// offset of this epoch, which a follower must reach before it may
	// rejoin the ISR.
	LogEndOffset int64
	// HighWatermark is the high watermark this broker last knew (from its
	// checkpoint or, as a follower, from the old leader). Clamped to
	// LogEndOffset.
	HighWatermark int64
}

// ObservedState is the partition state the caller re-read from the store
// after a failed compare-and-set.
type ObservedState struct {
	Leader      int32
	LeaderEpoch int32
	ISR         []int32
	Version     int32
}

// ISRChange is a proposed ISR to write with compare-and-set.
type ISRChange struct {
	// ID is quoted back in ISRWritten / ISRWriteFailed.
	ID uint64
	// LeaderEpoch and ISR are the values to write (leader unchanged).
	LeaderEpoch int32
	ISR         []int32
	// ExpectedVersion is the znode version the write must match.
	ExpectedVersion int32
	// Added and Removed explain the change for logs and metrics.
	Added   []int32
	Removed []int32
}

// FailedRequest is an acks=all produce request that must be answered with
// Err (one of the KafkaError values).
type FailedRequest struct {
	ID  RequestID
	Err error
}

// Decisions are what an event decided; see the file header.
type Decisions struct {
	HighWatermark        int64
	HighWatermarkChanged bool
	ProposeISR           *ISRChange
	Completed            []RequestID
	Failed               []FailedRequest
	Fenced               bool
}

type role int

const (
	roleNone role = iota // never led, or stepped down
	roleLeading
	roleFenced
)

// followerState is the leader's view of one follower, as in Kafka's Replica.
type followerState struct {
	// endOffset is the follower's log end offset: its last fetch offset;
	// -1 until it fetches in this leadership term.
	endOffset int64
	// lastCaughtUp is the last time the follower was known to have all the
	// records the leader had at some fetch; lastFetch and
	// lastFetchLeaderEnd are the previous fetch's time and the leader's log
	// end offset then.
	lastCaughtUp       time.Time
	lastFetch          time.Time
	lastFetchLeaderEnd int64
	// logStart is the follower's log start offset as its last fetch said;
	// -1 until then (read_replica.go).
	logStart int64
}

type pendingRequest struct {
	id         RequestID
	lastOffset int64
}

// Leader is the leader-side replication state machine of one partition.
// It is not safe for concurrent use; the caller serialises events.
type Leader struct {
	cfg  Config
	role role

	localID    int32
	epoch      int32
	replicas   []int32
	isr        []int32 // in force: written to the store
	version    int32
	inflight   *ISRChange
	nextChange uint64

	logEnd     int64
	hw         int64
	epochStart int64
	followers  map[int32]*followerState
	pending    []pendingRequest // sorted by lastOffset
}

// NewLeader returns a state machine that does not lead yet; call
// BecomeLeader.
func NewLeader(cfg Config) (*Leader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Leader{cfg: cfg, followers: map[int32]*followerState{}}, nil
}

// SetConfig changes the settings (a topic's min.insync.replicas was
// altered). Pending requests are re-evaluated by the next event.
func (l *Leader) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.cfg = cfg
	return nil
}

// IsLeader reports whether the machine currently leads (not fenced).
func (l *Leader) IsLeader() bool { return l.role == roleLeading }

// LeaderEpoch is the epoch of the current or last leadership.
func (l *Leader) LeaderEpoch() int32 { return l.epoch }

// HighWatermark is the current high watermark.
func (l *Leader) HighWatermark() int64 { return l.hw }

// LogEndOffset is the leader's log end offset as last reported.
func (l *Leader) LogEndOffset() int64 { return l.logEnd }

// ISR is the in-sync replica set in force (written to the store).
func (l *Leader) ISR() []int32 { return slices.Clone(l.isr) }

// InFlight is the ISR change being written, or nil.
func (l *Leader) InFlight() *ISRChange { return cloneChange(l.inflight) }

// FollowerEndOffset is the leader's view of a follower's log end offset
// (-1 when unknown).
func (l *Leader) FollowerEndOffset(id int32) int64 {
	if f, ok := l.followers[id]; ok {
		return f.endOffset
	}
	return -1
}

// Pending is the number of acks=all requests waiting.
func (l *Leader) Pending() int { return len(l.pending) }

// BecomeLeader starts (or continues) leading at s.LeaderEpoch.
//
// From a non-leading state it starts a new term: follower positions are
// unknown until each fetches, and ISR followers count as caught up now, so
// they have replica.lag.time.max.ms to show up. While already leading, a
// newer (or the same) epoch continues the term: the controller bumped the
// epoch to change the ISR or the assignment, this broker never stopped
// leading and never truncated, so follower positions and pending requests
// stay valid, and an ISR write in flight is dropped (its compare-and-set
// fails against the controller's newer version). An older epoch is refused.
func (l *Leader) BecomeLeader(s LeaderState, now time.Time) (Decisions, error) {
	if err := checkLeaderState(s); err != nil {
		return Decisions{}, err
	}
	if l.role != roleNone && s.LeaderEpoch < l.epoch {
		return Decisions{}, fmt.Errorf("%w: leader epoch %d is older than the current %d", ErrInvalidEvent, s.LeaderEpoch, l.epoch)
	}
	continuing := l.role == roleLeading
	if continuing && s.LogEndOffset < l.logEnd {
		return Decisions{}, fmt.Errorf("%w: a continuing leader's log end offset went back from %d to %d", ErrInvalidEvent, l.logEnd, s.LogEndOffset)
	}
	oldHW := l.hw
	followers := make(map[int32]*followerState, len(s.Replicas))
	for _, id := range s.Replicas {
		if id == s.LocalID {
			continue
		}
		// A follower the controller just removed from the ISR (its broker
		// died) starts over: its last fetch position says nothing about
		// the replica that comes back, and keeping it would re-add the
		// follower at once, and the controller remove it again, forever.
		removed := slices.Contains(l.isr, id) && !slices.Contains(s.ISR, id)
		if f, ok := l.followers[id]; ok && continuing && !removed {
			followers[id] = f
			continue
		}
		f := &followerState{endOffset: -1, lastFetchLeaderEnd: -1, logStart: -1}
		if slices.Contains(s.ISR, id) {
			f.lastCaughtUp = now
		}
		followers[id] = f
	}
	if continuing && s.LeaderEpoch > l.epoch {
		l.epochStart = s.LogEndOffset
	} else if !continuing {
		l.epochStart = s.LogEndOffset
		l.pending = nil // failed when the last term ended
		l.hw = min(max(s.HighWatermark, 0), s.LogEndOffset)
		oldHW = -1 // report the starting high watermark
	}
	l.role = roleLeading
	l.localID, l.epoch = s.LocalID, s.LeaderEpoch
	l.replicas, l.isr, l.version = slices.Clone(s.Replicas), slices.Clone(s.ISR), s.StateVersion
	l.inflight = nil
	l.logEnd = s.LogEndOffset
	l.followers = followers
	if continuing {
		l.hw = max(l.hw, min(s.HighWatermark, s.LogEndOffset))
	}
	d := l.expandAndSettle()
	d.HighWatermarkChanged = d.HighWatermarkChanged || l.hw != oldHW
	return d, nil
}

func checkLeaderState(s LeaderState) error {
	switch {
	case !slices.Contains(s.Replicas, s.LocalID):
		return fmt.Errorf("%w: broker %d leads but is not among the replicas %v", ErrInvalidEvent, s.LocalID, s.Replicas)
	case !slices.Contains(s.ISR, s.LocalID):
		return fmt.Errorf("%w: broker %d leads but is not in the ISR %v", ErrInvalidEvent, s.LocalID, s.ISR)
	case s.LogEndOffset < 0:
		return fmt.Errorf("%w: negative log end offset %d", ErrInvalidEvent, s.LogEndOffset)
	}
	for i, id := range s.ISR {
		if !slices.Contains(s.Replicas, id) || slices.Contains(s.ISR[:i], id) {
			return fmt.Errorf("%w: ISR %v is not a set of the replicas %v", ErrInvalidEvent, s.ISR, s.Replicas)
		}
	}
	return nil
}

// Fence ends this leadership: the epoch was fenced by a newer one, the
// controller moved leadership away, or the coordination session expired.
// Every pending acks=all request fails with NOT_LEADER_OR_FOLLOWER, and no
// request is completed afterwards: a fenced leader must never acknowledge,
// because a new leader may already have truncated or overwritten the records.
func (l *Leader) Fence() Decisions {
	d := Decisions{HighWatermark: l.hw}
	if l.role != roleLeading {
		return d
	}
	l.role = roleFenced
	l.inflight = nil
	for _, p := range l.pending {
		d.Failed = append(d.Failed, FailedRequest{p.id, ErrNotLeaderOrFollower})
	}
	l.pending = nil
	d.Fenced = true
	return d
}

// CheckAcksAll is asked before appending an acks=all batch: nil, or
// NOT_LEADER_OR_FOLLOWER, or NOT_ENOUGH_REPLICAS when the ISR in force is
// smaller than min.insync.replicas (the batch must then not be appended).
func (l *Leader) CheckAcksAll() error {
	if l.role != roleLeading {
		return ErrNotLeaderOrFollower
	}
	if len(l.isr) < l.cfg.MinInsyncReplicas {
		return ErrNotEnoughReplicas
	}
	return nil
}

// Appended reports that the local log's end offset advanced to logEnd (a
// produce was appended). With the leader alone in the ISR this alone moves
// the high watermark.
func (l *Leader) Appended(logEnd int64) (Decisions, error) {
	if l.role != roleLeading {
		return Decisions{HighWatermark: l.hw}, nil
	}
	if logEnd < l.logEnd {
		return Decisions{HighWatermark: l.hw}, fmt.Errorf("%w: the leader's log end offset went back from %d to %d", ErrInvalidEvent, l.logEnd, logEnd)
	}
	l.logEnd = logEnd
	return l.settle(), nil
}

// WaitForAcks registers an appended acks=all request whose last record is
// at lastOffset. It completes when the high watermark passes lastOffset, and
// may do so at once. A fenced or stepped-down leader fails it immediately.
func (l *Leader) WaitForAcks(id RequestID, lastOffset int64) (Decisions, error) {
	if l.role != roleLeading {
		return Decisions{HighWatermark: l.hw, Failed: []FailedRequest{{id, ErrNotLeaderOrFollower}}}, nil
	}
	if lastOffset >= l.logEnd || lastOffset < 0 {
		return Decisions{HighWatermark: l.hw}, fmt.Errorf("%w: offset %d is not in the log (end offset %d)", ErrInvalidEvent, lastOffset, l.logEnd)
	}
	i, _ := slices.BinarySearchFunc(l.pending, lastOffset, func(p pendingRequest, off int64) int {
		if p.lastOffset <= off {
			return -1
		}
		return 1
	})
	l.pending = slices.Insert(l.pending, i, pendingRequest{id, lastOffset})
	return l.settle(), nil
}

// Abandon forgets a pending request (its produce timeout expired and the
// caller answered REQUEST_TIMED_OUT).
func (l *Leader) Abandon(id RequestID) {
	l.pending = slices.DeleteFunc(l.pending, func(p pendingRequest) bool { return p.id == id })
}
