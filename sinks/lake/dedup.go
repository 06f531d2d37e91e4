package lake

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/audit"
	"millrace/schemas"
)

// Dedup state of one partition (see doc.go, "Dedup", for why the rules are
// what they are).
//
// The state is a pure function of the partition's records before the one
// decided, and of a bounded stretch of them: the last DedupMaxIDs records
// that carry an id, among those read within DedupWindow of record time. Time
// here is the partition clock, the largest record timestamp read so far
// (so it only moves forward and a record's age is measured the same way by
// every worker). Every record with an id enters the state, whether it was
// dropped or not, so the state never depends on earlier decisions, only on
// the records: a worker that rebuilds it by reading the stretch again gets
// the same state as one that never stopped.
//
// Entries sit in one ring in the order they were read, and both bounds
// (age and count) remove from its oldest end, so the ring is exactly the
// set the definition names. Two indexes point into it:
//   - UUIDs: a count of each id's entries in the ring; a record is a repeat
//     when its id has one.
//   - Tail ids (file prefix + byte offset): per prefix, the entries whose
//     offsets decrease from the front (a monotonic queue), so the front is
//     the largest offset of that file in the ring; a record is a repeat
//     when its offset is at or below it. A file's offsets grow, so the
//     queue usually holds one entry.

// idKind is the shape of an event id.
type idKind uint8

const (
	idNone idKind = iota // no id, or one of another shape: passes, counted
	idTail               // 32 hex digits: 16 of file prefix, 16 of byte offset
	idUUID               // 8-4-4-4-12 hex digits
)

// parseEventID classifies id and packs it into 16 bytes: the UUID's bytes,
// or the tail id's prefix then its offset, both big-endian.
func parseEventID(id string) (idKind, [16]byte) {
	var out [16]byte
	switch len(id) {
	case 32:
		if _, err := hex.Decode(out[:], []byte(id)); err != nil || !isLowerHex(id) {
			return idNone, out
		}
		return idTail, out
	case 36:
		if id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
			return idNone, out
		}
		var digits [32]byte
		n := copy(digits[:], id[:8])
		n += copy(digits[n:], id[9:13])
		n += copy(digits[n:], id[14:18])
		n += copy(digits[n:], id[19:23])
		copy(digits[n:], id[24:])
		if _, err := hex.Decode(out[:], digits[:]); err != nil {
			return idNone, out
		}
		return idUUID, out
	}
	return idNone, out
}

// isLowerHex reports whether s has no upper-case hex digit: the tailer
// writes lower case, and "ABC…" and "abc…" must not be two spellings of one
// id that one worker could treat as equal and another not.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'F' {
			return false
		}
	}
	return true
}

// dedupEntry is one remembered record.
type dedupEntry struct {
	id    [16]byte
	clock int64 // the partition clock (Unix ms) when it was read
	kind  idKind
}

// tailMark is one entry of a prefix's monotonic queue.
type tailMark struct {
	seq    uint64 // the entry's sequence number in the ring
	offset uint64
}

// deduper decides which records of one partition are repeats.
type deduper struct {
	window  int64 // DedupWindow in ms
	maxIDs  int   // DedupMaxIDs
	clock   int64 // largest record timestamp read (Unix ms); valid when started
	started bool

	ring []dedupEntry // circular; grows up to maxIDs
	head int          // index of the oldest entry
	n    int          // entries held
	seq  uint64       // sequence number of the next entry

	uuids map[[16]byte]int32     // UUID -> entries in the ring
	tails map[[8]byte][]tailMark // file prefix -> queue, largest offset first
}

func newDeduper(window time.Duration, maxIDs int) *deduper {
	return &deduper{window: window.Milliseconds(), maxIDs: maxIDs,
		uuids: map[[16]byte]int32{}, tails: map[[8]byte][]tailMark{}}
}

