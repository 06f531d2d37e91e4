// Package batchtest builds Kafka v2 record batches for tests: plain and
// compressed, well-formed or with chosen fields and payloads, as producers
// send them. The tests of internal/recordbatch and broker/log share it; it
// is imported by tests only.
//
// It does not import internal/recordbatch, whose own tests import it; the
// header layout below is the v2 format's, which internal/recordbatch's
// header.go documents, and those tests check what these builders make.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Positions of the v2 batch header's fields, its size, and the bytes
// before the length field counts from.
const (
	posBaseOffset      = 0
	posLength          = 8
	posLeaderEpoch     = 12
	posMagic           = 16
	posCRC             = 17
	posAttributes      = 21
	posLastOffsetDelta = 23
	posFirstTimestamp  = 27
	posMaxTimestamp    = 35
	posProducerID      = 43
	posProducerEpoch   = 51
	posBaseSequence    = 53
	posRecordCount     = 57
	headerSize         = 61
	lengthOverhead     = 12
	magic              = 2
	compressionMask    = 0x07
)

// Compression codecs, as the attributes' low three bits carry them.
const (
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// WalkWindow is the size internal/recordbatch decodes a compressed batch
// through (its walkWindow, which its tests check this against): records
// larger than it take the walk's other path.
const WalkWindow = 64 << 10

// FuzzNow is the broker clock of the fuzz targets: a fixed time, so a
// failing input reproduces.
const FuzzNow = 1_700_000_000_000

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one record for Build.
type Record struct {
	Key, Value []byte
	TSDelta    int64
}

// Make builds a valid, uncompressed v2 batch of n records with values of
// valueSize bytes (value bytes derived from seed) and the given first
// timestamp; record i has timestamp firstTs+i.
func Make(n, valueSize int, firstTs int64, seed byte) []byte {
	recs := make([]Record, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = seed + byte(i) + byte(j)
		}
		recs[i] = Record{Value: v, TSDelta: int64(i)}
	}
	return Build(recs, firstTs, 0)
}

