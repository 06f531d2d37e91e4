package replica

// A seeded random simulation of one partition on three brokers, wiring the
// Leader state machine, the follower truncation rule and the controller's
// elections (broker/cluster) together the way the broker will. Brokers crash
// and restart, pause past their session and resume as stale leaders, and
// producers write with acks=all throughout. Invariants checked at every step:
//
//   - committed records (below any leader's high watermark) never change and
//     are present in every leader a clean election picks;
//   - an acknowledged request's records are committed and held by at least
//     min.insync.replicas brokers;
//   - the high watermark never moves backward while a broker leads;
//   - the ISR always contains the leader, in the store and in the machine;
//   - a request pending when its leader was fenced is never completed;
//   - at the end, once every broker is back and caught up, all logs are equal.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"millrace/broker/cluster"
)

type simLog struct {
	epochLog
	ids []uint64
}

type simRequest struct {
	first, last int64
	term        int
}

type simBroker struct {
	id      int32
	log     *simLog
	hw      int64
	machine *Leader
	term    int // bumped whenever the machine starts a new leadership term
	dead    bool
	stale   bool  // paused past its session: the cluster thinks it is dead
	follows int32 // leader epoch this follower has truncated for; -1 none
	pending map[RequestID]simRequest
	lastHW  int64
}

type sim struct {
	t         *testing.T
	rng       *rand.Rand
	minISR    int
	now       time.Time
	brokers   map[int32]*simBroker
	state     *cluster.PartitionState
	version   int32
	committed map[int64]uint64
	nextID    uint64
	acked     int
	elections int
}

func newSim(t *testing.T, seed uint64, minISR int) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 1)), minISR: minISR, now: t0, brokers: map[int32]*simBroker{}, committed: map[int64]uint64{}}
	for id := int32(1); id <= 3; id++ {
		s.brokers[id] = &simBroker{id: id, log: &simLog{}, follows: -1, pending: map[RequestID]simRequest{}}
		s.restartMachine(s.brokers[id])
	}
	s.state = &cluster.PartitionState{Topic: "t", Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2, 3}}
	b := s.brokers[1]
	s.on(b)(b.machine.BecomeLeader(s.leaderState(b), s.now))
	return s
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s (state %+v)", fmt.Sprintf(format, args...), *s.state)
}

func (s *sim) restartMachine(b *simBroker) {
	m, err := NewLeader(Config{ReplicaLagTimeMax: 10 * time.Second, MinInsyncReplicas: s.minISR})
	if err != nil {
		s.t.Fatal(err)
	}
	b.machine, b.pending, b.term = m, map[RequestID]simRequest{}, b.term+1
}

func (s *sim) leaderState(b *simBroker) LeaderState {
	return LeaderState{LocalID: b.id, LeaderEpoch: s.state.LeaderEpoch, Replicas: s.state.Replicas, ISR: s.state.ISR,
		StateVersion: s.version, LogEndOffset: b.log.EndOffset(), HighWatermark: b.hw}
}

// handle carries out a machine's decisions and checks them.
func (s *sim) handle(b *simBroker, d Decisions, err error) {
	s.t.Helper()
	if err != nil {
		s.fatalf("broker %d: %v", b.id, err)
	}
	s.decide(b, d)
}

// on returns a function taking an event's results, so calls read
// s.on(b)(b.machine.Event(...)).
func (s *sim) on(b *simBroker) func(Decisions, error) {
	return func(d Decisions, err error) { s.handle(b, d, err) }
}

