package appliance

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/sinks/lake"
)

// Backoff between attempts to replace a sink worker that stopped on its own.
const (
	minSinkBackoff = time.Second
	maxSinkBackoff = time.Minute
)

// sinkRunner keeps one sink's worker running. A worker stops on its own when
// landing fails (its store is full or unreachable, a commit is refused): it
// discards its open windows and commits nothing more. `millrace sink` then
// exits for its service manager to restart it; inside the appliance, the
// runner shuts the worker down (which leaves the group), waits, and starts a
// new one, which lands again from the committed offsets — nothing is lost and
// the rewritten files have the same names and rows.
type sinkRunner struct {
	start    func(context.Context) (*lake.Worker, error)
	logger   *slog.Logger
	restarts prometheus.Counter

	stop context.CancelFunc
	done chan struct{} // closed when supervise has returned

	mu     sync.Mutex
	worker *lake.Worker // nil while a replacement is pending
}

// newSinkRunner starts the first worker (its error is returned: a sink that
// cannot start at all is a configuration problem) and the supervisor.
func newSinkRunner(ctx context.Context, start func(context.Context) (*lake.Worker, error), reg prometheus.Registerer, logger *slog.Logger) (*sinkRunner, error) {
	w, err := start(ctx)
	if err != nil {
		return nil, err
	}
	restarts := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
		Name: "worker_restarts_total", Help: "Sink workers replaced after they stopped on a landing failure."})
	reg.MustRegister(restarts)
	runCtx, stop := context.WithCancel(context.Background())
	r := &sinkRunner{start: start, logger: logger, restarts: restarts, stop: stop, done: make(chan struct{}), worker: w}
	go r.supervise(runCtx)
	return r, nil
}

func (r *sinkRunner) current() *lake.Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.worker
}

func (r *sinkRunner) set(w *lake.Worker) {
	r.mu.Lock()
	r.worker = w
	r.mu.Unlock()
}

// supervise replaces the worker whenever it stops on its own, until ctx ends.
func (r *sinkRunner) supervise(ctx context.Context) {
	defer close(r.done)
	backoff := minSinkBackoff
	for {
		w := r.current()
		started := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-w.Done():
		}
		// A worker that landed for a while before failing starts the
		// backoff over; one that fails at once waits longer each time.
		if time.Since(started) > maxSinkBackoff {
			backoff = minSinkBackoff
		}
		r.logger.Error("sink worker stopped; starting a new one, which lands again from the committed offsets",
			"err", w.Err(), "in", backoff)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		w.Shutdown(sctx) // leaves the group; the error is w.Err(), logged above
		cancel()
		r.set(nil)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxSinkBackoff)
			nw, err := r.start(ctx)
			if err == nil {
				r.set(nw)
				r.restarts.Inc()
				break
			}
			r.logger.Warn("starting a sink worker failed; retrying", "err", err, "in", backoff)
		}
	}
}

// shutdown stops the supervisor, then lands the current worker's open
// windows within ctx.
func (r *sinkRunner) shutdown(ctx context.Context) error {
	r.stop()
	<-r.done
	if w := r.current(); w != nil {
		return w.Shutdown(ctx)
	}
	return nil
}
