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
// removed, or coordinated elsewhere now). Until the first pass completes
// the count is unknown, and no ID is added.
type idIndex struct {
	ready chan struct{} // closed when the first pass completed

	mu          sync.Mutex // guards the following
	ids         map[string]indexedID
	byPrincipal map[string]int
	pass        uint64 // passes begun
	loaded      bool   // a pass completed
	fullLogged  bool   // a refusal was logged since the last pass
}

// indexedID is one counted ID: who created it and the last pass that saw
// it (or began before it was created).
type indexedID struct {
	principal string
	seen      uint64
}

func newIDIndex() idIndex {
	return idIndex{ready: make(chan struct{}), ids: map[string]indexedID{}, byPrincipal: map[string]int{}}
}

// waitReady waits for the first pass, at most wait.
func (x *idIndex) waitReady(ctx context.Context, wait time.Duration) {
	select {
	case <-x.ready:
		return
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-x.ready:
	case <-t.C:
	case <-ctx.Done():
	}
}

// reserve counts the new ID id of principal, unless that would pass max
// IDs or perPrincipal of principal's: then POLICY_VIOLATION, and whether
// to log the refusal (once between passes). COORDINATOR_LOAD_IN_PROGRESS
// before the first pass completed.
func (x *idIndex) reserve(id, principal string, max, perPrincipal int) (code int16, logRefusal bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded {
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

// endPass completes pass seq: IDs neither seen by it nor added since it
// began are no longer counted.
func (x *idIndex) endPass(seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, e := range x.ids {
		if e.seen < seq {
			x.removeLocked(id)
		}
	}
	x.fullLogged = false
	if !x.loaded {
		x.loaded = true
		close(x.ready)
	}
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