func (s *sim) decide(b *simBroker, d Decisions) {
	s.t.Helper()
	m := b.machine
	if m.IsLeader() {
		if d.HighWatermark < b.lastHW {
			s.fatalf("broker %d: high watermark back from %d to %d", b.id, b.lastHW, d.HighWatermark)
		}
		for off := max(b.lastHW, 0); off < d.HighWatermark; off++ {
			id := b.log.ids[off]
			if prev, ok := s.committed[off]; ok && prev != id {
				s.fatalf("committed offset %d changed from record %d to %d", off, prev, id)
			}
			s.committed[off] = id
		}
		b.lastHW = d.HighWatermark
		b.hw = d.HighWatermark
		if !slices.Contains(m.ISR(), b.id) {
			s.fatalf("broker %d leads outside its ISR %v", b.id, m.ISR())
		}
	}
	for _, id := range d.Completed {
		r, ok := b.pending[id]
		if !ok {
			s.fatalf("broker %d completed unknown request %d", b.id, id)
		}
		if r.term != b.term || !m.IsLeader() {
			s.fatalf("broker %d completed request %d from an earlier term", b.id, id)
		}
		for off := r.first; off <= r.last; off++ {
			if _, ok := s.committed[off]; !ok || s.committed[off] != b.log.ids[off] {
				s.fatalf("request %d acknowledged offset %d that is not committed", id, off)
			}
			holders := 0
			for _, o := range s.brokers {
				if int64(len(o.log.ids)) > off && o.log.ids[off] == b.log.ids[off] {
					holders++
				}
			}
			if holders < s.minISR {
				s.fatalf("request %d acknowledged offset %d held by %d brokers", id, off, holders)
			}
		}
		delete(b.pending, id)
		s.acked++
	}
	for _, f := range d.Failed {
		delete(b.pending, f.ID)
	}
	if d.Fenced {
		if len(b.pending) != 0 {
			s.fatalf("broker %d fenced with requests still pending", b.id)
		}
		b.term++
	}
	if p := d.ProposeISR; p != nil {
		s.writeISR(b, p)
	}
}

// writeISR performs the compare-and-set, sometimes later: proposals are
// processed right away here, which the machine cannot tell apart from a slow
// store since it only sees the result.
func (s *sim) writeISR(b *simBroker, p *ISRChange) {
	if b.dead {
		return
	}
	if !b.stale && s.state.Leader == b.id && s.state.LeaderEpoch == p.LeaderEpoch && s.version == p.ExpectedVersion {
		n := *s.state
		n.ISR = slices.Clone(p.ISR)
		s.state = &n
		s.version++
		s.decide(b, b.machine.ISRWritten(p.ID, s.version))
		return
	}
	obs := ObservedState{Leader: s.state.Leader, LeaderEpoch: s.state.LeaderEpoch, ISR: s.state.ISR, Version: s.version}
	d, err := b.machine.ISRWriteFailed(p.ID, obs)
	s.handle(b, d, err)
	if d.Fenced {
		b.stale = false // it learned; it rejoins at the next membership event
	}
}

func (s *sim) alive() map[int32]bool {
	m := map[int32]bool{}
	for id, b := range s.brokers {
		if !b.dead && !b.stale {
			m[id] = true
		}
	}
	return m
}

// controller runs the elections for the current membership and informs the
// live brokers.
func (s *sim) controller(preferred bool) {
	view := cluster.ControllerView{Alive: s.alive(), Partitions: []*cluster.PartitionState{s.state}, ControllerEpoch: 1}
	elections := cluster.ElectOnBrokerChange(view)
	if preferred && len(elections) == 0 {
		elections = cluster.PreferredLeaderElections(view)
	}
	for _, e := range elections {
		s.state = e.New
		s.version++
		s.elections++
		if e.Unclean || (e.New.Leader >= 0 && !slices.Contains(e.New.ISR, e.New.Leader)) {
			s.fatalf("election broke the rules: %+v", e)
		}
		if l := e.New.Leader; l >= 0 {
			nl := s.brokers[l]
			for off, id := range s.committed {
				if off >= nl.log.EndOffset() || nl.log.ids[off] != id {
					s.fatalf("elected broker %d lacks committed offset %d", l, off)
				}
			}
		}
		for id, b := range s.brokers {
			if b.dead || b.stale {
				continue
			}
			if id == e.New.Leader {
				if !b.machine.IsLeader() {
					b.term++
					b.lastHW = -1
				}
				s.on(b)(b.machine.BecomeLeader(s.leaderState(b), s.now))
				continue
			}
			s.decide(b, b.machine.Fence())
			b.follows = -1
		}
	}
}

func (s *sim) produce() {
	var leaders []*simBroker
	for _, b := range s.brokers {
		if !b.dead && b.machine.IsLeader() {
			leaders = append(leaders, b) // possibly a stale one
		}
	}
	if len(leaders) == 0 {
		return
	}
	slices.SortFunc(leaders, func(a, b *simBroker) int { return int(a.id - b.id) })
	b := leaders[s.rng.IntN(len(leaders))]
	if err := b.machine.CheckAcksAll(); err != nil {
		return
	}
	n := 1 + s.rng.IntN(3)
	first := b.log.EndOffset()
	for range n {
		s.nextID++
		b.log.append(b.machine.LeaderEpoch(), 1)
		b.log.ids = append(b.log.ids, s.nextID)
	}
	s.on(b)(b.machine.Appended(b.log.EndOffset()))
	id := RequestID(s.nextID)
	b.pending[id] = simRequest{first: first, last: b.log.EndOffset() - 1, term: b.term}
	s.on(b)(b.machine.WaitForAcks(id, b.log.EndOffset()-1))
}

