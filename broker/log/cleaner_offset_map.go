package log

import (
	"crypto/sha256"
	"encoding/binary"
)

// The cleaner's offset map: each key of the dirty part of a log to the
// offset of its last record, as Kafka's SkimpyOffsetMap keeps it. A key is
// stored as a fixed-size digest, never as itself, so the map's memory is
// its slot count times offsetMapEntryBytes whatever the keys' sizes: a
// segment of compressed batches can carry keys thousands of times its own
// size, and a map of the keys themselves grew with them past any bound.
//
// The table is one slice of slots, open addressing with linear probing,
// allocated once per pass and never grown:
//
//	digest  [16]byte  the first 128 bits of the key's SHA-256
//	offset  int64     the key's last offset plus one; 0 marks an empty slot
//
// Two keys with the same digest would share an entry, and the earlier
// one's records could then be removed in favour of the other key's. Kafka
// accepts that with MD5's 128 bits; SHA-256's first 128 bits give the
// same odds against accidents, and no known way to make a key collide with
// a key someone else chose (a second preimage costs about 2^128 hashes).
// The digest is unkeyed, so replicas that clean the same range keep the
// same records.

// offsetMapDigestBytes is the size of a key's digest.
const offsetMapDigestBytes = 16

// offsetMapEntryBytes is the memory one slot takes: digest and offset.
const offsetMapEntryBytes = offsetMapDigestBytes + 8

// offsetMapLoadFactor is the share of slots the map fills before it counts
// as full: linear probing slows sharply beyond it (Kafka's default,
// log.cleaner.io.buffer.load.factor, is 0.9, with a different probe).
const offsetMapLoadFactor = 0.75

type keyDigest [offsetMapDigestBytes]byte

type offsetMapSlot struct {
	digest     keyDigest
	offsetPlus int64 // offset + 1; 0 for an empty slot
}

// offsetMap maps key digests to offsets in a table of fixed size.
type offsetMap struct {
	slots      []offsetMapSlot
	entries    int // slots in use
	maxEntries int // entries at which the map counts as full
}

// newOffsetMap returns a map of at most maxBytes (0: the default
// log.cleaner.dedupe.buffer.size) that needs to hold at most records
// entries: a dirty range of n offsets holds at most n keys, so a small
// range never costs the whole buffer. It holds at least one entry, so
// every pass makes progress.
func newOffsetMap(maxBytes, records int64) *offsetMap {
	if maxBytes <= 0 {
		maxBytes = DefaultCleanerConfig().DedupeBufferSize
	}
	records = max(records, 1)
	slots := maxBytes / offsetMapEntryBytes
	if records < slots {
		// records at the load factor (4/3 of them), in integers: a
		// range's offsets can be near MaxInt64.
		slots = min(slots, records+records/3+1)
	}
	// At least two slots: one for an entry, and one always empty, which
	// ends every probe.
	slots = max(slots, 2)
	entries := min(records, max(int64(float64(slots)*offsetMapLoadFactor), 1))
	return &offsetMap{slots: make([]offsetMapSlot, slots), maxEntries: int(entries)}
}

// Bytes is the memory the map's table takes.
func (m *offsetMap) Bytes() int64 { return int64(len(m.slots)) * offsetMapEntryBytes }

func digestKey(key []byte) keyDigest {
	sum := sha256.Sum256(key)
	return keyDigest(sum[:offsetMapDigestBytes])
}

// find returns the slot holding d, or the empty slot where it belongs.
func (m *offsetMap) find(d keyDigest) *offsetMapSlot {
	n := uint64(len(m.slots))
	for i := binary.LittleEndian.Uint64(d[:8]) % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if s.offsetPlus == 0 || s.digest == d {
			return s
		}
	}
}

// put records offset as key's last; it reports false, changing nothing,
// when key is new and the map is full.
func (m *offsetMap) put(key []byte, offset int64) bool {
	d := digestKey(key)
	s := m.find(d)
	if s.offsetPlus == 0 {
		if m.entries >= m.maxEntries {
			return false
		}
		m.entries++
		s.digest = d
	}
	s.offsetPlus = offset + 1
	return true
}

// get returns key's last offset, if the map holds key.
func (m *offsetMap) get(key []byte) (int64, bool) {
	s := m.find(digestKey(key))
	return s.offsetPlus - 1, s.offsetPlus != 0
}
