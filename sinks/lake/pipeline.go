package lake

import (
	"context"
	"fmt"
	"time"
)

// The commit pipeline of Format iceberg (doc.go, "The commit off the
// landing path"). A table commit writes a manifest, a manifest list and a
// metadata file and swaps the catalog's pointer: tens of milliseconds in
// which, run in line, the worker would write no row. With the pipeline the
// landing goroutine hands a published window's commit to a goroutine of its
// own and goes on writing the next window's rows. It stays exactly once
// because of three rules:
//   - One commit in flight. Before a window publishes anything, the commit
//     before it has ended (settle): commits happen in window order, each
//     built on the previous one's offsets, and at most one window's
//     metadata (its files' statistics, dead letters and audit counts)
//     waits in memory besides the open one.
//   - A failed commit fails what follows. Its error is kept: the window
//     that was being written meanwhile, and every later one, is discarded
//     unpublished, and the worker stops as after any failed commit; the
//     next owner lands them again from the table's offset.
//   - Nothing is given up under a commit. Shutdown, a revoke, a loss, a
//     failure and a schema change wait for the commit in flight before
//     they act, and a rebalance's start offsets wait for it in the
//     committer (tableCommitter.startOffsets), so no partition moves and
//     no table is reloaded while a commit of it runs.
//
// What a commit does to the worker's state (the audit totals, the dedup
// counts, the markers due) is done on the landing goroutine, holding
// w.landing, when the commit is settled (finishWindow); the goroutine
// itself touches only the committer, the metrics and the hooks that are
// safe from any goroutine.

// commitPipeline holds the commit in flight; its fields are guarded by
// w.landing.
type commitPipeline struct {
	inflight *landingCommit // nil when no commit runs
	// failed is the error of a commit that failed, kept until the worker
	// stops (or its partition is given up: giveUp): no later window of
	// the worker may be committed after it.
	failed   error
	failedTP topicPartition
}

// landingCommit is one window's commit: what it commits and, once done is
// closed, how it went.
type landingCommit struct {
	p       *partitionState
	win     *window
	wc      windowCommit
	reason  string    // why the window ended
	started time.Time // when its files were written (commit_seconds starts)
	done    chan struct{}
	err     error         // set before done is closed
	took    time.Duration // set before done is closed
}

// runCommit commits lc's window and records how it went. It runs on the
// pipeline's goroutine or, without a pipeline, on the landing goroutine.
func (w *Worker) runCommit(ctx context.Context, lc *landingCommit) {
	defer close(lc.done)
	if err := w.commit.commit(ctx, lc.wc); err != nil {
		lc.err = fmt.Errorf("lake: commit %s/%d at %d: %w", lc.wc.tp.topic, lc.wc.tp.partition, lc.wc.next, err)
		return
	}
	lc.took = w.now().Sub(lc.started)
	topic := lc.wc.tp.topic
	w.metrics.commitLatency.WithLabelValues(topic, w.cfg.Format).Observe(lc.took.Seconds())
	// The landed counts move when the window is durable, not when the
	// landing goroutine next settles (up to a poll later on a quiet topic).
	rows, size := lc.wc.size()
	w.metrics.rows.WithLabelValues(topic).Add(float64(rows))
	w.metrics.bytes.WithLabelValues(topic).Add(float64(size))
	w.metrics.windows.WithLabelValues(topic, lc.reason).Inc()
	if w.cfg.AfterCommit != nil {
		// From here rather than at settle: a benchmark's clock stops when
		// the window is durable, not when the landing goroutine next looks.
		w.cfg.AfterCommit(lc.wc.tp.topic, lc.wc.tp.partition, lc.wc.next, lc.took)
	}
}

// startCommit commits lc's window: on a goroutine of its own with the
// pipeline (the caller has settled the previous commit), else in line.
// The caller holds w.landing.
func (w *Worker) startCommit(ctx context.Context, lc *landingCommit) error {
	lc.done = make(chan struct{})
	if w.pipeline == nil {
		w.runCommit(ctx, lc)
		return w.finishWindow(lc)
	}
	w.pipeline.inflight = lc
	go w.runCommit(ctx, lc)
	return nil
}

// settle waits for the commit in flight, if any, and finishes its window;
// it returns the error of a failed commit, this one's or an earlier one's.
// The caller holds w.landing.
func (w *Worker) settle() error {
	pl := w.pipeline
	if pl == nil {
		return nil
	}
	if lc := pl.inflight; lc != nil {
		waited := w.now()
		<-lc.done
		w.metrics.commitWait.WithLabelValues(lc.wc.tp.topic).Observe(w.now().Sub(waited).Seconds())
		pl.inflight = nil
		if err := w.finishWindow(lc); err != nil && pl.failed == nil {
			pl.failed, pl.failedTP = err, lc.wc.tp
		}
	}
	return pl.failed
}

// collect settles the commit in flight if it has ended, without waiting,
// so that a quiet worker's last window is accounted and a failed commit
// stops the worker at the next poll. The caller holds w.landing.
func (w *Worker) collect() error {
	pl := w.pipeline
	if pl == nil {
		return nil
	}
	if lc := pl.inflight; lc != nil {
		select {
		case <-lc.done:
		default:
			return pl.failed
		}
	}
	return w.settle()
}

// giveUp settles the commit in flight before the partitions in gone are
// given up (revoked or lost). A failed commit of one of them is logged and
// forgotten: its later windows were discarded, and the partition's next
// owner lands them from the table's offset; the worker's other partitions
// do not depend on it. A failed commit of another partition stays, and
// stops the worker at its next landing. The caller holds w.landing.
func (w *Worker) giveUp(gone map[topicPartition]bool) {
	if err := w.settle(); err != nil && gone[w.pipeline.failedTP] {
		w.logger.Warn("the commit of a partition given up failed; its next owner lands the window again",
			"topic", w.pipeline.failedTP.topic, "partition", w.pipeline.failedTP.partition, "err", err)
		w.pipeline.failed = nil
	}
}

// finishWindow does, on the landing goroutine, what a committed window
// changes in the worker: the audit totals, the dedup counts, the markers
// due.
// It returns the commit's error, changing nothing. The caller holds
// w.landing.
func (w *Worker) finishWindow(lc *landingCommit) error {
	if lc.err != nil {
		return lc.err
	}
	p, win := lc.p, lc.win
	w.applyAudit(p, win)
	w.mergeDedupCounts(p.tp.topic, win.dedup)
	w.mu.Lock()
	for _, f := range win.order {
		w.addPendingLocked(p.tp.topic, f.bucket)
	}
	w.mu.Unlock()
	rows, _ := lc.wc.size()
	w.logger.Debug("window landed", "topic", p.tp.topic, "partition", p.tp.partition, "start", win.start,
		"next", win.next, "rows", rows, "files", len(win.order), "dead_letters", win.deadLetters,
		"reason", lc.reason, "commit_seconds", lc.took.Seconds())
	return nil
}

// size is the rows and bytes of the window's files.
func (wc windowCommit) size() (rows, bytes int64) {
	for _, f := range wc.files {
		rows += f.rows
		bytes += f.bytes
	}
	return rows, bytes
}
