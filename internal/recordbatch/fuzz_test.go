package recordbatch

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// FuzzValidateBatches feeds arbitrary bytes to the batch validator: it must
// never panic, and anything it accepts must parse back into headers that
// tile the input exactly.
func FuzzValidateBatches(f *testing.F) {
	valid := batchtest.Make(3, 20, 1000, 1)
	f.Add(valid)
	f.Add(append(append([]byte(nil), valid...), batchtest.Make(1, 0, 5, 2)...))
	compressed := batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, 1, 4) // zstd flag on a plain body
	f.Add(compressed)
	gz := append([]byte(nil), valid...)
	binary.BigEndian.PutUint16(gz[PosAttributes:], 1)
	binary.BigEndian.PutUint32(gz[PosCRC:], crc32.Checksum(gz[PosAttributes:], castagnoli))
	f.Add(gz)
	f.Add(valid[:len(valid)-1])
	f.Add(valid[:HeaderSize])
	f.Add(valid[:10])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		headers, err := testDecoder.Validate(b, 1<<20, &Rules{MaxDecompressed: DefaultMaxDecompressedBytes})
		if err != nil {
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		pos := 0
		for _, h := range headers {
			if h.Magic != 2 || h.Records < 1 || int64(h.Records) != int64(h.LastOffsetDelta)+1 || h.Size() < HeaderSize {
				t.Fatalf("accepted bad header %+v", h)
			}
			if crc32.Checksum(b[pos+PosAttributes:pos+h.Size()], castagnoli) != h.CRC {
				t.Fatal("accepted bad CRC")
			}
			pos += h.Size()
		}
		if pos != len(b) {
			t.Fatalf("headers cover %d of %d bytes", pos, len(b))
		}
	})
}