// observe moves the partition clock to the record time ts and forgets the
// entries it ages out. Every record the worker reads is observed, with or
// without an id, so every worker's clock agrees.
func (d *deduper) observe(ts time.Time) {
	ms := ts.UnixMilli()
	if !d.started || ms > d.clock {
		d.clock, d.started = ms, true
	}
	for d.n > 0 && d.ring[d.head].clock <= d.clock-d.window {
		d.evictOldest()
	}
}

// decide reports whether the record with id of kind (after observe) is a
// repeat, and remembers it either way.
func (d *deduper) decide(kind idKind, id [16]byte) bool {
	var repeat bool
	switch kind {
	case idNone:
		return false
	case idUUID:
		repeat = d.uuids[id] > 0
	case idTail:
		if q := d.tails[[8]byte(id[:8])]; len(q) > 0 {
			repeat = tailOffset(id) <= q[0].offset
		}
	}
	d.remember(kind, id)
	return repeat
}

func tailOffset(id [16]byte) uint64 {
	var o uint64
	for _, b := range id[8:] {
		o = o<<8 | uint64(b)
	}
	return o
}

// remember appends an entry, first making room by forgetting the oldest.
func (d *deduper) remember(kind idKind, id [16]byte) {
	if d.n == d.maxIDs {
		d.evictOldest()
	}
	if d.n == len(d.ring) {
		d.grow()
	}
	i := d.head + d.n
	if i >= len(d.ring) {
		i -= len(d.ring)
	}
	d.ring[i] = dedupEntry{id: id, clock: d.clock, kind: kind}
	d.n++
	seq := d.seq
	d.seq++
	if kind == idUUID {
		d.uuids[id]++
		return
	}
	prefix, offset := [8]byte(id[:8]), tailOffset(id)
	q := d.tails[prefix]
	for len(q) > 0 && q[len(q)-1].offset <= offset {
		q = q[:len(q)-1]
	}
	d.tails[prefix] = append(q, tailMark{seq: seq, offset: offset})
}

// grow doubles the ring (up to maxIDs), keeping the entries in order: the
// ring only takes the memory its entries need.
func (d *deduper) grow() {
	size := max(2*len(d.ring), 1024)
	size = min(size, d.maxIDs)
	ring := make([]dedupEntry, size)
	for i := 0; i < d.n; i++ {
		j := d.head + i
		if j >= len(d.ring) {
			j -= len(d.ring)
		}
		ring[i] = d.ring[j]
	}
	d.ring, d.head = ring, 0
}

// evictOldest forgets the oldest entry.
func (d *deduper) evictOldest() {
	e := &d.ring[d.head]
	seq := d.seq - uint64(d.n)
	d.head++
	if d.head == len(d.ring) {
		d.head = 0
	}
	d.n--
	switch e.kind {
	case idUUID:
		if c := d.uuids[e.id]; c > 1 {
			d.uuids[e.id] = c - 1
		} else {
			delete(d.uuids, e.id)
		}
	case idTail:
		prefix := [8]byte(e.id[:8])
		q := d.tails[prefix]
		if len(q) > 0 && q[0].seq == seq {
			q = q[1:]
		}
		if len(q) == 0 {
			delete(d.tails, prefix)
		} else {
			d.tails[prefix] = q
		}
	}
}

// dedupKey indexes a window's counts.
type dedupKey struct{ source, hour string }

// dedupCounts are a window's counts, merged into the worker's totals when
// the window lands (a discarded window's records are decided again).
type dedupCounts map[dedupKey]*[2]int64 // [deduplicated, no id]

func (c dedupCounts) add(source, hour string, which int) {
	k := dedupKey{source, hour}
	v := c[k]
	if v == nil {
		v = new([2]int64)
		c[k] = v
	}
	v[which]++
}

const (
	countDeduplicated = 0
	countNoID         = 1
)

// auditSource is the audit source key of a decoded row.
func auditSource(row *schemas.Row) string {
	str := func(name string) string {
		s, _ := row.Get(name).(string)
		return s
	}
	switch row.Schema().Name {
	case "log":
		return audit.LogSource(str("host"), str("source"))
	case "click":
		return audit.ClickSource(str("url"))
	default:
		return audit.MetricSource(str("source"))
	}
}

