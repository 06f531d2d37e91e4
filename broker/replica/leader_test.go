package replica

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// harness drives a Leader and records everything it decided.
type harness struct {
	t         *testing.T
	l         *Leader
	version   int32
	completed []RequestID
	failed    map[RequestID]error
	proposal  *ISRChange
	hws       []int64
}

func newHarness(t *testing.T, minISR int, isr []int32, logEnd int64) *harness {
	t.Helper()
	l, err := NewLeader(Config{ReplicaLagTimeMax: 10 * time.Second, MinInsyncReplicas: minISR})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, l: l, failed: map[RequestID]error{}}
	h.take(l.BecomeLeader(LeaderState{LocalID: 1, LeaderEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: isr, StateVersion: 7, LogEndOffset: logEnd, HighWatermark: 0}, t0))
	return h
}

func (h *harness) take(d Decisions, err error) Decisions {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("unexpected error: %v", err)
	}
	h.record(d)
	return d
}

func (h *harness) record(d Decisions) {
	h.t.Helper()
	if d.HighWatermark != h.l.HighWatermark() {
		h.t.Fatalf("decision high watermark %d, state %d", d.HighWatermark, h.l.HighWatermark())
	}
	if n := len(h.hws); n > 0 && d.HighWatermark < h.hws[n-1] && h.l.IsLeader() {
		h.t.Fatalf("high watermark went back from %d to %d", h.hws[n-1], d.HighWatermark)
	}
	h.hws = append(h.hws, d.HighWatermark)
	for _, id := range d.Completed {
		if _, ok := h.failed[id]; ok || slices.Contains(h.completed, id) {
			h.t.Fatalf("request %d answered twice", id)
		}
		h.completed = append(h.completed, id)
	}
	for _, f := range d.Failed {
		if _, ok := h.failed[f.ID]; ok || slices.Contains(h.completed, f.ID) {
			h.t.Fatalf("request %d answered twice", f.ID)
		}
		h.failed[f.ID] = f.Err
	}
	if d.ProposeISR != nil {
		if h.proposal != nil {
			h.t.Fatalf("second ISR proposal %v while %v is in flight", d.ProposeISR.ISR, h.proposal.ISR)
		}
		if !slices.Contains(d.ProposeISR.ISR, 1) {
			h.t.Fatalf("proposed ISR %v drops the leader", d.ProposeISR.ISR)
		}
		h.proposal = d.ProposeISR
	}
}

func (h *harness) fetch(replica int32, offset int64, sec float64) {
	h.t.Helper()
	h.take(h.l.FollowerFetch(replica, offset, h.l.LeaderEpoch(), at(sec)))
}

func (h *harness) produce(id RequestID, records int64) {
	h.t.Helper()
	if err := h.l.CheckAcksAll(); err != nil {
		h.t.Fatalf("CheckAcksAll: %v", err)
	}
	end := h.l.LogEndOffset() + records
	h.take(h.l.Appended(end))
	h.take(h.l.WaitForAcks(id, end-1))
}

// commit makes the store accept the proposal in flight.
func (h *harness) commit() {
	h.t.Helper()
	if h.proposal == nil {
		h.t.Fatal("no proposal to commit")
	}
	if h.proposal.ExpectedVersion != h.version+7 {
		h.t.Fatalf("proposal expects version %d, store has %d", h.proposal.ExpectedVersion, h.version+7)
	}
	h.version++
	p := h.proposal
	h.proposal = nil
	h.record(h.l.ISRWritten(p.ID, h.version+7))
}

func (h *harness) wantISR(want ...int32) {
	h.t.Helper()
	if got := h.l.ISR(); !slices.Equal(got, want) {
		h.t.Fatalf("ISR %v, want %v", got, want)
	}
}

func (h *harness) wantHW(want int64) {
	h.t.Helper()
	if got := h.l.HighWatermark(); got != want {
		h.t.Fatalf("high watermark %d, want %d", got, want)
	}
}

func (h *harness) wantProposal(want ...int32) {
	h.t.Helper()
	if h.proposal == nil || !slices.Equal(h.proposal.ISR, want) {
		h.t.Fatalf("proposal %+v, want ISR %v", h.proposal, want)
	}
}

func (h *harness) wantCompleted(want ...RequestID) {
	h.t.Helper()
	if !slices.Equal(h.completed, want) {
		h.t.Fatalf("completed %v, want %v", h.completed, want)
	}
}

func (h *harness) wantFailed(id RequestID, want error) {
	h.t.Helper()
	if got := h.failed[id]; !errors.Is(got, want) {
		h.t.Fatalf("request %d failed with %v, want %v", id, got, want)
	}
}

