package lake

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/schemas"
	"millrace/sinks/parquet"
	"millrace/sinks/store"
)

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// partitionState is what a worker holds for one assigned partition.
type partitionState struct {
	tp       topicPartition
	row      *schemas.Row // reused for every record
	win      *window      // nil between windows
	lastRead time.Time    // wall clock of the last fetch with records, for the idle timeout
	// position is the offset after the last record delivered (or batch
	// skipped), -1 until then; progressAt is when the partition was
	// assigned, last delivered or skipped, or last checked for a stall;
	// checkedAt is the last position whose valid batch was logged (stall.go).
	position, checkedAt int64
	progressAt          time.Time
	// cleared holds the buckets (Unix seconds) checked for a superseded
	// owner's files since the assignment, and member is the group member
	// id the partition was assigned to (fence.go).
	cleared map[int64]bool
	member  string
	// dedup decides repeats (dedup.go); nil until the partition's first
	// record, when it is rebuilt, and with Dedup off.
	dedup *deduper
	// Audit (audit.go): the cumulative counts as of the last commit (nil
	// until the first window after assignment reads them), the audit
	// records read for that, and the last source key computed with the
	// bytes it was made from (rowSource).
	auditTotals        map[auditKey]auditCounts
	auditHistory       []audit.Entry
	lastHost, lastFrom []byte
	lastKey            string
}

// window is one commit window of a partition: the records from start up to
// (not including) next, and the files they went to.
type window struct {
	start           int64
	next            int64
	firstRecordTime time.Time
	maxRecordTime   time.Time
	rows            int64
	deadLetters     int
	files           map[int64]*outFile // by bucket start, Unix seconds
	order           []*outFile         // in creation order
	dedup           dedupCounts        // repeats dropped and rows without id, by source and hour
	audit           map[auditKey]*auditCounts
}

// outFile is one Parquet file of a window.
type outFile struct {
	name   string
	bucket time.Time
	obj    store.Object
	w      *parquet.Writer
	first  int64
	last   int64
	// sources counts the rows per source and hour, for the footer.
	sources map[auditKey]int64
}

// committer commits a partition's offset; the kgo implementation is in
// worker.go, tests use fakes.
type committer interface {
	commit(ctx context.Context, tp topicPartition, offset int64, watermark time.Time) error
}

// deadLetterSink sends dead letters to `<Topic>.dlq`.
type deadLetterSink interface {
	send(letter DeadLetter, key []byte)
	// flush waits until everything sent is acknowledged.
	flush(ctx context.Context) error
}

// bytesCheckEvery is how often (in rows) a window compares its files'
// estimated size with RollBytes: asking every writer on every row would cost
// more than the check is worth, and a fixed row count keeps the cut
// deterministic.
const bytesCheckEvery = 1024

// bucketOf returns the start of the row's time bucket.
func (w *Worker) bucketOf(row *schemas.Row, recordTime time.Time) time.Time {
	return w.layout.Bucket(w.eventTime(row, recordTime))
}

// eventTime is the time that picks the row's bucket, in UTC.
func (w *Worker) eventTime(row *schemas.Row, recordTime time.Time) time.Time {
	var t time.Time
	if w.timeField < 0 {
		t = row.TimeOr(recordTime)
	} else if v, ok := row.Get(w.cfg.TimestampField).(time.Time); ok {
		t = v
	} else {
		t = recordTime
	}
	return t.UTC()
}

