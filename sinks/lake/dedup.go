package lake

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
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
//   - UUIDs: a hash table (below) of the ring position of each UUID's
//     newest entry; a record is a repeat when its UUID is in it. An older
//     entry of the same UUID leaves before the newest (the ring is FIFO), so
//     "the newest entry is in the ring" is "some entry is".
//   - Tail ids (file prefix + byte offset): per prefix, the entries whose
//     offsets decrease from the front (a monotonic queue), so the front is
//     the largest offset of that file in the ring; a record is a repeat
//     when its offset is at or below it. A file's offsets grow, so the
//     queue usually holds one entry.
//
// The UUID table is built for memory and cache misses, as a partition may
// remember millions of ids and several partitions share a worker. Its keys
// are stored once, in the ring (which the order of eviction needs anyway);
// a slot is 8 bytes: the position and 32 bits of the UUID's hash. Open
// addressing with linear probing keeps a lookup to one or two cache lines
// of slots, and the hash bits let it pass other UUIDs' slots without
// reading the ring, so a new UUID costs no read of the ring at all. A slot's
// home is computed from its hash bits, so deleting one shifts the rest of
// its run back (no tombstones, no rehash). The table has two thirds more
// slots than the ring has entries (load at most 0.6: at 0.75 the runs a
// deletion walks were twice as long, and a full state took 25% longer per
// id). Ring and table grow by doubling up to DedupMaxIDs, so a partition
// holds the memory of the ids it remembers, not of the cap: 24 bytes an
// entry in the ring, 1 of kind and about 13 of table, 38 bytes per id in
// all at the cap. The hash is seeded
// per deduper (hash/maphash): clients choose their UUIDs (the beacon keeps a
// client's), and a fixed hash would let them send ids that all probe one
// run. The seed changes where ids sit, never whether they are found, so
// decisions stay a function of the records.

// idKind is the shape of an event id.
type idKind uint8

const (
	idNone idKind = iota // no id, or one of another shape: passes, counted
	idTail               // 32 hex digits: 16 of file prefix, 16 of byte offset
	idUUID               // 8-4-4-4-12 hex digits
)

// parseEventID classifies id and packs it into 16 bytes: the UUID's bytes,
// or the tail id's prefix then its offset, both big-endian. A tail id is
// lower case: the tailer writes it so, and "ABC…" and "abc…" must not be
// two spellings of one id that one worker could treat as equal and another
// not. A UUID may be either case (RFC 9562).
func parseEventID(id string) (idKind, [16]byte) {
	var out [16]byte
	switch len(id) {
	case 32:
		if decodeHex(out[:], id) != hexLower {
			return idNone, out
		}
		return idTail, out
	case 36:
		if id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' ||
			decodeHex(out[0:4], id[0:8])|decodeHex(out[4:6], id[9:13])|decodeHex(out[6:8], id[14:18])|
				decodeHex(out[8:10], id[19:23])|decodeHex(out[10:16], id[24:36]) > hexUpper {
			return idNone, out
		}
		return idUUID, out
	}
	return idNone, out
}

// What decodeHex found; or-ed together they give the worst.
const (
	hexLower   = 0    // only 0-9 and a-f
	hexUpper   = 0x10 // A-F as well
	hexInvalid = 0xff // something else
)

// hexValues maps an ASCII byte to its hex value, or-ed with hexUpper for
// A-F; hexInvalid for any other byte.
var hexValues = func() (t [256]byte) {
	for i := range t {
		t[i] = hexInvalid
	}
	for i := byte(0); i < 10; i++ {
		t['0'+i] = i
	}
	for i := byte(0); i < 6; i++ {
		t['a'+i], t['A'+i] = 10+i, hexUpper|(10+i)
	}
	return t
}()

// decodeHex decodes the 2*len(dst) hex digits of src into dst and reports
// hexLower, hexUpper or (then dst is garbage) hexInvalid.
func decodeHex(dst []byte, src string) byte {
	var seen byte
	for i := range dst {
		a, b := hexValues[src[2*i]], hexValues[src[2*i+1]]
		seen |= a | b
		dst[i] = a<<4 | b&0x0f
	}
	if seen > hexUpper|0x0f {
		return hexInvalid
	}
	return seen & hexUpper
}

// dedupEntry is one remembered record.
type dedupEntry struct {
	id    [16]byte
	clock int64 // the partition clock (Unix ms) when it was read
}

// uuidSlot is a slot of the UUID table: pos is the ring position of the
// UUID's newest entry plus one (0: the slot is empty), hash the high 32 bits
// of its hash, which give the slot's home too.
type uuidSlot struct{ pos, hash uint32 }

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

	ring  []dedupEntry // circular; grows up to maxIDs
	kinds []idKind     // kinds[i] is the kind of ring[i]
	head  int          // index of the oldest entry
	n     int          // entries held
	seq   uint64       // sequence number of the next entry

	seed  maphash.Seed
	uuids []uuidSlot             // UUID -> its newest entry; see above
	tails map[[8]byte][]tailMark // file prefix -> queue, largest offset first
}

// maxDedupIDs is the largest DedupMaxIDs (40 GB of ids): ring positions
// and the home arithmetic fit 32 bits.
const maxDedupIDs = 1 << 30

