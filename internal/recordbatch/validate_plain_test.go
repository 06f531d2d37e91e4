package recordbatch

import (
	"encoding/binary"
	"testing"
)

// FuzzParsePlainRecord checks the fast path against the field loop: whatever
// parsePlainRecord accepts, parseRecord accepts with the same deltas and key
// length.
func FuzzParsePlainRecord(f *testing.F) {
	f.Add(plainRecord(3, 0, []byte("k"), make([]byte, 100)))
	f.Add(plainRecord(-70, 5000, nil, nil))
	f.Add(plainRecord(0, 1, []byte{}, make([]byte, 300)))
	f.Add([]byte{0, 0, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, rec []byte) {
		ts, offset, key, plain := parsePlainRecord(rec)
		if !plain {
			return
		}
		wantTS, wantOffset, wantKey, reason := parseRecord(rec)
		if reason != "" || ts != wantTS || offset != wantOffset || key != wantKey {
			t.Fatalf("plain: (%d, %d, %d); parseRecord: (%d, %d, %d) %q", ts, offset, key, wantTS, wantOffset, wantKey, reason)
		}
	})
}

// TestParsePlainRecordTakesCommonRecords checks that the records producers
// send (no headers, short fields, with and without key) take the fast path,
// and that one with a header does not.
func TestParsePlainRecordTakesCommonRecords(t *testing.T) {
	for _, rec := range [][]byte{
		plainRecord(12, 7, nil, make([]byte, 100)),
		plainRecord(-3, 8000, []byte("key"), make([]byte, 1000)),
		plainRecord(0, 0, []byte{}, nil),
	} {
		if _, _, _, plain := parsePlainRecord(rec); !plain {
			t.Errorf("record % x does not take the fast path", rec)
		}
	}
	withHeader := plainRecord(0, 0, nil, []byte("v"))
	withHeader = append(withHeader[:len(withHeader)-1], 2, 2, 'h', 0) // one header "h" with an empty value
	if _, _, _, plain := parsePlainRecord(withHeader); plain {
		t.Error("a record with a header takes the fast path")
	}
	if _, _, _, reason := parseRecord(withHeader); reason != "" {
		t.Fatalf("the record with a header is malformed: %s", reason)
	}
}

// plainRecord encodes a record's fields after its length: attributes,
// deltas, key and value (nil is null), no headers.
func plainRecord(tsDelta, offsetDelta int64, key, value []byte) []byte {
	rec := []byte{0}
	rec = binary.AppendVarint(rec, tsDelta)
	rec = binary.AppendVarint(rec, offsetDelta)
	for _, field := range [][]byte{key, value} {
		if field == nil {
			rec = binary.AppendVarint(rec, -1)
			continue
		}
		rec = binary.AppendVarint(rec, int64(len(field)))
		rec = append(rec, field...)
	}
	return binary.AppendVarint(rec, 0)
}
