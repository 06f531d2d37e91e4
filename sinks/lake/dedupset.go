package lake

import (
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
	idField string // the field holding the event id (Config.EventIDField); "" is event_id

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

	ahead     [prefetchSpan]aheadID // what prefetch read, in record order
	aheadNext int                   // the first of ahead not yet decided
	aheadLen  int                   // entries of ahead filled
	loaded    uint32                // sum of the slots prefetch loaded, kept so the loads stay
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
	var hash uint32
	if kind == idUUID {
		hash = d.hashUUID(id)
	}
	return d.decideHashed(kind, id, hash)
}

// decideHashed is decide with hash = hashUUID(id) for a UUID.
func (d *deduper) decideHashed(kind idKind, id [16]byte, hash uint32) bool {
	var repeat bool
	slot := -1
	switch kind {
	case idNone:
		return false
	case idUUID:
		slot = d.findUUID(hash, id)
		repeat = d.uuids[slot].pos != 0
	case idTail:
		if q := d.tails[[8]byte(id[:8])]; len(q) > 0 {
			repeat = tailOffset(id) <= q[0].offset
		}
	}
	d.remember(kind, id, hash, slot)
	return repeat
}

// decideRecord is decide for r, decoded into row, with its id as prefetch
// read it when it did; it returns the id's kind too.
func (d *deduper) decideRecord(row *schemas.Row, r *kgo.Record) (idKind, bool) {
	a, ok := d.aheadFor(r)
	if !ok {
		a.kind, a.id = rowEventID(row, r.Value, d.idField)
		if a.kind == idUUID {
			a.hash = d.hashUUID(a.id)
		}
	}
	return a.kind, d.decideHashed(a.kind, a.id, a.hash)
}

// prefetchSpan is how many records prefetch reads ahead: enough cache
// misses to overlap, few enough that their lines are still cached when the
// records are decided.
const prefetchSpan = 16

// aheadID is the id prefetch read from a record's value.
type aheadID struct {
	record *kgo.Record
	offset int64 // record.Offset, checked with the pointer
	kind   idKind
	id     [16]byte
	hash   uint32 // hashUUID(id) for a UUID
}

// prefetch reads the ids of records[i:i+prefetchSpan] when i starts a span,
// and loads the table slots where their lookups (and the evictions that
// make room for them) begin. A lookup of a new UUID is one cache miss in a
// table of megabytes, most of what deciding costs (about 110 of 290 ns a
// click); made one record at a time the misses queue up, while these loads
// do not depend on each other, so the processor has them in flight
// together. Deciding the records then finds the slots cached and the ids
// read (aheadFor): dedup's cost in BenchmarkClicksDedupOverhead went from
// about 12% of landing a click to about 7% (medians of 10). d may be nil
// (dedup off, or before the first record).
func (d *deduper) prefetch(records []*kgo.Record, i int) {
	if d == nil || i%prefetchSpan != 0 {
		return
	}
	records = records[i:min(i+prefetchSpan, len(records))]
	d.aheadNext, d.aheadLen = 0, 0
	for _, r := range records {
		kind, id, ok := valueEventID(r.Value)
		if !ok {
			continue // decided from the row
		}
		a := aheadID{record: r, offset: r.Offset, kind: kind, id: id}
		if kind == idUUID {
			a.hash = d.hashUUID(id)
		}
		d.ahead[d.aheadLen] = a
		d.aheadLen++
	}
	// In a loop of their own, short enough for the processor to run ahead
	// to every load before the first one's line arrives.
	var loaded uint32
	for _, a := range d.ahead[:d.aheadLen] {
		if a.kind == idUUID {
			loaded += d.uuids[d.home(a.hash)].hash
		}
	}
	// The entries that records[k] will evict once the state is full.
	if full := d.n - (d.maxIDs - len(records)); full > 0 {
		for k := range min(full, len(records), d.n) {
			j := d.head + k
			if j >= len(d.ring) {
				j -= len(d.ring)
			}
			if d.kinds[j] == idUUID {
				loaded += d.uuids[d.home(d.hashUUID(d.ring[j].id))].hash
			}
		}
	}
	d.loaded += loaded
}

// aheadFor returns what prefetch read for r, if it did; records are decided
// in the order they were prefetched, some skipped.
func (d *deduper) aheadFor(r *kgo.Record) (aheadID, bool) {
	for ; d.aheadNext < d.aheadLen; d.aheadNext++ {
		a := &d.ahead[d.aheadNext]
		if a.offset > r.Offset {
			break
		}
		if a.record == r && a.offset == r.Offset {
			d.aheadNext++
			return *a, true
		}
	}
	return aheadID{}, false
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
// hash is hashUUID(id) when id is a UUID, and slot what findUUID returned
// for it (-1: not looked up).
func (d *deduper) remember(kind idKind, id [16]byte, hash uint32, slot int) {
	if d.n == d.maxIDs {
		d.evictOldest()
		slot = -1 // a deletion moves slots
	}
	if d.n == len(d.ring) {
		d.resize(min(2*len(d.ring), d.maxIDs))
		slot = -1
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
		if slot < 0 {
			slot = d.findUUID(hash, id)
		}
		d.uuids[slot] = uuidSlot{pos: uint32(i + 1), hash: hash}
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
