package lake

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The lander is the worker's decisions, without I/O (doc.go, "Core and
// worker"): where windows start and end, which files open, which records
// append, go to the dead-letter topic or are dropped, when a window lands
// (publish, then commit) or is discarded, and when a bucket is first opened
// since the assignment (so a superseded owner's files are cleared first).
// Events go in — a record classified by the worker, a poll's clock, an
// undecodable batch skipped, a file's size, a tick, a revoke, a loss, a
// shutdown, a failure — and actions come out, which the worker runs in
// order. It assumes each action succeeds: a failed one stops the worker,
// which then tells the lander (failed) and discards what it holds.
type lander struct {
	limits    landerLimits
	parts     map[topicPartition]*landerPartition
	openFiles int // over all partitions
}

// landerLimits are the cut points of Config the lander applies.
type landerLimits struct {
	rollRows, rollBytes  int64
	rollAge, idleTimeout time.Duration
	maxOpenFiles         int
	// deadLetterBytes lands a window whose dead letters reach this size
	// (coreRecord.size); 0: no limit. Format iceberg holds a window's dead
	// letters in memory until it lands (deadletter.go), and a stream of
	// nothing but dead letters would otherwise grow a window until the
	// idle timeout: rows, bytes and age count rows only.
	deadLetterBytes int64
}

// landerPartition is the lander's state of one assigned partition.
type landerPartition struct {
	win      *coreWindow // nil between windows
	lastRead time.Time   // wall clock of the last delivery (or skip), for the idle timeout
	// cleared holds the buckets (Unix seconds) already opened since the
	// assignment: a superseded owner's files there are cleared (fence.go).
	cleared map[int64]bool
}

// coreWindow is one commit window of a partition: the records from start up
// to (not including) next, and the files they went to.
type coreWindow struct {
	start, next     int64
	firstRecordTime time.Time // zero while the window holds only a skipped batch
	maxRecordTime   time.Time
	rows            int64
	deadLetters     int   // records and skipped batches sent to the dead-letter topic
	deadLetterBytes int64 // the sizes of its dead-lettered records
	byBucket        map[fileKey]*coreFile
	opened          []*coreFile // in opening order
}

// coreFile is one file of a window: a bucket's rows from first to last
// (of one value of the identity partition's field, with a table
// partitioned by one).
type coreFile struct {
	bucket      time.Time
	value       string
	first, last int64
}

// fileKey names a file of a window: its bucket (Unix seconds) and its
// identity partition value ("" without one).
type fileKey struct {
	bucket int64
	value  string
}

// recordKind is what the worker found a record to be.
type recordKind uint8

const (
	recordRow        recordKind = iota // fits the schema: lands in its bucket's file
	recordDeadLetter                   // empty or does not fit: goes to the dead-letter topic
	recordRepeat                       // a repeat of a remembered event id: dropped
)

// coreRecord is a record as the lander sees it.
type coreRecord struct {
	offset    int64
	timestamp time.Time // the record's timestamp (record time)
	kind      recordKind
	bucket    time.Time // recordRow: the bucket of its event time
	size      int64     // recordDeadLetter: what its dead letter holds, in bytes
	// value is, with a table partitioned by identity on a field, the
	// row's value of that field as a key (identityKey); "" otherwise. A
	// data file holds one partition value, so rows of another value go
	// to another file of the bucket.
	value string
	// rows, when not nil, are the rows of a recordRow that holds several
	// (an OTLP record: schemas/otel), in order; bucket and value are then
	// unused. A record's rows are decided together: every cut falls
	// before or after them, never between, so they land in one window.
	rows []coreRow
}

// coreRow is one row of a record that holds several.
type coreRow struct {
	bucket time.Time
	value  string
	repeat bool // a repeat of a remembered id: dropped, not landed
}

// actionKind names what the worker must do.
type actionKind uint8

const (
	actOpen       actionKind = iota // create bucket's file of tp's window, first row at offset (clear: first open of the bucket since the assignment)
	actAppend                       // append the record at offset to bucket's file (checkSize: report the files' size with sized)
	actDeadLetter                   // send the record at offset to the dead-letter topic
	actDrop                         // drop the record at offset, a repeat (counted, not landed)
	actLand                         // publish win's files, acknowledge its dead letters, then commit (committer) its end
	actDiscard                      // drop win's unpublished files; commit nothing
)