func TestHighWatermarkIsMinimumOverISR(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2, 3}, 0)
	h.produce(1, 10)
	h.wantHW(0) // followers have not fetched in this term
	h.fetch(2, 10, 1)
	h.wantHW(0)
	h.fetch(3, 4, 1)
	h.wantHW(4)
	h.wantCompleted()
	h.fetch(3, 10, 2)
	h.wantHW(10)
	h.wantCompleted(1)
}

func TestFollowerFallsBehindThenCatchesUp(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2, 3}, 0)
	h.produce(1, 5)
	h.fetch(2, 5, 1)
	h.fetch(3, 5, 1)
	h.wantHW(5)
	h.wantCompleted(1)

	// Broker 3 stops fetching; the leader keeps appending and 2 keeps up.
	for i := 2; i <= 12; i++ {
		h.produce(RequestID(i), 1)
		h.fetch(2, h.l.LogEndOffset(), float64(i))
	}
	h.take(h.l.Tick(at(11)), nil)
	if h.proposal != nil {
		t.Fatalf("shrink proposed after 10 s of lag: %+v", h.proposal)
	}
	h.take(h.l.Tick(at(11.5)), nil)
	h.wantProposal(1, 2)
	if !slices.Equal(h.proposal.Removed, []int32{3}) {
		t.Fatalf("removed %v", h.proposal.Removed)
	}
	// Until the store agrees, 3 is still in force: nothing past 5 commits.
	h.wantISR(1, 2, 3)
	h.wantHW(5)
	h.commit()
	h.wantISR(1, 2)
	h.wantHW(h.l.LogEndOffset())
	if len(h.completed) != 12 {
		t.Fatalf("completed %v", h.completed)
	}

	// 3 comes back: below the high watermark it stays out.
	end := h.l.LogEndOffset()
	h.fetch(3, 8, 20)
	if h.proposal != nil {
		t.Fatalf("expanded before reaching the high watermark: %+v", h.proposal)
	}
	h.fetch(3, end, 21)
	h.wantProposal(1, 2, 3)
	h.commit()
	h.wantISR(1, 2, 3)
	// Now it counts again.
	h.produce(100, 1)
	h.fetch(2, end+1, 22)
	h.wantHW(end)
	h.fetch(3, end+1, 22)
	h.wantHW(end + 1)
}

// A follower that keeps fetching but never reaches the leader's end, because
// the leader appends between its fetches, is still caught up (Kafka's
// lastFetchLeaderLogEndOffset rule); one that falls further behind is not.
func TestCaughtUpTracksPreviousLeaderEnd(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2}, 0)
	var off int64
	for sec := 1; sec <= 40; sec++ {
		h.produce(RequestID(sec), 10)
		h.fetch(2, off, float64(sec))
		off = h.l.LogEndOffset() // the next fetch reaches what the leader had now
		h.take(h.l.Tick(at(float64(sec))), nil)
		if h.proposal != nil {
			t.Fatalf("shrank a follower that keeps up at %d s", sec)
		}
	}
	// Now it slows down: each fetch reaches less than the leader had at the
	// previous fetch.
	lagging := off
	for sec := 41; sec <= 60; sec++ {
		h.produce(RequestID(sec), 10)
		lagging += 5
		h.fetch(2, lagging, float64(sec))
		h.take(h.l.Tick(at(float64(sec))), nil)
	}
	h.wantProposal(1)
}

func TestISRExpansionNeedsEpochStart(t *testing.T) {
	// Leader 1 starts epoch 5 at offset 100 knowing a high watermark of only
	// 90 (its follower view was stale); the old leader had committed up to
	// 100. Follower 3 at 95 has reached the known high watermark but lacks
	// committed records: admitted to the ISR and then elected, it would lose
	// them (KAFKA-7128).
	l, _ := NewLeader(Config{ReplicaLagTimeMax: time.Second, MinInsyncReplicas: 1})
	d, err := l.BecomeLeader(LeaderState{LocalID: 1, LeaderEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, LogEndOffset: 100, HighWatermark: 90}, t0)
	if err != nil || d.HighWatermark != 90 {
		t.Fatalf("%+v %v", d, err)
	}
	d, _ = l.FollowerFetch(3, 95, 5, at(1))
	if d.ProposeISR != nil {
		t.Fatalf("expanded a follower below the epoch start: %+v", d.ProposeISR)
	}
	d, _ = l.FollowerFetch(3, 100, 5, at(2))
	if d.ProposeISR == nil || !slices.Equal(d.ProposeISR.ISR, []int32{1, 2, 3}) {
		t.Fatalf("no expansion at the epoch start: %+v", d.ProposeISR)
	}
}

