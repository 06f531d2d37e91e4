package replica

// Follower progress, the ISR and the high watermark: the leader's half of
// Kafka's replica manager rules.
//
//   - A follower's log end offset is its last fetch offset (it asks for the
//     next record it lacks).
//   - A follower is caught up at a fetch if it had everything the leader had
//     then, or everything the leader had at its previous fetch (it keeps up
//     but the leader keeps appending); lastCaughtUp records when.
//   - Tick removes ISR followers that are behind the leader's log end and
//     have not caught up for replica.lag.time.max.ms.
//   - A follower rejoins once it has reached the high watermark and the
//     start of the current leader epoch: then it holds every committed
//     record and none of a previous leader's uncommitted tail.
//   - The high watermark is the least log end offset over the ISR, and
//     never moves backward while this broker leads.

import (
	"fmt"
	"slices"
	"time"
)

// FollowerFetch reports that follower replica fetched from fetchOffset at
// now, naming currentEpoch as the leader epoch it believes in (-1 when the
// fetch request version carries none, KIP-320). An error is the Kafka error
// to answer the fetch with; the state is then unchanged.
func (l *Leader) FollowerFetch(replica int32, fetchOffset int64, currentEpoch int32, now time.Time) (Decisions, error) {
	none := Decisions{HighWatermark: l.hw}
	if l.role != roleLeading {
		return none, ErrNotLeaderOrFollower
	}
	switch {
	case currentEpoch >= 0 && currentEpoch < l.epoch:
		return none, ErrFencedLeaderEpoch
	case currentEpoch > l.epoch:
		return none, ErrUnknownLeaderEpoch
	}
	f, ok := l.followers[replica]
	if !ok {
		return none, ErrReplicaNotAvailable
	}
	if fetchOffset < 0 || fetchOffset > l.logEnd {
		return none, ErrOffsetOutOfRange
	}
	if fetchOffset >= l.logEnd {
		f.lastCaughtUp = later(f.lastCaughtUp, now)
	} else if fetchOffset >= f.lastFetchLeaderEnd {
		f.lastCaughtUp = later(f.lastCaughtUp, f.lastFetch)
	}
	f.endOffset = fetchOffset
	f.lastFetch = now
	f.lastFetchLeaderEnd = l.logEnd

	return l.expandAndSettle(), nil
}

// Tick lets time pass: followers that fell behind for longer than
// replica.lag.time.max.ms are proposed for removal from the ISR.
func (l *Leader) Tick(now time.Time) Decisions {
	d := Decisions{HighWatermark: l.hw}
	if l.role != roleLeading || l.inflight != nil {
		return d
	}
	var removed []int32
	for _, id := range l.isr {
		if id == l.localID {
			continue
		}
		f := l.followers[id]
		if f.endOffset != l.logEnd && now.Sub(f.lastCaughtUp) > l.cfg.ReplicaLagTimeMax {
			removed = append(removed, id)
		}
	}
	if len(removed) > 0 {
		isr := slices.DeleteFunc(slices.Clone(l.isr), func(id int32) bool { return slices.Contains(removed, id) })
		d.ProposeISR = l.propose(isr, nil, removed)
	}
	return d
}

// ISRWritten reports that the compare-and-set of proposal id succeeded and
// the znode now has version newVersion. The new ISR takes effect. A result
// for a proposal that is no longer in flight is ignored.
func (l *Leader) ISRWritten(id uint64, newVersion int32) Decisions {
	if l.role != roleLeading || l.inflight == nil || l.inflight.ID != id {
		return Decisions{HighWatermark: l.hw}
	}
	l.isr, l.version, l.inflight = l.inflight.ISR, newVersion, nil
	return l.expandAndSettle()
}

// ISRWriteFailed reports that the compare-and-set of proposal id failed (or
// its outcome is unknown) and gives the state re-read from the store:
//
//   - another leader, or this broker no longer in the ISR: fenced;
//   - this broker with a newer epoch: the controller changed the state; the
//     proposal is dropped and the caller must call BecomeLeader with it;
//   - this broker at this epoch: the observed ISR and version are adopted
//     (when they equal the proposal, the write had succeeded after all).
func (l *Leader) ISRWriteFailed(id uint64, observed ObservedState) (Decisions, error) {
	if l.role != roleLeading || l.inflight == nil || l.inflight.ID != id {
		return Decisions{HighWatermark: l.hw}, nil
	}
	switch {
	case observed.Leader != l.localID || observed.LeaderEpoch < l.epoch || !slices.Contains(observed.ISR, l.localID):
		return l.Fence(), nil
	case observed.LeaderEpoch > l.epoch:
		// Nothing is settled here: BecomeLeader with the new state follows
		// and settles against the controller's ISR.
		l.inflight = nil
		return Decisions{HighWatermark: l.hw}, nil
	}
	for _, r := range observed.ISR {
		if _, ok := l.followers[r]; !ok && r != l.localID {
			return Decisions{HighWatermark: l.hw}, fmt.Errorf("%w: observed ISR %v names a broker that is not a replica", ErrInvalidEvent, observed.ISR)
		}
	}
	l.isr, l.version, l.inflight = slices.Clone(observed.ISR), observed.Version, nil
	return l.expandAndSettle(), nil
}

