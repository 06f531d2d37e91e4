package txn

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// indexWait is how long InitProducer waits for the first pass to count the
// stored IDs before answering COORDINATOR_LOAD_IN_PROGRESS (which Kafka
// answers while it loads its transaction log, and clients retry).
const indexWait = 2 * time.Second

// idIndex counts the transactional IDs this broker coordinates, by the
// principal that created each, for Config.MaxIDs and MaxIDsPerPrincipal.
// The state lives in the store; the index only counts it. InitProducer
// adds the IDs it creates; every pass (background.go) marks the IDs it
// finds, and when it completes, forgets those it did not (expired,
// removed, or coordinated elsewhere now). Which IDs this broker
// coordinates changes with the ownership generation (Config.Owner), so the
// count is known only once a pass begun at the current generation
// completed: until then no ID is added (COORDINATOR_LOAD_IN_PROGRESS, as
// Kafka answers for a transaction log partition it is still loading after
// it became its coordinator).
type idIndex struct {
	mu          sync.Mutex // guards the following
	ids         map[string]indexedID
	byPrincipal map[string]int
	pass        uint64        // passes begun
	loaded      bool          // a pass completed
	loadedGen   uint64        // the ownership generation the last completed pass began at
	passed      chan struct{} // closed, and replaced, when a pass completes
	fullLogged  bool          // a refusal was logged since the last pass
}

// indexedID is one counted ID: who created it and the last pass that saw
// it (or began before it was created).
type indexedID struct {
	principal string
	seen      uint64
}

func newIDIndex() idIndex {
	return idIndex{ids: map[string]indexedID{}, byPrincipal: map[string]int{}, passed: make(chan struct{})}
}

// waitReady waits, at most wait, until a pass begun at ownership
// generation gen completed.
func (x *idIndex) waitReady(ctx context.Context, gen uint64, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		x.mu.Lock()
		ready, passed := x.loaded && x.loadedGen == gen, x.passed
		x.mu.Unlock()
		if ready {
			return
		}
		select {
		case <-passed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// reserve counts the new ID id of principal, unless that would pass max
// IDs or perPrincipal of principal's: then POLICY_VIOLATION, and whether
// to log the refusal (once between passes). COORDINATOR_LOAD_IN_PROGRESS
// until a pass begun at ownership generation gen completed.
func (x *idIndex) reserve(id, principal string, gen uint64, max, perPrincipal int) (code int16, logRefusal bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded || x.loadedGen != gen {
		return kerr.CoordinatorLoadInProgress.Code, false
	}
	if _, ok := x.ids[id]; ok {
		return 0, false
	}
	if len(x.ids) >= max || x.byPrincipal[principal] >= perPrincipal {
		logRefusal = !x.fullLogged
		x.fullLogged = true
		return kerr.PolicyViolation.Code, logRefusal
	}
	x.addLocked(id, principal, x.pass)
	return 0, false
}

// release forgets an ID reserve counted and that was not created.
func (x *idIndex) release(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(id)
}

// beginPass starts a pass and returns its number.
// The pass must hand endPass the ownership generation it began at.
func (x *idIndex) beginPass() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pass++
	return x.pass
}

// saw records that pass seq found id, created by principal (kept as
// counted when the ID is known already).
func (x *idIndex) saw(id, principal string, seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.ids[id]; ok {
		e.seen = max(e.seen, seq)
		x.ids[id] = e
		return
	}
	x.addLocked(id, principal, seq)
}

// endPass completes pass seq, begun at ownership generation gen: IDs
// neither seen by it nor added since it began are no longer counted.
func (x *idIndex) endPass(seq, gen uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, e := range x.ids {
		if e.seen < seq {
			x.removeLocked(id)
		}
	}
	x.fullLogged = false
	x.loaded, x.loadedGen = true, gen
	close(x.passed)
	x.passed = make(chan struct{})
}

func (x *idIndex) addLocked(id, principal string, seq uint64) {
	x.ids[id] = indexedID{principal: principal, seen: seq}
	x.byPrincipal[principal]++
}

func (x *idIndex) removeLocked(id string) {
	e, ok := x.ids[id]
	if !ok {
		return
	}
	delete(x.ids, id)
	if x.byPrincipal[e.principal]--; x.byPrincipal[e.principal] <= 0 {
		delete(x.byPrincipal, e.principal)
	}
}