// processLocked adds one record of p to its window, ending windows where the
// record calls for it.
func (w *Worker) processLocked(ctx context.Context, p *partitionState, r *kgo.Record) error {
	if p.win != nil && r.Offset < p.win.next {
		return nil // already in this window (a re-delivered fetch)
	}
	if p.win == nil {
		p.win = newWindow(r)
	} else if p.win.firstRecordTime.IsZero() {
		p.win.firstRecordTime = r.Timestamp // the window began with a skipped batch
	}
	if w.cfg.Dedup == "on" {
		if p.dedup == nil {
			// Not rebuilt (rebuildDedups runs before handle hands records
			// over; a partition fed otherwise starts with nothing remembered).
			p.dedup = newDeduper(w.cfg.DedupWindow, w.cfg.DedupMaxIDs)
		}
		p.dedup.observe(r.Timestamp)
	}
	reason := ""
	if len(r.Value) == 0 {
		reason = "empty record value"
	} else if err := p.row.Decode(r.Value); err != nil {
		reason = err.Error()
	}
	if reason != "" {
		w.dlq.send(newDeadLetter(p.tp, r, reason), deadLetterKey(r))
		w.metrics.deadLetters.WithLabelValues(p.tp.topic).Inc()
		p.win.deadLetters++
		w.countDeadLetterLocked(p, r)
		p.win.advance(r)
		return nil
	}
	if p.dedup != nil && w.dropRepeatLocked(p, r) {
		p.win.advance(r)
		return nil
	}
	bucket := w.bucketOf(p.row, r.Timestamp)

	// Roll-age in record time: the record starts the next window.
	if p.win.rows > 0 && r.Timestamp.Sub(p.win.firstRecordTime) >= w.cfg.RollAge {
		if err := w.endWindowLocked(ctx, p, "age"); err != nil {
			return err
		}
		p.win = newWindow(r)
	}
	f := p.win.files[bucket.Unix()]
	if f == nil {
		if w.openFiles >= w.cfg.MaxOpenFiles && len(p.win.files) > 0 {
			if err := w.endWindowLocked(ctx, p, "open-files"); err != nil {
				return err
			}
			p.win = newWindow(r)
		}
		if w.openFiles >= w.cfg.MaxOpenFiles {
			// Other partitions hold the files: land their windows.
			for _, q := range w.sortedPartitionsLocked() {
				if q != p && q.win != nil && len(q.win.files) > 0 {
					if err := w.endWindowLocked(ctx, q, "open-files"); err != nil {
						return err
					}
				}
			}
		}
		var err error
		if f, err = w.openFileLocked(ctx, p, bucket, r.Offset); err != nil {
			return err
		}
	}
	if err := f.w.AppendRow(p.row, r.Timestamp); err != nil {
		return fmt.Errorf("lake: %s: %w", f.name, err)
	}
	f.last = r.Offset
	w.countRowLocked(p, f, r.Timestamp)
	p.win.rows++
	p.win.advance(r)
	switch {
	case p.win.rows >= w.cfg.RollRows:
		return w.endWindowLocked(ctx, p, "rows")
	case p.win.rows%bytesCheckEvery == 0 && p.win.estimatedBytes() >= w.cfg.RollBytes:
		return w.endWindowLocked(ctx, p, "bytes")
	}
	return nil
}

func newWindow(r *kgo.Record) *window {
	return &window{start: r.Offset, next: r.Offset, firstRecordTime: r.Timestamp, files: map[int64]*outFile{}}
}

// advance moves the window's end past r.
func (win *window) advance(r *kgo.Record) {
	win.next = r.Offset + 1
	if r.Timestamp.After(win.maxRecordTime) {
		win.maxRecordTime = r.Timestamp
	}
}

func (win *window) estimatedBytes() int64 {
	var n int64
	for _, f := range win.order {
		n += f.w.Bytes()
	}
	return n
}

func (w *Worker) openFileLocked(ctx context.Context, p *partitionState, bucket time.Time, first int64) (*outFile, error) {
	if err := w.clearSupersededLocked(ctx, p, bucket); err != nil {
		return nil, err
	}
	// Published as FileName(partition, first, last) once last is known.
	name := w.layout.DataFile(p.tp.topic, bucket, p.tp.partition, first, first)
	obj, err := w.store.Create(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("lake: create %s: %w", name, err)
	}
	pw, err := parquet.NewWriter(obj, w.schema, parquet.Options{Compression: w.cfg.Compression,
		RowGroupRows: w.cfg.RowGroupRows, RowGroupBytes: w.cfg.RowGroupBytes})
	if err != nil {
		obj.Abort(ctx)
		return nil, fmt.Errorf("lake: %s: %w", name, err)
	}
	f := &outFile{name: name, bucket: bucket, obj: obj, w: pw, first: first, last: first}
	p.win.files[bucket.Unix()] = f
	p.win.order = append(p.win.order, f)
	w.openFiles++
	w.metrics.openFiles.Set(float64(w.openFiles))
	return f, nil
}

