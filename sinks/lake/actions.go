package lake

import (
	"context"
	"fmt"
	"time"

	"millrace/audit"
	"millrace/sinks/parquet"
)

// The worker's side of the lander's actions (core.go): each action names
// the I/O to run, in the order the lander decided it. Every method here runs
// holding w.landing, and takes w.mu only for a moment, never through I/O.

// runActions runs acts in order; cur is the record they are about (nil for
// ticks, revokes, shutdown and failures). At the first failure it discards
// the windows the remaining actions would have landed or discarded and
// returns the error: the worker stops (or, on a revoke, leaves the window
// to the next owner).
func (w *Worker) runActions(ctx context.Context, acts []action, cur *current) error {
	defer func() { w.metrics.openFiles.Set(float64(w.core.openFiles)) }()
	var p *partitionState
	for i, a := range acts {
		if p == nil || p.tp != a.tp {
			// Once per run of actions on one partition, not per action:
			// a record's actions are all about its partition.
			p = w.partition(a.tp)
		}
		if err := w.runAction(ctx, p, a, cur); err != nil {
			for _, rest := range acts[i+1:] {
				if rest.kind == actLand || rest.kind == actDiscard {
					w.discardWindow(ctx, w.partition(rest.tp), rest.win)
				}
			}
			return err
		}
	}
	return nil
}

// discardEach runs the discards the lander decided on a loss or a
// failure.
func (w *Worker) discardEach(ctx context.Context, discards []action) {
	for _, a := range discards {
		w.discardWindow(ctx, w.partition(a.tp), a.win)
	}
	w.metrics.openFiles.Set(float64(w.core.openFiles))
}

// runAction runs a, one of p's actions.
func (w *Worker) runAction(ctx context.Context, p *partitionState, a action, cur *current) error {
	cur.at(p, a) // a record of several rows: the row a is about (rows.go)
	switch a.kind {
	case actOpen:
		return w.openFile(ctx, p, a, cur)
	case actAppend:
		win := p.windowOf(a.win)
		f := win.files[fileKey{a.bucket.Unix(), a.value}]
		if err := f.w.AppendRow(p.row, cur.record.Timestamp); err != nil {
			return fmt.Errorf("lake: %s: %w", f.name, err)
		}
		f.last = a.offset
		if cur.noID {
			w.countDedup(p, win, cur.record, countNoID)
		}
		w.countRow(p, win, f, cur.record.Timestamp)
		if a.checkSize {
			return w.runActions(ctx, w.core.sized(a.tp, win.estimatedBytes()), nil)
		}
	case actDeadLetter:
		r := cur.record
		win := p.windowOf(a.win)
		w.sendDeadLetter(p, win, r, cur.reason)
		w.metrics.deadLetters.WithLabelValues(p.tp.topic).Inc()
		w.countDeadLetter(win, r)
	case actDrop:
		w.countDedup(p, p.windowOf(a.win), cur.record, countDeduplicated)
	case actLand:
		return w.endWindow(ctx, p, a.win, a.reason)
	case actDiscard:
		w.discardWindow(ctx, p, a.win)
	}
	return nil
}

// openFile creates the file a.bucket of p's window, first clearing
// what a superseded owner left in the bucket when the lander says it is the
// bucket's first opening since the assignment (Hive format only).
func (w *Worker) openFile(ctx context.Context, p *partitionState, a action, cur *current) error {
	// Not in a table (doc.go, "Iceberg tables"): readers see only the files
	// a snapshot lists, and a zombie's file removed here could still be
	// committed by it.
	if a.clear && w.cfg.Format != FormatIceberg {
		if err := w.clearSuperseded(ctx, p, a.bucket, a.win.start); err != nil {
			return err
		}
	}
	// Published as FileName(partition, first, last) once last is known.
	name := w.layout.DataFile(p.tp.topic, a.bucket, p.tp.partition, a.offset, a.offset)
	obj, err := w.store.Create(ctx, name)
	if err != nil {
		return fmt.Errorf("lake: create %s: %w", name, err)
	}
	pw, err := parquet.NewWriter(obj, w.schema, parquet.Options{Compression: w.cfg.Compression,
		RowGroupRows: w.cfg.RowGroupRows, RowGroupBytes: w.cfg.RowGroupBytes})
	if err != nil {
		obj.Abort(ctx)
		return fmt.Errorf("lake: %s: %w", name, err)
	}
	win := p.windowOf(a.win)
	f := &outFile{name: name, bucket: a.bucket, identity: cur.identity, obj: obj, w: pw, first: a.offset, last: a.offset}
	win.files[fileKey{a.bucket.Unix(), a.value}] = f
	win.order = append(win.order, f)
	return nil
}

