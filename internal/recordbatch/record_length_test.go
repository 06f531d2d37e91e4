package recordbatch

import (
	"encoding/binary"
	"testing"
)

// shortVarint decodes exactly what binary.Varint decodes wherever it
// answers, answers for every complete one- or two-byte prefix, and leaves
// prefixes cut short, over-long encodings and values past the fast paths to
// binary.Varint (n == 0); at any position in the buffer.
func TestShortVarintMatchesVarint(t *testing.T) {
	check := func(in []byte) {
		t.Helper()
		for _, lead := range [][]byte{nil, {0xff, 0x01, 0x80}} {
			b := append(append([]byte(nil), lead...), in...)
			got, gotN := shortVarint(b, len(lead))
			want, wantN := binary.Varint(in)
			if gotN == 0 {
				if wantN == 1 && len(in) > 1 || wantN == 2 {
					t.Fatalf("shortVarint(%x) left a %d-byte prefix to binary.Varint", in, wantN)
				}
				continue
			}
			if got != want || gotN != wantN {
				t.Fatalf("shortVarint(%x) = %d, %d; binary.Varint gives %d, %d", in, got, gotN, want, wantN)
			}
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