// endWindowLocked lands p's window: publish every file, acknowledge the dead
// letters, then commit the offset after the window. On any failure the
// unpublished files are discarded and the error is returned; the offset is
// not committed.
func (w *Worker) endWindowLocked(ctx context.Context, p *partitionState, reason string) error {
	win := p.win
	if win == nil {
		return nil
	}
	p.win = nil
	started := w.now()
	defer w.releaseLocked(ctx, win)
	var rows, size int64
	for _, f := range win.order {
		f.w.SetSource(p.tp.topic, p.tp.partition, f.first, f.last)
		f.w.SetMetadata(audit.MetaRows, fileRowCounts(f))
		if err := f.w.Close(); err != nil {
			return fmt.Errorf("lake: %s: %w", f.name, err)
		}
		if err := w.publishFileLocked(ctx, p, win, f); err != nil {
			return err
		}
		rows += f.w.Rows()
		size += f.w.Bytes()
		w.metrics.files.WithLabelValues(p.tp.topic).Inc()
		if w.cfg.AfterPublish != nil {
			w.cfg.AfterPublish(f.name)
		}
	}
	if err := w.publishAuditLocked(ctx, p, win); err != nil {
		return err
	}
	if win.deadLetters > 0 {
		if err := w.dlq.flush(ctx); err != nil {
			return fmt.Errorf("lake: dead letters of %s/%d: %w", p.tp.topic, p.tp.partition, err)
		}
	}
	if err := w.commit.commit(ctx, p.tp, win.next, win.maxRecordTime); err != nil {
		return fmt.Errorf("lake: commit %s/%d at %d: %w", p.tp.topic, p.tp.partition, win.next, err)
	}
	w.applyAuditLocked(p, win)
	w.metrics.commitLatency.Observe(w.now().Sub(started).Seconds())
	w.metrics.rows.WithLabelValues(p.tp.topic).Add(float64(rows))
	w.metrics.bytes.WithLabelValues(p.tp.topic).Add(float64(size))
	w.metrics.windows.WithLabelValues(p.tp.topic, reason).Inc()
	w.mergeDedupCountsLocked(p.tp.topic, win.dedup)
	for _, f := range win.order {
		w.addPendingLocked(p.tp.topic, f.bucket)
	}
	w.logger.Debug("window landed", "topic", p.tp.topic, "partition", p.tp.partition, "start", win.start,
		"next", win.next, "rows", rows, "files", len(win.order), "dead_letters", win.deadLetters, "reason", reason)
	return nil
}

// discardLocked drops p's window without publishing or committing; the
// records are landed again from the committed offset.
func (w *Worker) discardLocked(ctx context.Context, p *partitionState) {
	if p.win == nil {
		return
	}
	win := p.win
	p.win = nil
	w.releaseLocked(ctx, win)
	w.logger.Info("discarded unpublished window", "topic", p.tp.topic, "partition", p.tp.partition,
		"start", win.start, "next", win.next, "files", len(win.order))
}

// releaseLocked aborts the window's objects that were not published (Abort
// after Publish does nothing) and gives back their open-file slots. The
// aborts share one deadline: they are best effort (leftovers are removed
// when the partition is next assigned), and with the store down each would
// otherwise spend the S3 client's whole retry policy (about 5 s), one after
// another, before a failed worker could stop.
func (w *Worker) releaseLocked(ctx context.Context, win *window) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	for _, f := range win.order {
		f.w.Close() // frees the builders; a no-op for a closed writer
		if err := f.obj.Abort(actx); err != nil {
			w.logger.Warn("discarding an unpublished file failed; it is removed when its partition is next assigned",
				"name", f.name, "err", err)
		}
	}
	w.openFiles -= len(win.order)
	w.metrics.openFiles.Set(float64(w.openFiles))
}

// abortTimeout bounds the discarding of one window's unpublished objects.
const abortTimeout = 10 * time.Second