func TestHighWatermarkUsesLargerISRWhileChangeInFlight(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2}, 0)
	h.produce(1, 10)
	h.fetch(2, 10, 1)
	h.wantHW(10)
	// 3 catches up to the high watermark: proposal {1,2,3} in flight.
	h.fetch(3, 10, 2)
	h.wantProposal(1, 2, 3)
	h.produce(2, 5)
	h.fetch(2, 15, 3)
	// The union {1,2,3} governs: 3 is at 10.
	h.wantHW(10)
	h.wantCompleted(1)
	h.fetch(3, 15, 4)
	h.wantHW(15)
	h.wantCompleted(1, 2)
}

func TestFailedISRWriteAdoptsStoreOrFences(t *testing.T) {
	t.Run("same epoch adopts", func(t *testing.T) {
		h := newHarness(t, 1, []int32{1, 2}, 10)
		h.fetch(3, 10, 1)
		h.wantProposal(1, 2, 3)
		p := h.proposal
		h.proposal = nil
		// The write landed but the reply was lost: the store shows it.
		h.take(h.l.ISRWriteFailed(p.ID, ObservedState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2, 3}, Version: 9}))
		h.wantISR(1, 2, 3)
		if h.l.InFlight() != nil {
			t.Fatal("proposal still in flight")
		}
	})
	t.Run("other leader fences", func(t *testing.T) {
		h := newHarness(t, 2, []int32{1, 2, 3}, 0)
		h.produce(1, 3)
		h.take(h.l.Tick(at(20)), nil)
		h.wantProposal(1)
		p := h.proposal
		h.proposal = nil
		d := h.take(h.l.ISRWriteFailed(p.ID, ObservedState{Leader: 2, LeaderEpoch: 6, ISR: []int32{2, 3}, Version: 9}))
		if !d.Fenced || h.l.IsLeader() {
			t.Fatalf("not fenced: %+v", d)
		}
		h.wantFailed(1, ErrNotLeaderOrFollower)
	})
	t.Run("stale result ignored", func(t *testing.T) {
		h := newHarness(t, 1, []int32{1, 2}, 10)
		h.fetch(3, 10, 1)
		d := h.l.ISRWritten(h.proposal.ID+1, 99)
		if d.HighWatermarkChanged || h.l.InFlight() == nil {
			t.Fatalf("a result for another proposal was applied: %+v", d)
		}
	})
}

func TestEventErrors(t *testing.T) {
	h := newHarness(t, 1, []int32{1, 2}, 10)
	cases := []struct {
		name    string
		replica int32
		offset  int64
		epoch   int32
		want    error
	}{
		{"older epoch", 2, 5, 4, ErrFencedLeaderEpoch},
		{"newer epoch", 2, 5, 6, ErrUnknownLeaderEpoch},
		{"not a replica", 9, 5, 5, ErrReplicaNotAvailable},
		{"the leader itself", 1, 5, 5, ErrReplicaNotAvailable},
		{"beyond the end", 2, 11, 5, ErrOffsetOutOfRange},
		{"negative", 2, -1, -1, ErrOffsetOutOfRange},
	}
	for _, c := range cases {
		if _, err := h.l.FollowerFetch(c.replica, c.offset, c.epoch, at(1)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if h.l.FollowerEndOffset(2) != -1 {
		t.Fatal("a refused fetch changed the follower's position")
	}
	if _, err := h.l.FollowerFetch(2, 5, -1, at(1)); err != nil {
		t.Fatalf("a fetch without an epoch is accepted: %v", err)
	}

	bad := []LeaderState{
		{LocalID: 1, LeaderEpoch: 6, Replicas: []int32{2, 3}, ISR: []int32{1}},
		{LocalID: 1, LeaderEpoch: 6, Replicas: []int32{1, 2}, ISR: []int32{2}},
		{LocalID: 1, LeaderEpoch: 6, Replicas: []int32{1, 2}, ISR: []int32{1, 3}},
		{LocalID: 1, LeaderEpoch: 6, Replicas: []int32{1, 2}, ISR: []int32{1, 1}},
		{LocalID: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1}, LogEndOffset: 10},
		{LocalID: 1, LeaderEpoch: 6, Replicas: []int32{1, 2}, ISR: []int32{1}, LogEndOffset: 3},
	}
	for i, s := range bad {
		if _, err := h.l.BecomeLeader(s, at(2)); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("bad state %d accepted: %v", i, err)
		}
	}
	if _, err := h.l.WaitForAcks(1, 10); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("waiting for an offset not appended: %v", err)
	}
	if _, err := h.l.Appended(9); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("log end going back: %v", err)
	}
	if _, err := NewLeader(Config{ReplicaLagTimeMax: 0, MinInsyncReplicas: 1}); err == nil {
		t.Error("zero lag time accepted")
	}
	if _, err := NewLeader(Config{ReplicaLagTimeMax: time.Second}); err == nil {
		t.Error("min.insync.replicas 0 accepted")
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}
