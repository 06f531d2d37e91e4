package log

import (
	"encoding/binary"
	"testing"
)

// recordLength decodes exactly what binary.Varint decodes, including
// prefixes cut short, over-long encodings and values past the fast paths.
func TestRecordLengthMatchesVarint(t *testing.T) {
	check := func(in []byte) {
		t.Helper()
		got, gotN := recordLength(in)
		want, wantN := binary.Varint(in)
		if got != want || gotN != wantN {
			t.Fatalf("recordLength(%x) = %d, %d; binary.Varint gives %d, %d", in, got, gotN, want, wantN)
		}
	}
	for v := int64(-70000); v < 70000; v += 7 {
		b := binary.AppendVarint(nil, v)
		check(b)
		check(append(b, 0x80, 0x01))
		check(b[:len(b)-1])
	}
	for _, in := range [][]byte{nil, {0x80}, {0xff, 0xff}, {0x80, 0x00}, {0x81, 0x80, 0x00}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		check(in)
	}
}