// action is one thing the lander asks the worker to do.
type action struct {
	kind      actionKind
	tp        topicPartition
	bucket    time.Time
	value     string // the file's identity partition value key, "" without one
	offset    int64
	row       int // the row of the record at offset acted on (coreRecord.rows), 0 for a record of one row
	clear     bool
	checkSize bool
	reason    string      // actLand: why the window ends
	win       *coreWindow // the window acted on; after actLand and actDiscard no longer the lander's
}

func (a action) String() string {
	p := fmt.Sprintf("%s/%d", a.tp.topic, a.tp.partition)
	switch a.kind {
	case actOpen:
		s := fmt.Sprintf("open %s %s first=%d", p, bucketName(a.bucket, a.value), a.offset)
		if a.clear {
			s += " clear"
		}
		return s
	case actAppend:
		s := fmt.Sprintf("append %s %s @%d%s", p, bucketName(a.bucket, a.value), a.offset, rowName(a.row))
		if a.checkSize {
			s += " size?"
		}
		return s
	case actDeadLetter:
		return fmt.Sprintf("dead-letter %s @%d", p, a.offset)
	case actDrop:
		return fmt.Sprintf("drop-repeat %s @%d%s", p, a.offset, rowName(a.row))
	case actLand:
		return fmt.Sprintf("land %s %s (%s)", p, a.win, a.reason)
	default:
		return fmt.Sprintf("discard %s %s", p, a.win)
	}
}

func (win *coreWindow) String() string {
	var files []string
	for _, f := range win.opened {
		files = append(files, fmt.Sprintf("%s:%d-%d", bucketName(f.bucket, f.value), f.first, f.last))
	}
	return fmt.Sprintf("[%d,%d) rows=%d dl=%d files=[%s]", win.start, win.next, win.rows, win.deadLetters, strings.Join(files, " "))
}

func newLander(limits landerLimits) *lander {
	return &lander{limits: limits, parts: map[topicPartition]*landerPartition{}}
}

// partition returns tp's state, new on first sight (an assignment, or a
// first delivery).
func (l *lander) partition(tp topicPartition) *landerPartition {
	p := l.parts[tp]
	if p == nil {
		p = &landerPartition{cleared: map[int64]bool{}}
		l.parts[tp] = p
	}
	return p
}

