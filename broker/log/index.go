package log

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
)

// Offset index file (<base>.index): a sequence of 8-byte entries, no header.
// Entries are sparse, one per index.interval.bytes of log at most, and
// strictly increasing in both fields. Lookups take the last entry at or
// below the target and scan batch headers forward from its position.
const (
	// offsetEntryRel: uint32 at byte 0, batch base offset minus segment base offset.
	offsetEntryRel = 0
	// offsetEntryPos: uint32 at byte 4, byte position of that batch in the .log.
	offsetEntryPos = 4
	// offsetIndexEntrySize: bytes per offset index entry.
	offsetIndexEntrySize = 8
)

// Time index file (<base>.timeindex): a sequence of 12-byte entries, no
// header. An entry is added, next to an offset index entry, only when the
// segment's largest timestamp has grown since the last one, plus a final one
// when the segment stops being active; so timestamps strictly increase and
// the last entry holds the segment's largest timestamp.
const (
	// timeEntryTimestamp: int64 at byte 0, the segment's largest timestamp so far (ms).
	timeEntryTimestamp = 0
	// timeEntryRel: uint32 at byte 8, relative base offset of the batch that first reached it.
	timeEntryRel = 8
	// timeIndexEntrySize: bytes per time index entry.
	timeIndexEntrySize = 12
)

// offsetEntry is one offset index entry in memory.
type offsetEntry struct {
	rel uint32 // batch base offset relative to the segment base
	pos uint32 // byte position of the batch in the segment
}

// timeEntry is one time index entry in memory.
type timeEntry struct {
	timestamp int64
	rel       uint32
}

func encodeOffsetEntries(entries []offsetEntry) []byte {
	b := make([]byte, len(entries)*offsetIndexEntrySize)
	for i, e := range entries {
		binary.BigEndian.PutUint32(b[i*offsetIndexEntrySize+offsetEntryRel:], e.rel)
		binary.BigEndian.PutUint32(b[i*offsetIndexEntrySize+offsetEntryPos:], e.pos)
	}
	return b
}

func encodeTimeEntries(entries []timeEntry) []byte {
	b := make([]byte, len(entries)*timeIndexEntrySize)
	for i, e := range entries {
		binary.BigEndian.PutUint64(b[i*timeIndexEntrySize+timeEntryTimestamp:], uint64(e.timestamp))
		binary.BigEndian.PutUint32(b[i*timeIndexEntrySize+timeEntryRel:], e.rel)
	}
	return b
}

// decodeOffsetEntries parses and sanity-checks an offset index: whole
// entries, both fields strictly increasing, positions inside the segment.
func decodeOffsetEntries(b []byte, segmentSize int64) ([]offsetEntry, bool) {
	if len(b)%offsetIndexEntrySize != 0 {
		return nil, false
	}
	out := make([]offsetEntry, len(b)/offsetIndexEntrySize)
	for i := range out {
		e := offsetEntry{
			rel: binary.BigEndian.Uint32(b[i*offsetIndexEntrySize+offsetEntryRel:]),
			pos: binary.BigEndian.Uint32(b[i*offsetIndexEntrySize+offsetEntryPos:]),
		}
		if int64(e.pos)+batchHeaderSize > segmentSize || (i > 0 && (e.rel <= out[i-1].rel || e.pos <= out[i-1].pos)) {
			return nil, false
		}
		out[i] = e
	}
	return out, true
}

// decodeTimeEntries parses and sanity-checks a time index: whole entries,
// timestamps strictly increasing, offsets not decreasing.
func decodeTimeEntries(b []byte) ([]timeEntry, bool) {
	if len(b)%timeIndexEntrySize != 0 {
		return nil, false
	}
	out := make([]timeEntry, len(b)/timeIndexEntrySize)
	for i := range out {
		e := timeEntry{
			timestamp: int64(binary.BigEndian.Uint64(b[i*timeIndexEntrySize+timeEntryTimestamp:])),
			rel:       binary.BigEndian.Uint32(b[i*timeIndexEntrySize+timeEntryRel:]),
		}
		if i > 0 && (e.timestamp <= out[i-1].timestamp || e.rel < out[i-1].rel) {
			return nil, false
		}
		out[i] = e
	}
	return out, true
}

