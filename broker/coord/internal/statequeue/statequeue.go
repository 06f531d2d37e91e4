// Package statequeue delivers a coordination session's state changes in
// order without ever blocking the code that reports them: states queue up
// until the owner reads them. Both store backends use it.
package statequeue

import (
	"sync"

	"millrace/broker/coord"
)

// Queue is an unbounded, ordered channel of session states. Its goroutine is
// joined by Stop, which closes Out.
type Queue struct {
	out  chan coord.SessionState
	wake chan struct{} // capacity 1
	quit chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex // guards the following
	pending []coord.SessionState
}

// New starts a queue.
func New() *Queue {
	q := &Queue{
		out:  make(chan coord.SessionState),
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go q.run()
	return q
}

// Out is where the states arrive, in the order pushed.
func (q *Queue) Out() <-chan coord.SessionState { return q.out }

// Push queues a state; it never blocks.
func (q *Queue) Push(state coord.SessionState) {
	q.mu.Lock()
	q.pending = append(q.pending, state)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Queue) run() {
	defer close(q.done)
	defer close(q.out)
	for {
		q.mu.Lock()
		var next coord.SessionState
		have := len(q.pending) > 0
		if have {
			next = q.pending[0]
			q.pending = q.pending[1:]
		}
		q.mu.Unlock()
		if !have {
			select {
			case <-q.wake:
				continue
			case <-q.quit:
				return
			}
		}
		select {
		case q.out <- next:
		case <-q.quit:
			return
		}
	}
}

// Stop ends delivery (undelivered states are dropped), closes Out and waits
// for the goroutine.
func (q *Queue) Stop() {
	q.once.Do(func() { close(q.quit) })
	<-q.done
}