// sorted lists the partitions in a fixed order, so whatever lands several
// windows does so in the same order every time.
func (l *lander) sorted() []topicPartition {
	out := make([]topicPartition, 0, len(l.parts))
	for tp := range l.parts {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}

// window returns tp's open window, nil between windows.
func (l *lander) window(tp topicPartition) *coreWindow {
	if p := l.parts[tp]; p != nil {
		return p.win
	}
	return nil
}

// delivered notes that a poll delivered records of tp at now.
func (l *lander) delivered(tp topicPartition, now time.Time) {
	l.partition(tp).lastRead = now
}

// fresh tells whether the record at offset is new to tp's window: a
// re-delivered fetch repeats records the window holds already, which the
// worker must neither decide nor hand over again.
func (l *lander) fresh(tp topicPartition, offset int64) bool {
	win := l.window(tp)
	return win == nil || offset >= win.next
}

// record decides a fresh record of tp.
func (l *lander) record(tp topicPartition, r coreRecord) []action {
	p := l.partition(tp)
	if p.win == nil {
		p.win = newCoreWindow(r)
	} else if p.win.firstRecordTime.IsZero() {
		p.win.firstRecordTime = r.timestamp // the window began with a skipped batch
	}
	switch r.kind {
	case recordDeadLetter:
		p.win.deadLetters++
		p.win.deadLetterBytes += r.size
		p.win.advance(r)
		acts := []action{{kind: actDeadLetter, tp: tp, offset: r.offset, win: p.win}}
		if l.limits.deadLetterBytes > 0 && p.win.deadLetterBytes >= l.limits.deadLetterBytes {
			acts = append(acts, l.land(tp, "dead-letters"))
		}
		return acts
	case recordRepeat:
		p.win.advance(r)
		return []action{{kind: actDrop, tp: tp, offset: r.offset, win: p.win}}
	}
	if r.rows != nil {
		return l.appendRows(tp, p, r, r.rows)
	}
	one := [1]coreRow{{bucket: r.bucket, value: r.value}}
	return l.appendRows(tp, p, r, one[:])
}

// appendRows decides the rows of a fresh record of tp that fits the
// schema: the cuts the record causes come before its first row or after
// its last, so the record's rows land in one window whatever their number.
// A record with more rows than RollRows, or more buckets than
// MaxOpenFiles, overshoots the limit by its own rows or files.
func (l *lander) appendRows(tp topicPartition, p *landerPartition, r coreRecord, rows []coreRow) []action {
	var acts []action
	fresh := 0
	for _, row := range rows {
		if !row.repeat {
			fresh++
		}
	}
	// Roll-age in record time: the record starts the next window.
	if fresh > 0 && p.win.rows > 0 && r.timestamp.Sub(p.win.firstRecordTime) >= l.limits.rollAge {
		acts = append(acts, l.land(tp, "age"))
		p.win = newCoreWindow(r)
	}
	if opens := p.win.opens(rows); opens > 0 && l.openFiles+opens > l.limits.maxOpenFiles {
		if len(p.win.byBucket) > 0 {
			acts = append(acts, l.land(tp, "open-files"))
			p.win = newCoreWindow(r)
			opens = p.win.opens(rows)
		}
		if l.openFiles+opens > l.limits.maxOpenFiles {
			// Other partitions hold the files: land their windows.
			for _, q := range l.sorted() {
				if w := l.parts[q].win; q != tp && w != nil && len(w.byBucket) > 0 {
					acts = append(acts, l.land(q, "open-files"))
				}
			}
		}
	}
	before, lastAppend := p.win.rows, -1
	for i, row := range rows {
		if row.repeat {
			acts = append(acts, action{kind: actDrop, tp: tp, offset: r.offset, row: i, win: p.win})
			continue
		}
		key := fileKey{row.bucket.Unix(), row.value}
		f := p.win.byBucket[key]
		if f == nil {
			f = &coreFile{bucket: row.bucket, value: row.value, first: r.offset, last: r.offset}
			p.win.byBucket[key] = f
			p.win.opened = append(p.win.opened, f)
			l.openFiles++
			acts = append(acts, action{kind: actOpen, tp: tp, bucket: row.bucket, value: row.value, offset: r.offset,
				row: i, clear: !p.cleared[row.bucket.Unix()], win: p.win})
			p.cleared[row.bucket.Unix()] = true
		}
		f.last = r.offset
		p.win.rows++
		lastAppend = len(acts)
		acts = append(acts, action{kind: actAppend, tp: tp, bucket: row.bucket, value: row.value, offset: r.offset, row: i, win: p.win})
	}
	p.win.advance(r)
	// The size is checked after the record's last row when its rows
	// passed a multiple of bytesCheckEvery: a bytes cut never splits a
	// record either.
	if lastAppend >= 0 && p.win.rows < l.limits.rollRows && p.win.rows/bytesCheckEvery > before/bytesCheckEvery {
		acts[lastAppend].checkSize = true
	}
	if p.win.rows >= l.limits.rollRows {
		acts = append(acts, l.land(tp, "rows"))
	}
	return acts
}

// opens is how many files of the window the fresh rows need that it has
// not opened yet.
func (win *coreWindow) opens(rows []coreRow) int {
	n := 0
	var first fileKey
	var more map[fileKey]bool // the new files past the first: only a record of several buckets makes it
	for _, row := range rows {
		key := fileKey{row.bucket.Unix(), row.value}
		if row.repeat || win.byBucket[key] != nil || (n > 0 && key == first) || more[key] {
			continue
		}
		switch n {
		case 0:
			first = key
		case 1:
			more = map[fileKey]bool{key: true}
		default:
			more[key] = true
		}
		n++
	}
	return n
}

// rowName is how traces show the row of a record of several ("" for the first).
func rowName(row int) string {
	if row == 0 {
		return ""
	}
	return fmt.Sprintf("#%d", row)
}

// sized reports the estimated size of tp's window's files, asked for by an
// append with checkSize.
func (l *lander) sized(tp topicPartition, bytes int64) []action {
	if l.window(tp) == nil || bytes < l.limits.rollBytes {
		return nil
	}
	return []action{l.land(tp, "bytes")}
}

// skipped moves tp past an undecodable batch from first, where the client
// stands, to next: the skipped offsets join the window like dead-lettered
// records. It returns the window's end, the partition's new position.
func (l *lander) skipped(tp topicPartition, first, next int64, now time.Time) int64 {
	p := l.partition(tp)
	if p.win == nil {
		// The window starts at the group's position, which is the batch's
		// first offset or inside the batch.
		p.win = &coreWindow{start: first, next: first, byBucket: map[fileKey]*coreFile{}}
	}
	p.win.deadLetters++
	p.win.next = max(p.win.next, next)
	// A partition whose last delivery was a skip lands on the idle timeout.
	p.lastRead = now
	return p.win.next
}

// tick lands the windows of partitions that delivered nothing for
// IdleTimeout.
func (l *lander) tick(now time.Time) []action {
	var acts []action
	for _, tp := range l.sorted() {
		if p := l.parts[tp]; p.win != nil && now.Sub(p.lastRead) >= l.limits.idleTimeout {
			acts = append(acts, l.land(tp, "idle"))
		}
	}
	return acts
}

// revoked lands the window of a revoked partition (publish, then commit
// with the generation that still owns it; discard when the worker has
// failed) and forgets the partition.
func (l *lander) revoked(tp topicPartition, failed bool) []action {
	var acts []action
	if failed {
		acts = l.discard(tp)
	} else if l.window(tp) != nil {
		acts = []action{l.land(tp, "revoke")}
	}
	delete(l.parts, tp)
	return acts
}

// lost discards the window of a lost partition (another member may own it
// already, so nothing may be committed) and forgets the partition.
func (l *lander) lost(tp topicPartition) []action {
	acts := l.discard(tp)
	delete(l.parts, tp)
	return acts
}

// shutdown lands every open window. The worker discards what follows a
// landing that fails.
func (l *lander) shutdown() []action { return l.landAll("shutdown") }

// landAll lands every open window for reason: at shutdown, and before a
// registry-typed table's schema changes ("schema": the files of open
// windows have the old columns).
func (l *lander) landAll(reason string) []action {
	var acts []action
	for _, tp := range l.sorted() {
		if l.parts[tp].win != nil {
			acts = append(acts, l.land(tp, reason))
		}
	}
	return acts
}

// failed discards every window: after a failure nothing more is committed.
func (l *lander) failed() []action {
	var acts []action
	for _, tp := range l.sorted() {
		acts = append(acts, l.discard(tp)...)
	}
	return acts
}

// land ends tp's window for reason and hands it to the worker.
func (l *lander) land(tp topicPartition, reason string) action {
	p := l.parts[tp]
	win := p.win
	p.win = nil
	l.openFiles -= len(win.opened)
	return action{kind: actLand, tp: tp, reason: reason, win: win}
}

// discard drops tp's window, if any.
func (l *lander) discard(tp topicPartition) []action {
	p := l.parts[tp]
	if p == nil || p.win == nil {
		return nil
	}
	win := p.win
	p.win = nil
	l.openFiles -= len(win.opened)
	return []action{{kind: actDiscard, tp: tp, win: win}}
}

func newCoreWindow(r coreRecord) *coreWindow {
	return &coreWindow{start: r.offset, next: r.offset, firstRecordTime: r.timestamp, byBucket: map[fileKey]*coreFile{}}
}

// bucketName is how traces and logs show a file's bucket: its hour, and
// its identity partition value when it has one.
func bucketName(bucket time.Time, value string) string {
	if value == "" {
		return bucket.Format("2006-01-02T15")
	}
	return bucket.Format("2006-01-02T15") + "[" + value + "]"
}

// advance moves the window's end past r.
func (win *coreWindow) advance(r coreRecord) {
	win.next = r.offset + 1
	if r.timestamp.After(win.maxRecordTime) {
		win.maxRecordTime = r.timestamp
	}
}