// mergeDedupCountsLocked adds a landed window's counts to the Prometheus
// counters. The audit reads them per source and hour from the window
// (audit.go).
func (w *Worker) mergeDedupCountsLocked(topic string, c dedupCounts) {
	for _, v := range c {
		w.metrics.duplicates.WithLabelValues(topic).Add(float64(v[countDeduplicated]))
		w.metrics.withoutID.WithLabelValues(topic).Add(float64(v[countNoID]))
	}
}

// dropRepeatLocked decides whether r, decoded into p.row, is a repeat to
// drop, and counts it when it is one or has no id.
func (w *Worker) dropRepeatLocked(p *partitionState, r *kgo.Record) bool {
	kind, id := rowEventID(p.row, r.Value)
	repeat := p.dedup.decide(kind, id)
	if !repeat && kind != idNone {
		return false
	}
	if p.win.dedup == nil {
		p.win.dedup = dedupCounts{}
	}
	which := countNoID
	if repeat {
		which = countDeduplicated
	}
	p.win.dedup.add(auditSource(p.row), audit.Hour(w.eventTime(p.row, r.Timestamp)), which)
	return repeat
}

// idPrefix is how the beacon and the tailer begin every event they write.
const idPrefix = `{"event_id":"`

// rowEventID is the id of the event decoded into row from value. The
// beacon and the tailer write event_id first, so the id is read from the
// value in place when it starts so: decoding it again from the row (Get)
// allocates a string per record, a tenth of what landing a click costs.
// A JSON string without a backslash is its own contents, so this is the
// decoded value, except for an event that repeats the key (the decoder
// keeps the last; the beacon and the tailer never write one): it is judged
// by its first id, the same way by every worker.
func rowEventID(row *schemas.Row, value []byte) (idKind, [16]byte) {
	if len(value) > len(idPrefix)+36 && string(value[:len(idPrefix)]) == idPrefix {
		rest := value[len(idPrefix):]
		for _, n := range [...]int{36, 32} {
			if rest[n] == '"' && bytes.IndexByte(rest[:n], '\\') < 0 {
				return parseEventID(unsafe.String(&rest[0], n))
			}
		}
	}
	if s, ok := row.Get("event_id").(string); ok {
		return parseEventID(s)
	}
	return idNone, [16]byte{}
}

// dedupHistory reads what a partition's dedup state is rebuilt from; the
// kgo implementation is below, tests without a broker leave it nil (every
// partition then starts with an empty state).
type dedupHistory interface {
	// committed returns the group's committed offset of tp and the
	// record-time watermark of its metadata (zero when it has none); ok is
	// false when nothing is committed.
	committed(ctx context.Context, tp topicPartition) (offset int64, watermark time.Time, ok bool, err error)
	// replay calls fn with the records of tp from the first whose record
	// timestamp is at or after since, up to (not including) offset before,
	// as the group's client delivers them.
	replay(ctx context.Context, tp topicPartition, since time.Time, before int64, fn func(*kgo.Record)) error
}

// rebuildTimeout bounds the rebuilding of one partition's state.
const rebuildTimeout = 2 * time.Minute

