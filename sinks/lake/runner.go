package lake

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/store"
)

// Backoff between attempts to replace a worker that stopped on its own.
const (
	minRestartBackoff = time.Second
	maxRestartBackoff = time.Minute
)

// Runner keeps one sink's worker running. A worker stops on its own when
// landing fails (its store is full or unreachable, a commit is refused): it
// discards its open windows and commits nothing more. The runner then shuts it
// down, which leaves the group, waits, and starts a new one, which lands again
// from the committed offsets: nothing is lost, and the rewritten files have
// the same names and rows.
type Runner struct {
	start    func(context.Context) (*Worker, error)
	logger   *slog.Logger
	restarts prometheus.Counter

	stop context.CancelFunc
	done chan struct{} // closed when supervise has returned

	mu     sync.Mutex
	worker *Worker // nil while a replacement is pending
}

// NewRunner starts a worker (New, then Start with ctx) and keeps it running
// until Shutdown. The first worker's error is returned: a sink that cannot
// start at all is misconfigured or cannot reach its brokers. reg and logger
// may be nil.
func NewRunner(ctx context.Context, cfg Config, st store.Store, reg prometheus.Registerer, logger *slog.Logger) (*Runner, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	start := func(ctx context.Context) (*Worker, error) {
		w, err := New(cfg, st, reg, logger)
		if err != nil {
			return nil, err
		}
		if err := w.Start(ctx); err != nil {
			return nil, err
		}
		return w, nil
	}
	w, err := start(ctx)
	if err != nil {
		return nil, err
	}
	restarts := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "millrace", Subsystem: "lake",
		Name: "worker_restarts_total", Help: "Sink workers replaced after they stopped on a landing failure."})
	if reg != nil {
		reg.MustRegister(restarts)
	}
	runCtx, stop := context.WithCancel(context.Background())
	r := &Runner{start: start, logger: logger.With("component", "lake", "group", cfg.Group),
		restarts: restarts, stop: stop, done: make(chan struct{}), worker: w}
	go r.supervise(runCtx)
	return r, nil
}

func (r *Runner) current() *Worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.worker
}

func (r *Runner) set(w *Worker) {
	r.mu.Lock()
	r.worker = w
	r.mu.Unlock()
}

// supervise replaces the worker whenever it stops on its own, until ctx ends.
func (r *Runner) supervise(ctx context.Context) {
	defer close(r.done)
	backoff := minRestartBackoff
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
		if time.Since(started) > maxRestartBackoff {
			backoff = minRestartBackoff
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
			backoff = min(2*backoff, maxRestartBackoff)
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

// Shutdown stops replacing workers, then lands the current worker's open
// windows within ctx and leaves the group (see Worker.Shutdown).
func (r *Runner) Shutdown(ctx context.Context) error {
	r.stop()
	<-r.done
	if w := r.current(); w != nil {
		return w.Shutdown(ctx)
	}
	return nil
}