// lookupOffset returns the position of the last indexed batch whose base is
// at or below rel, or 0.
func lookupOffset(entries []offsetEntry, rel uint32) int64 {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].rel > rel })
	if i == 0 {
		return 0
	}
	return int64(entries[i-1].pos)
}

// lookupTimeBefore returns the relative offset of the last time entry whose
// timestamp is below ts, or 0. Every batch before that entry's batch has
// timestamps below ts, so a scan for ts may start there.
func lookupTimeBefore(entries []timeEntry, ts int64) uint32 {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].timestamp >= ts })
	if i == 0 {
		return 0
	}
	return entries[i-1].rel
}

// SearchOffsetIndex finds, in an offset index of indexSize bytes read
// through index (a segment's .index file or a byte-for-byte copy of it, such
// as a tiered segment's object), the byte position of the last indexed batch
// whose base offset relative to the segment's is at or below relOffset: where
// a scan of batch headers for that offset may start, 0 when no entry is. The
// search reads O(log n) entries, so a remote index need not be read whole;
// entries are trusted to increase, and the scan checks the position.
func SearchOffsetIndex(index io.ReaderAt, indexSize int64, relOffset uint32) (int64, error) {
	if indexSize%offsetIndexEntrySize != 0 || indexSize < 0 {
		return 0, fmt.Errorf("log: an offset index of %d bytes is not a whole number of %d-byte entries", indexSize, offsetIndexEntrySize)
	}
	n := int(indexSize / offsetIndexEntrySize)
	var entry [offsetIndexEntrySize]byte
	var readErr error
	// The first entry whose relative offset is above relOffset.
	i := sort.Search(n, func(i int) bool {
		if readErr != nil {
			return true
		}
		if _, err := index.ReadAt(entry[:], int64(i)*offsetIndexEntrySize); err != nil {
			readErr = err
			return true
		}
		return binary.BigEndian.Uint32(entry[offsetEntryRel:]) > relOffset
	})
	if readErr != nil {
		return 0, fmt.Errorf("log: reading an offset index: %w", readErr)
	}
	if i == 0 {
		return 0, nil
	}
	if _, err := index.ReadAt(entry[:], int64(i-1)*offsetIndexEntrySize); err != nil {
		return 0, fmt.Errorf("log: reading an offset index: %w", err)
	}
	return int64(binary.BigEndian.Uint32(entry[offsetEntryPos:])), nil
}

// SearchTimeIndex finds, in a time index of indexSize bytes read through
// index (a segment's .timeindex file or a byte-for-byte copy of it), the
// relative offset of the last entry whose timestamp is below ts, or 0 when
// none is: as lookupTimeBefore, every batch before that entry's batch has
// timestamps below ts, so a scan for ts may start at the offset index's
// position for it. It reads O(log n) entries.
func SearchTimeIndex(index io.ReaderAt, indexSize int64, ts int64) (uint32, error) {
	if indexSize%timeIndexEntrySize != 0 || indexSize < 0 {
		return 0, fmt.Errorf("log: a time index of %d bytes is not a whole number of %d-byte entries", indexSize, timeIndexEntrySize)
	}
	n := int(indexSize / timeIndexEntrySize)
	var entry [timeIndexEntrySize]byte
	var readErr error
	// The first entry whose timestamp is at or above ts.
	i := sort.Search(n, func(i int) bool {
		if readErr != nil {
			return true
		}
		if _, err := index.ReadAt(entry[:], int64(i)*timeIndexEntrySize); err != nil {
			readErr = err
			return true
		}
		return int64(binary.BigEndian.Uint64(entry[timeEntryTimestamp:])) >= ts
	})
	if readErr != nil {
		return 0, fmt.Errorf("log: reading a time index: %w", readErr)
	}
	if i == 0 {
		return 0, nil
	}
	if _, err := index.ReadAt(entry[:], int64(i-1)*timeIndexEntrySize); err != nil {
		return 0, fmt.Errorf("log: reading a time index: %w", err)
	}
	return binary.BigEndian.Uint32(entry[timeEntryRel:]), nil
}
