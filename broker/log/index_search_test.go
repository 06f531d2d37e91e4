package log

import (
	"bytes"
	"testing"
)

// SearchOffsetIndex over the file bytes answers as lookupOffset over the
// decoded entries, for targets before, on, between and after entries.
func TestSearchOffsetIndexMatchesLookup(t *testing.T) {
	t.Parallel()
	entries := []offsetEntry{{rel: 3, pos: 100}, {rel: 10, pos: 4200}, {rel: 11, pos: 8300}, {rel: 40, pos: 12500}}
	for _, tc := range []struct {
		name    string
		entries []offsetEntry
	}{{"empty", nil}, {"one", entries[:1]}, {"four", entries}} {
		b := bytes.NewReader(encodeOffsetEntries(tc.entries))
		for rel := uint32(0); rel < 45; rel++ {
			got, err := SearchOffsetIndex(b, b.Size(), rel)
			if err != nil {
				t.Fatalf("%s: rel %d: %v", tc.name, rel, err)
			}
			if want := lookupOffset(tc.entries, rel); got != want {
				t.Errorf("%s: rel %d: position %d, want %d", tc.name, rel, got, want)
			}
		}
	}
	if _, err := SearchOffsetIndex(bytes.NewReader(make([]byte, 7)), 7, 0); err == nil {
		t.Error("a torn index was searched")
	}
}

// SearchTimeIndex over the file bytes answers as lookupTimeBefore over the
// decoded entries, for timestamps before, on, between and after entries.
func TestSearchTimeIndexMatchesLookup(t *testing.T) {
	t.Parallel()
	entries := []timeEntry{{timestamp: 1000, rel: 0}, {timestamp: 1005, rel: 4}, {timestamp: 1030, rel: 4}, {timestamp: 1031, rel: 20}}
	for _, tc := range []struct {
		name    string
		entries []timeEntry
	}{{"empty", nil}, {"one", entries[:1]}, {"four", entries}} {
		b := bytes.NewReader(encodeTimeEntries(tc.entries))
		for ts := int64(990); ts < 1040; ts++ {
			got, err := SearchTimeIndex(b, b.Size(), ts)
			if err != nil {
				t.Fatalf("%s: timestamp %d: %v", tc.name, ts, err)
			}
			if want := lookupTimeBefore(tc.entries, ts); got != want {
				t.Errorf("%s: timestamp %d: relative offset %d, want %d", tc.name, ts, got, want)
			}
		}
	}
	if _, err := SearchTimeIndex(bytes.NewReader(make([]byte, 13)), 13, 0); err == nil {
		t.Error("a torn time index was searched")
	}
}

// DecodeTxnIndex reads back what the log writes, and refuses a torn entry.
func TestDecodeTxnIndexRoundTrip(t *testing.T) {
	t.Parallel()
	want := []AbortedTxn{{ProducerID: 7, FirstOffset: 3, LastOffset: 9, LastStableOffset: 10}, {ProducerID: 8, FirstOffset: 5, LastOffset: 12, LastStableOffset: 13}}
	b := encodeTxnIndex(want)
	got, err := DecodeTxnIndex(b)
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("DecodeTxnIndex = %v, %v; want %v", got, err, want)
	}
	if _, err := DecodeTxnIndex(b[:len(b)-1]); err == nil {
		t.Error("a torn transaction index was decoded")
	}
}