// endWindow lands the lander's window cw of p: publish every file,
// acknowledge the dead letters, then commit (w.commit) the window's end,
// with Format iceberg on the commit pipeline (pipeline.go), whose previous
// commit has ended before anything of this window is published. On any
// failure, this window's or the previous commit's, the unpublished files
// are discarded and the error is returned; nothing is committed.
func (w *Worker) endWindow(ctx context.Context, p *partitionState, cw *coreWindow, reason string) error {
	win := p.takeWindow(cw)
	defer w.releaseWindow(ctx, win)
	if err := w.settle(); err != nil {
		return err
	}
	for _, f := range win.order {
		f.w.SetSource(p.tp.topic, p.tp.partition, f.first, f.last)
		f.w.SetMetadata(audit.MetaRows, fileRowCounts(f))
		if err := f.w.Close(); err != nil {
			return fmt.Errorf("lake: %s: %w", f.name, err)
		}
	}
	// The commit starts here (commit_seconds): the files are written.
	started := w.now()
	landed := make([]landedFile, 0, len(win.order))
	for _, f := range win.order {
		if err := w.publishFile(ctx, p, win, f); err != nil {
			return err
		}
		lf := landedFile{name: f.name, bucket: f.bucket, identity: f.identity, first: f.first, last: f.last,
			rows: f.w.Rows(), bytes: f.w.Bytes()}
		if w.tables != nil {
			// A table's data file entry takes the footer's statistics.
			var err error
			if lf.footer, err = f.w.Footer(); err != nil {
				return fmt.Errorf("lake: %s: %w", f.name, err)
			}
		}
		landed = append(landed, lf)
		w.metrics.files.WithLabelValues(p.tp.topic).Inc()
		if w.cfg.AfterPublish != nil {
			w.cfg.AfterPublish(f.name)
		}
	}
	if err := w.publishAudit(ctx, p, win); err != nil {
		return err
	}
	if win.deadLetters > 0 && w.dlq != nil {
		if err := w.dlq.flush(ctx); err != nil {
			return fmt.Errorf("lake: dead letters of %s/%d: %w", p.tp.topic, p.tp.partition, err)
		}
	}
	wc := windowCommit{tp: p.tp, start: win.start, next: win.next, watermark: win.maxRecordTime, files: landed,
		deadLetterRows: win.deadLetterRows}
	return w.startCommit(ctx, &landingCommit{p: p, win: win, wc: wc, reason: reason, started: started})
}

// discardWindow drops p's window cw without publishing or committing; the
// records are landed again from the committed offset.
func (w *Worker) discardWindow(ctx context.Context, p *partitionState, cw *coreWindow) {
	win := p.takeWindow(cw)
	w.releaseWindow(ctx, win)
	w.logger.Info("discarded unpublished window", "topic", p.tp.topic, "partition", p.tp.partition,
		"start", win.start, "next", win.next, "files", len(win.order))
}

// releaseWindow aborts the window's objects that were not published (Abort
// after Publish does nothing). The aborts share one deadline: they are best
// effort (leftovers are removed when the partition is next assigned), and
// with the store down each would otherwise spend the S3 client's whole
// retry policy (about 5 s), one after another, before a failed worker could
// stop.
func (w *Worker) releaseWindow(ctx context.Context, win *window) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	for _, f := range win.order {
		f.w.Close() // frees the builders; a no-op for a closed writer
		if err := f.obj.Abort(actx); err != nil {
			w.logger.Warn("discarding an unpublished file failed; it is removed when its partition is next assigned",
				"name", f.name, "err", err)
		}
	}
}

// abortTimeout bounds the discarding of one window's unpublished objects.
const abortTimeout = 10 * time.Second