// rebuildDedupLocked returns the dedup state of p as it was before the
// record at offset first, the first one the group delivered after the
// assignment: the records of the last DedupWindow before it are read again
// and decided without landing anything. The window's last record time is at
// most the partition clock there, so everything older than it minus the
// window is forgotten by every worker already (doc.go, "Dedup").
func (w *Worker) rebuildDedupLocked(ctx context.Context, p *partitionState, first int64) *deduper {
	d := newDeduper(w.cfg.DedupWindow, w.cfg.DedupMaxIDs)
	if w.history == nil || first == 0 {
		return d
	}
	logger := w.logger.With("topic", p.tp.topic, "partition", p.tp.partition)
	ctx, cancel := context.WithTimeout(ctx, rebuildTimeout)
	defer cancel()
	offset, watermark, ok, err := w.history.committed(ctx, p.tp)
	switch {
	case err != nil:
		logger.Warn("dedup: cannot read the committed offset; repeats of records before it are not recognised", "err", err)
		return d
	case !ok || offset != first:
		// Nothing committed: the partition starts where StartAt puts it,
		// with nothing remembered, for every worker alike.
		return d
	case watermark.IsZero():
		logger.Warn("dedup: the committed offset carries no record time; repeats of records before it are not recognised", "offset", offset)
		return d
	}
	row := w.schema.NewRow()
	read := 0
	err = w.history.replay(ctx, p.tp, watermark.Add(-w.cfg.DedupWindow+time.Millisecond), first, func(r *kgo.Record) {
		read++
		d.observe(r.Timestamp)
		if len(r.Value) == 0 || row.Decode(r.Value) != nil {
			return // dead-lettered: it has no id
		}
		d.decide(rowEventID(row, r.Value))
	})
	w.metrics.dedupRebuilt.WithLabelValues(p.tp.topic).Add(float64(read))
	if err != nil {
		logger.Warn("dedup: rebuilding the remembered ids failed part way; some repeats may be landed", "records_read", read, "err", err)
		return d
	}
	logger.Info("dedup: rebuilt the remembered ids", "records_read", read, "ids", d.n, "before", first)
	return d
}

// kgoHistory reads the committed offsets with the group's client, and
// replays with direct Fetch requests given to franz-go's own fetch
// processing, so the replay sees exactly the records the group's client
// delivered, past transaction markers, and skips the batches the worker
// skipped (badbatch.go, stall.go) the same way.
type kgoHistory struct {
	client       *kgo.Client
	group        string
	reader       *kgoBatchReader
	decompressor kgo.Decompressor // the worker's bounded one
}

func (h *kgoHistory) committed(ctx context.Context, tp topicPartition) (int64, time.Time, bool, error) {
	offsets, err := kadm.NewClient(h.client).FetchOffsetsForTopics(ctx, h.group, tp.topic)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	o, ok := offsets.Lookup(tp.topic, tp.partition)
	if !ok || o.Err != nil || o.At < 0 {
		if ok && o.Err != nil {
			return 0, time.Time{}, false, o.Err
		}
		return 0, time.Time{}, false, nil
	}
	wm, _ := decodeWatermark(o.Metadata)
	return o.At, wm, true, nil
}

func (h *kgoHistory) replay(ctx context.Context, tp topicPartition, since time.Time, before int64, fn func(*kgo.Record)) error {
	listed, err := kadm.NewClient(h.client).ListOffsetsAfterMilli(ctx, since.UnixMilli(), tp.topic)
	if err != nil {
		return err
	}
	start, ok := listed.Lookup(tp.topic, tp.partition)
	if !ok || start.Err != nil {
		return fmt.Errorf("listing the offset of %s: %v", since.Format(time.RFC3339Nano), start.Err)
	}
	decompressor := stoppingDecompressor{h.decompressor}
	for position := start.Offset; position >= 0 && position < before; {
		raw, err := h.reader.fetch(ctx, tp, position)
		if err != nil {
			return err
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: tp.topic, Partition: tp.partition,
			Offset: position}, &kmsg.FetchResponseTopicPartition{Partition: tp.partition, RecordBatches: raw}, decompressor, nil)
		for _, r := range fp.Records {
			if r.Offset >= position && r.Offset < before {
				fn(r)
			}
		}
		if tooLarge, ok := errors.AsType[*kgo.ErrDecompressTooLarge](fp.Err); ok {
			next = tooLarge.NextOffset // skipped by the group's client too
		} else if fp.Err != nil {
			return fp.Err
		}
		if next <= position {
			verdict, stuck := findStuckBatch(raw, tp, position, h.decompressor)
			if verdict != stallMalformed {
				return fmt.Errorf("no record past offset %d", position)
			}
			next = stuck.header.NextOffset() // skipped by the worker too (stall.go)
		}
		position = next
	}
	return nil
}