// maybeExpand proposes adding every out-of-sync follower that has reached
// both the high watermark and the start of this leader epoch, unless an ISR
// change is already in flight (one at a time, as each is a compare-and-set
// against the version the previous one produced).
func (l *Leader) maybeExpand() *ISRChange {
	if l.role != roleLeading || l.inflight != nil {
		return nil
	}
	var added []int32
	for _, id := range l.replicas {
		f, ok := l.followers[id]
		if !ok || slices.Contains(l.isr, id) {
			continue
		}
		if f.endOffset >= l.hw && f.endOffset >= l.epochStart {
			added = append(added, id)
		}
	}
	if len(added) == 0 {
		return nil
	}
	return l.propose(append(slices.Clone(l.isr), added...), added, nil)
}

func (l *Leader) propose(isr, added, removed []int32) *ISRChange {
	l.nextChange++
	l.inflight = &ISRChange{ID: l.nextChange, LeaderEpoch: l.epoch, ISR: isr, ExpectedVersion: l.version, Added: added, Removed: removed}
	return cloneChange(l.inflight)
}

// maximalISR is the ISR the high watermark must respect: while a change is
// in flight, the union of the ISR in force and the proposed one. The write
// may succeed, fail, or succeed with the reply lost, so either set may be the
// one a controller elects the next leader from; a record counts as committed
// only when every member of both has it. For a shrink the union is the old
// (larger) set, so the high watermark does not jump ahead of the removed
// follower before the store agrees; for an expansion it is the new set, so
// the joining follower must already hold everything below the high watermark.
func (l *Leader) maximalISR() []int32 {
	if l.inflight == nil {
		return l.isr
	}
	union := slices.Clone(l.isr)
	for _, id := range l.inflight.ISR {
		if !slices.Contains(union, id) {
			union = append(union, id)
		}
	}
	return union
}

// expandAndSettle advances the high watermark, proposes an expansion if one
// is due, then answers pending requests. The expansion is judged against the
// advanced high watermark, so a follower just removed for lagging does not
// rejoin at once; and it is proposed before requests are answered, so those
// waiting for the ISR to regain min.insync.replicas see it in flight.
func (l *Leader) expandAndSettle() Decisions {
	d := Decisions{HighWatermark: l.hw}
	if l.role != roleLeading {
		return d
	}
	d.HighWatermarkChanged = l.advanceHighWatermark()
	d.HighWatermark = l.hw
	d.ProposeISR = l.maybeExpand()
	d.Completed, d.Failed = l.answerPending()
	return d
}

// settle recomputes the high watermark and answers the pending requests it
// decides.
func (l *Leader) settle() Decisions {
	d := Decisions{HighWatermark: l.hw}
	if l.role != roleLeading {
		return d
	}
	d.HighWatermarkChanged = l.advanceHighWatermark()
	d.HighWatermark = l.hw
	d.Completed, d.Failed = l.answerPending()
	return d
}

// advanceHighWatermark sets the high watermark to the least log end offset
// over the maximal ISR, if that is higher, and reports whether it moved.
func (l *Leader) advanceHighWatermark() bool {
	candidate := l.logEnd
	for _, id := range l.maximalISR() {
		if id == l.localID {
			continue
		}
		candidate = min(candidate, l.followers[id].endOffset) // -1 (unknown) holds it back
	}
	if candidate <= l.hw {
		return false
	}
	l.hw = candidate
	return true
}

// answerPending decides the acks=all requests: a request completes once the
// high watermark passes its last offset while the ISR in force still has
// min.insync.replicas members. When the ISR is too small and no change in
// flight would fix it, every pending request fails now rather than at its
// timeout: its records cannot be acknowledged with the guarantee the client
// asked for.
func (l *Leader) answerPending() (completed []RequestID, failed []FailedRequest) {
	enough := len(l.isr) >= l.cfg.MinInsyncReplicas
	hope := l.inflight != nil && len(l.inflight.ISR) >= l.cfg.MinInsyncReplicas
	switch {
	case !enough && !hope:
		for _, p := range l.pending {
			failed = append(failed, FailedRequest{p.id, ErrNotEnoughReplicasAfterAppend})
		}
		l.pending = nil
	case enough:
		n := 0
		for n < len(l.pending) && l.pending[n].lastOffset < l.hw {
			completed = append(completed, l.pending[n].id)
			n++
		}
		l.pending = l.pending[n:]
	}
	return completed, failed
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func cloneChange(c *ISRChange) *ISRChange {
	if c == nil {
		return nil
	}
	out := *c
	out.ISR, out.Added, out.Removed = slices.Clone(c.ISR), slices.Clone(c.Added), slices.Clone(c.Removed)
	return &out
}
