package tier

import (
	"bytes"
	"encoding/binary"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// FuzzReadBatches reads arbitrary segment and index bytes: a damaged or
// hostile object is an error, never a panic, and what is returned is whole
// batches inside the segment.
func FuzzReadBatches(f *testing.F) {
	one := batchtest.Make(3, 10, 1000, 1)
	two := append(append([]byte(nil), one...), one...)
	binary.BigEndian.PutUint64(two[len(one):], 3) // the second batch at base 3
	f.Add(two, []byte{}, int64(0), 100, int64(1<<40))
	f.Add(two, []byte{0, 0, 0, 3, 0, 0, 0, byte(len(one))}, int64(4), 0, int64(5))
	f.Add(two[:70], []byte{0, 0, 0, 9, 0, 0, 0, 200}, int64(9), 1<<20, int64(-1))
	f.Fuzz(func(t *testing.T, data, index []byte, offset int64, maxBytes int, maxOffset int64) {
		segment := Segment{Size: int64(len(data)), Key: "fuzz"}
		b, err := readBatches(bytes.NewReader(index), int64(len(index)), bytes.NewReader(data), segment, offset, maxBytes, maxOffset)
		if err != nil {
			return
		}
		if len(b.Records) > len(data) || !bytes.Contains(data, b.Records) {
			t.Fatalf("returned %d bytes that are not the segment's", len(b.Records))
		}
	})
}

// FuzzScanForTimestamp scans arbitrary segment bytes for a timestamp: a
// damaged or hostile object is an error, never a panic, and an answer is
// an offset at or after the one asked from.
func FuzzScanForTimestamp(f *testing.F) {
	one := batchtest.Make(3, 10, 1000, 1)
	two := append(append([]byte(nil), one...), one...)
	binary.BigEndian.PutUint64(two[len(one):], 3) // the second batch at base 3
	f.Add(two, int64(0), int64(1001), int64(0))
	f.Add(two, int64(0), int64(1000), int64(4))
	f.Add(two[:70], int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, pos, ts, from int64) {
		segment := Segment{Size: int64(len(data)), Key: "fuzz"}
		found, ok, err := scanForTimestamp(bytes.NewReader(data), segment, min(max(pos, 0), int64(len(data))), ts, from)
		if err == nil && ok && found.Offset < from {
			t.Fatalf("answered offset %d, below %d", found.Offset, from)
		}
	})
}
