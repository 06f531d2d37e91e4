package lake

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/schemas"
	"millrace/schemas/otel"
	"millrace/sinks/iceberg"
	"millrace/sinks/parquet"
	"millrace/store"
)

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// partitionState is what the worker holds for one assigned partition
// besides the lander's decisions (core.go).
type partitionState struct {
	tp  topicPartition
	row *schemas.Row // reused for every record
	win *window      // the files and counts of the lander's open window; nil before its first
	// position is the offset after the last record delivered (or batch
	// skipped), -1 until then; progressAt is when the partition was
	// assigned, last delivered or skipped, or last checked for a stall;
	// checkedAt is the last position whose valid batch was logged (stall.go).
	position, checkedAt int64
	progressAt          time.Time
	// member is the group member id the partition was assigned to
	// (fence.go).
	member string
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
	// Records of several rows (rows.go): the decoder of an OTLP schema's
	// records (nil for the other schemas) and what is held of the record
	// being landed, reused from record to record.
	otel     *otel.Rows
	multi    recordRows
	coreRows []coreRow
}

// window is what the worker holds for one of the lander's commit windows:
// the open files and the counts for the audit. The window's bounds are the
// lander's (the embedded coreWindow).
type window struct {
	*coreWindow
	files map[fileKey]*outFile // by bucket start (Unix seconds) and identity value
	order []*outFile           // in creation order
	dedup dedupCounts          // repeats dropped and rows without id, by source and hour
	audit map[auditKey]*auditCounts
	// deadLetterRows are the window's dead letters with Format iceberg,
	// in offset order, committed to the topic's dead-letter table with the
	// window (tabledeadletter.go).
	deadLetterRows []iceberg.DeadLetterRow
}

// outFile is one Parquet file of a window.
type outFile struct {
	name   string
	bucket time.Time
	// identity is the file's identity partition value (nil without one).
	identity *identityValue
	obj      store.Object
	w        *parquet.Writer
	first    int64
	last     int64
	// sources counts the rows per source and hour, for the footer.
	sources map[auditKey]int64
}

// deadLetterSink sends dead letters to `<Topic>.dlq` (Format hive).
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

// current is the record whose actions the worker runs: what it found the
// record to be, for the actions that write or count it.
type current struct {
	record *kgo.Record
	reason string // why it is a dead letter
	noID   bool   // a row without a recognised event id (counted)
	// identity is the row's identity partition value (nil without one).
	identity *identityValue
	// rows is the record's rows when it holds several (rows.go); nil otherwise.
	rows *recordRows
}

// processRecord classifies one record of p (decode, dedup), hands it to the
// lander and runs what the lander decides.
// The caller holds w.landing.
func (w *Worker) processRecord(ctx context.Context, p *partitionState, r *kgo.Record) error {
	if !w.core.fresh(p.tp, r.Offset) {
		return nil // already in this window (a re-delivered fetch)
	}
	if w.cfg.Dedup == "on" {
		if p.dedup == nil {
			// Not rebuilt (rebuildDedups runs before handle hands records
			// over; a partition fed otherwise starts with nothing remembered).
			p.dedup = newDeduper(w.cfg.DedupWindow, w.cfg.DedupMaxIDs)
			p.dedup.idField = w.cfg.eventIDField()
		}
		p.dedup.observe(r.Timestamp)
	}
	cur := &current{record: r}
	rec := coreRecord{offset: r.Offset, timestamp: r.Timestamp, kind: recordRow}
	if schemas.IsOTLP(w.schema) && len(r.Value) > 0 {
		return w.processRows(ctx, p, r, cur, rec)
	}
	switch {
	case len(r.Value) == 0:
		cur.reason = "empty record value"
	case w.registry != nil:
		var err error
		if cur.reason, err = w.decodeRegistry(ctx, p, r); err != nil {
			return err
		}
	default:
		if err := p.row.Decode(r.Value); err != nil {
			cur.reason = err.Error()
		}
	}
	switch {
	case cur.reason != "":
		rec.kind = recordDeadLetter
		rec.size = int64(len(r.Value)+len(cur.reason)) + deadLetterRowOverhead
	case p.dedup != nil:
		kind, repeat := p.dedup.decideRecord(p.row, r)
		if repeat {
			rec.kind = recordRepeat
		}
		cur.noID = !repeat && kind == idNone
	}
	if rec.kind == recordRow {
		rec.bucket = w.bucketOf(p.row, r.Timestamp)
		if w.identity != "" {
			cur.identity = w.identityOf(p.row)
			rec.value = cur.identity.key
		}
	}
	return w.runActions(ctx, w.core.record(p.tp, rec), cur)
}

// windowOf returns p's window for the lander's cw, new when p holds none
// for it yet.
func (p *partitionState) windowOf(cw *coreWindow) *window {
	if p.win == nil || p.win.coreWindow != cw {
		p.win = &window{coreWindow: cw, files: map[fileKey]*outFile{}}
	}
	return p.win
}

// takeWindow detaches p's window for the lander's cw (empty when the
// window opened no file and counted nothing).
func (p *partitionState) takeWindow(cw *coreWindow) *window {
	win := p.windowOf(cw)
	p.win = nil
	return win
}

func (win *window) estimatedBytes() int64 {
	var n int64
	for _, f := range win.order {
		n += f.w.Bytes()
	}
	return n
}