func newDeduper(window time.Duration, maxIDs int) *deduper {
	d := &deduper{window: window.Milliseconds(), maxIDs: maxIDs, seed: maphash.MakeSeed(),
		tails: map[[8]byte][]tailMark{}}
	d.resize(min(1024, maxIDs))
	return d
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
	var hash uint32
	switch kind {
	case idNone:
		return false
	case idUUID:
		hash = d.hashUUID(id)
		repeat = d.uuids[d.findUUID(hash, id)].pos != 0
	case idTail:
		if q := d.tails[[8]byte(id[:8])]; len(q) > 0 {
			repeat = tailOffset(id) <= q[0].offset
		}
	}
	d.remember(kind, id, hash)
	return repeat
}

func tailOffset(id [16]byte) uint64 {
	return binary.BigEndian.Uint64(id[8:])
}

// hashUUID is the high 32 bits of id's hash, all the table keeps of it.
func (d *deduper) hashUUID(id [16]byte) uint32 {
	return uint32(maphash.Bytes(d.seed, id[:]) >> 32)
}

// home is the slot where a probe for hash starts: hash scaled to the
// table's size (a multiply, not a modulo, so any size will do).
func (d *deduper) home(hash uint32) int {
	return int(uint64(hash) * uint64(len(d.uuids)) >> 32)
}

// findUUID returns the slot of id (with hash), or the empty slot that ends
// its run when id is not in the table.
func (d *deduper) findUUID(hash uint32, id [16]byte) int {
	for i := d.home(hash); ; {
		s := d.uuids[i]
		if s.pos == 0 || s.hash == hash && d.ring[s.pos-1].id == id {
			return i
		}
		if i++; i == len(d.uuids) {
			i = 0
		}
	}
}

// distance is how many slots a probe moves from slot a to slot b.
func (d *deduper) distance(a, b int) int {
	if b < a {
		b += len(d.uuids)
	}
	return b - a
}

// deleteUUID empties slot i, moving back into the hole each slot after it
// in its run whose home is not after the hole, so that every UUID stays
// reachable from its home without crossing an empty slot.
func (d *deduper) deleteUUID(i int) {
	for j := i; ; {
		if j++; j == len(d.uuids) {
			j = 0
		}
		s := d.uuids[j]
		if s.pos == 0 {
			break
		}
		if d.distance(d.home(s.hash), j) < d.distance(i, j) {
			continue // its home is after i: it cannot move to i
		}
		d.uuids[i], i = s, j
	}
	d.uuids[i] = uuidSlot{}
}

// remember appends an entry, first making room by forgetting the oldest;
// hash is hashUUID(id) when id is a UUID.
func (d *deduper) remember(kind idKind, id [16]byte, hash uint32) {
	if d.n == d.maxIDs {
		d.evictOldest()
	}
	if d.n == len(d.ring) {
		d.resize(min(2*len(d.ring), d.maxIDs))
	}
	i := d.head + d.n
	if i >= len(d.ring) {
		i -= len(d.ring)
	}
	d.ring[i], d.kinds[i] = dedupEntry{id: id, clock: d.clock}, kind
	d.n++
	seq := d.seq
	d.seq++
	if kind == idUUID {
		d.uuids[d.findUUID(hash, id)] = uuidSlot{pos: uint32(i + 1), hash: hash}
		return
	}
	prefix, offset := [8]byte(id[:8]), tailOffset(id)
	q := d.tails[prefix]
	for len(q) > 0 && q[len(q)-1].offset <= offset {
		q = q[:len(q)-1]
	}
	d.tails[prefix] = append(q, tailMark{seq: seq, offset: offset})
}

// resize makes the ring hold size entries, keeping them in order, and
// builds the UUID table for it again: the state only takes the memory its
// entries need.
func (d *deduper) resize(size int) {
	oldTable, oldSize, oldHead := d.uuids, len(d.ring), d.head
	ring, kinds := make([]dedupEntry, size), make([]idKind, size)
	for i := 0; i < d.n; i++ {
		j := d.head + i
		if j >= len(d.ring) {
			j -= len(d.ring)
		}
		ring[i], kinds[i] = d.ring[j], d.kinds[j]
	}
	d.ring, d.kinds, d.head = ring, kinds, 0
	d.uuids = make([]uuidSlot, size+2*size/3+1)
	// From the old slots, which hold each UUID once with its hash bits: no
	// key to hash or compare again.
	for _, s := range oldTable {
		if s.pos == 0 {
			continue
		}
		pos := int(s.pos-1) - oldHead
		if pos < 0 {
			pos += oldSize
		}
		i := d.home(s.hash)
		for d.uuids[i].pos != 0 {
			if i++; i == len(d.uuids) {
				i = 0
			}
		}
		d.uuids[i] = uuidSlot{pos: uint32(pos + 1), hash: s.hash}
	}
}

// evictOldest forgets the oldest entry.
func (d *deduper) evictOldest() {
	e, kind, pos := &d.ring[d.head], d.kinds[d.head], d.head
	seq := d.seq - uint64(d.n)
	switch kind {
	case idUUID:
		if i := d.findUUID(d.hashUUID(e.id), e.id); d.uuids[i].pos == uint32(pos+1) {
			d.deleteUUID(i) // else a newer entry of the UUID remains
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
	d.head++
	if d.head == len(d.ring) {
		d.head = 0
	}
	d.n--
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