// Build encodes records into a v2 batch at base offset 0 with the given
// attributes, without a producer, with a valid CRC-32C.
func Build(recs []Record, firstTs int64, attributes int16) []byte {
	var body []byte
	maxTs := firstTs
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.TSDelta)
		rec = binary.AppendVarint(rec, int64(i))
		if r.Key == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.Key)))
			rec = append(rec, r.Key...)
		}
		rec = binary.AppendVarint(rec, int64(len(r.Value)))
		rec = append(rec, r.Value...)
		rec = binary.AppendVarint(rec, 0) // headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
		maxTs = max(maxTs, firstTs+r.TSDelta)
	}
	b := make([]byte, headerSize, headerSize+len(body))
	be := binary.BigEndian
	be.PutUint64(b[posBaseOffset:], 0)
	be.PutUint32(b[posLength:], uint32(headerSize-lengthOverhead+len(body)))
	be.PutUint32(b[posLeaderEpoch:], 0xffffffff)
	b[posMagic] = magic
	be.PutUint16(b[posAttributes:], uint16(attributes))
	be.PutUint32(b[posLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[posFirstTimestamp:], uint64(firstTs))
	be.PutUint64(b[posMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[posProducerID:], ^uint64(0))
	be.PutUint16(b[posProducerEpoch:], 0xffff)
	be.PutUint32(b[posBaseSequence:], 0xffffffff)
	be.PutUint32(b[posRecordCount:], uint32(len(recs)))
	b = append(b, body...)
	return FixCRC(b)
}

// CodecNames names the record-batch compression codecs tested, with
// "snappy-xerial" for the Java client's framing.
var CodecNames = []string{"gzip", "snappy", "snappy-xerial", "lz4", "zstd"}

// CodecOf is the attributes' codec of a name of CodecNames (or "none").
func CodecOf(name string) int16 {
	return map[string]int16{"none": 0, "gzip": codecGzip, "snappy": codecSnappy, "snappy-xerial": codecSnappy, "lz4": codecLZ4, "zstd": codecZstd}[name]
}

// Compress encodes body with the named codec, as a producer would.
func Compress(t testing.TB, name string, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch name {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "lz4":
		w = lz4.NewWriter(&buf)
	case "zstd":
		enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		w = enc
	case "snappy":
		return snappy.Encode(nil, body)
	case "snappy-xerial":
		return Xerial(body, 32<<10)
	default:
		t.Fatalf("no codec %q", name)
	}
	if _, err := w.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Xerial frames body as snappy-java's stream does, in blocks of blockSize.
func Xerial(body []byte, blockSize int) []byte {
	out := append([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}, 0, 0, 0, 1, 0, 0, 0, 1) // snappy-java's magic, version, compatible version
	for len(body) > 0 {
		n := min(blockSize, len(body))
		block := snappy.Encode(nil, body[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		body = body[n:]
	}
	return out
}

// WithPayload replaces the records of batch (a Build result) by payload,
// sets the codec and count, and fixes length and CRC.
func WithPayload(batch []byte, codec int16, count int32, payload []byte) []byte {
	b := append(append([]byte(nil), batch[:headerSize]...), payload...)
	be := binary.BigEndian
	be.PutUint32(b[posLength:], uint32(len(b)-lengthOverhead))
	be.PutUint16(b[posAttributes:], uint16(int16(be.Uint16(b[posAttributes:]))&^compressionMask|codec))
	be.PutUint32(b[posRecordCount:], uint32(count))
	be.PutUint32(b[posLastOffsetDelta:], uint32(count-1))
	return FixCRC(b)
}

// FixCRC sets b's CRC-32C to what its bytes after the CRC field give.
func FixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[posCRC:], crc32.Checksum(b[posAttributes:], castagnoli))
	return b
}

// Compressed builds a batch of recs compressed with the named codec.
func Compressed(t testing.TB, name string, recs []Record, firstTs int64) []byte {
	plain := Build(recs, firstTs, 0)
	return WithPayload(plain, CodecOf(name), int32(len(recs)), Compress(t, name, plain[headerSize:]))
}

// VariedRecords are records with null and present keys, empty and large
// values and headers, one larger than WalkWindow; and now.
func VariedRecords(now int64) ([]Record, int64) {
	return []Record{
		{Value: []byte("a")},
		{Key: []byte("k"), Value: nil, TSDelta: 5},
		{Key: []byte{}, Value: bytes.Repeat([]byte("big "), WalkWindow/2), TSDelta: 9},
		{Value: []byte{}, TSDelta: 1},
	}, now
}

// RawRecord frames record fields (attributes onwards) with their length.
// Varints are zigzag: 0 is 0, -1 is 1, 1 is 2, -2 is 3, 20 is 40.
func RawRecord(fields []byte) []byte {
	return append(binary.AppendVarint(nil, int64(len(fields))), fields...)
}

// RecordWith is one framed record with a one-byte value.
func RecordWith(attrs byte, tsDelta, offsetDelta int64) []byte {
	f := []byte{attrs}
	f = binary.AppendVarint(f, tsDelta)
	f = binary.AppendVarint(f, offsetDelta)
	f = append(f, 1, 2, 'v', 0) // null key, value "v", no headers
	return RawRecord(f)
}

// WithMaxTimestamp is a copy of b with its max timestamp set to ts and the
// CRC fixed.
func WithMaxTimestamp(b []byte, ts int64) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint64(b[posMaxTimestamp:], uint64(ts))
	return FixCRC(b)
}

// FuzzSeeds are valid produced batches, uncompressed and in every codec of
// CodecNames, stamped at FuzzNow: the seed corpus of the fuzz targets that
// validate produced batches.
func FuzzSeeds(t testing.TB) [][]byte {
	recs := []Record{{Value: []byte("a")}, {Key: []byte("k"), TSDelta: 3}, {Key: []byte{}, Value: bytes.Repeat([]byte("v"), 300), TSDelta: 1}}
	out := [][]byte{Build(recs, FuzzNow, 0)}
	for _, name := range CodecNames {
		out = append(out, Compressed(t, name, recs, FuzzNow))
	}
	return out
}