func (s *sim) fetch(f *simBroker) {
	if f.dead || f.stale || s.state.Leader < 0 || s.state.Leader == f.id || f.machine.IsLeader() {
		return
	}
	l := s.brokers[s.state.Leader]
	if l.dead || l.stale || !l.machine.IsLeader() {
		return
	}
	if f.follows != s.state.LeaderEpoch {
		follow(s.t, &f.log.epochLog, &l.log.epochLog, f.hw)
		f.log.ids = f.log.ids[:f.log.EndOffset()]
		f.hw = min(f.hw, f.log.EndOffset())
		f.follows = s.state.LeaderEpoch
	}
	d, err := l.machine.FollowerFetch(f.id, f.log.EndOffset(), s.state.LeaderEpoch, s.now)
	if err != nil {
		s.fatalf("fetch by %d from %d at %d: %v", f.id, l.id, f.log.EndOffset(), err)
	}
	s.decide(l, d)
	from := f.log.EndOffset()
	to := min(l.log.EndOffset(), from+int64(1+s.rng.IntN(4)))
	f.log.epochs = append(f.log.epochs, l.log.epochs[from:to]...)
	f.log.ids = append(f.log.ids, l.log.ids[from:to]...)
	f.hw = FollowerHighWatermark(l.hw, f.log.EndOffset())
}

func (s *sim) step() {
	ids := []int32{1, 2, 3}
	b := s.brokers[ids[s.rng.IntN(3)]]
	switch r := s.rng.IntN(100); {
	case r < 30:
		s.produce()
	case r < 70:
		s.fetch(b)
	case r < 80:
		s.now = s.now.Add(time.Duration(s.rng.IntN(6000)) * time.Millisecond)
		for _, id := range ids {
			if x := s.brokers[id]; !x.dead {
				s.decide(x, x.machine.Tick(s.now))
			}
		}
	case r < 82: // crash
		if !b.dead {
			b.dead, b.stale = true, false
			s.controller(false)
		}
	case r < 88: // restart
		if b.dead {
			b.dead = false
			s.restartMachine(b)
			b.lastHW, b.follows = 0, -1
			s.controller(false)
		}
	case r < 90: // pause past the session timeout
		if !b.dead && !b.stale {
			b.stale = true
			s.controller(false)
		}
	case r < 98: // the session is re-established: it learns the state
		if b.stale {
			b.stale = false
			s.controller(false)
			if s.state.Leader != b.id {
				s.decide(b, b.machine.Fence())
				b.follows = -1
			}
		}
	default:
		s.controller(true)
	}
}

// settle brings every broker back and lets followers catch up.
func (s *sim) settle() {
	for _, id := range []int32{1, 2, 3} {
		b := s.brokers[id]
		if b.dead {
			b.dead = false
			s.restartMachine(b)
			b.lastHW, b.follows = 0, -1
		}
		if b.stale {
			b.stale = false
			if s.state.Leader != b.id {
				s.decide(b, b.machine.Fence())
				b.follows = -1
			}
		}
	}
	s.controller(false)
	for range 200 {
		for _, id := range []int32{1, 2, 3} {
			s.fetch(s.brokers[id])
		}
	}
}

func TestRandomSequencesKeepCommittedRecords(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		for _, minISR := range []int{1, 2} {
			s := newSim(t, seed, minISR)
			for range 400 {
				s.step()
			}
			s.settle()
			l := s.brokers[s.state.Leader]
			if s.state.Leader < 0 {
				t.Fatalf("seed %d: offline with every broker back", seed)
			}
			for _, b := range s.brokers {
				if !slices.Equal(b.log.ids, l.log.ids) || !slices.Equal(b.log.epochs, l.log.epochs) {
					t.Fatalf("seed %d: broker %d's log differs from leader %d's:\n%v\n%v", seed, b.id, l.id, b.log.ids, l.log.ids)
				}
			}
			for off, id := range s.committed {
				if l.log.ids[off] != id {
					t.Fatalf("seed %d: committed offset %d lost", seed, off)
				}
			}
			if seed == 1 {
				t.Logf("min.insync.replicas=%d: %d records acknowledged, %d committed, %d elections", minISR, s.acked, len(s.committed), s.elections)
			}
		}
	}
}
