package recordbatch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// testDecoder decodes what the tests validate.
var testDecoder = NewDecoder(0)

// defaultMaxMessageBytes is max.message.bytes' default.
const defaultMaxMessageBytes = 1048588

// defaultRules are the rules the partition log derives from a topic's
// default config at now (ms): CreateTime, before.max unbounded, after.max
// one hour, keys not required.
func defaultRules(now int64) *Rules {
	return &Rules{MaxDecompressed: DefaultMaxDecompressedBytes, CheckTimestamps: true, RefuseLogAppendTime: true,
		MinTimestamp: now - math.MaxInt64, MaxTimestamp: now + time.Hour.Milliseconds(), MaxKeyBytes: 64 << 10}
}

// validateAt validates b as a produced batch under the default rules at now.
func validateAt(b []byte, now int64) error {
	_, err := testDecoder.Validate(b, defaultMaxMessageBytes, defaultRules(now))
	return err
}

// testRecord is one record for makeBatch.
type testRecord struct {
	key, value []byte
	tsDelta    int64
}

// makeBatch builds a valid, uncompressed v2 batch of n records with values
// of valueSize bytes (value bytes derived from seed) and the given first
// timestamp; records i has timestamp firstTs+i.
func makeBatch(n, valueSize int, firstTs int64, seed byte) []byte {
	recs := make([]testRecord, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = seed + byte(i) + byte(j)
		}
		recs[i] = testRecord{value: v, tsDelta: int64(i)}
	}
	return buildBatch(recs, firstTs, 0)
}

// buildBatch encodes records into a v2 batch with the given attributes.
func buildBatch(recs []testRecord, firstTs int64, attributes int16) []byte {
	var body []byte
	maxTs := firstTs
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, r.tsDelta)
		rec = binary.AppendVarint(rec, int64(i))
		if r.key == nil {
			rec = binary.AppendVarint(rec, -1)
		} else {
			rec = binary.AppendVarint(rec, int64(len(r.key)))
			rec = append(rec, r.key...)
		}
		rec = binary.AppendVarint(rec, int64(len(r.value)))
		rec = append(rec, r.value...)
		rec = binary.AppendVarint(rec, 0) // headers
		body = binary.AppendVarint(body, int64(len(rec)))
		body = append(body, rec...)
		maxTs = max(maxTs, firstTs+r.tsDelta)
	}
	b := make([]byte, HeaderSize, HeaderSize+len(body))
	be := binary.BigEndian
	be.PutUint64(b[PosBaseOffset:], 0)
	be.PutUint32(b[PosLength:], uint32(HeaderSize-LengthOverhead+len(body)))
	be.PutUint32(b[PosLeaderEpoch:], 0xffffffff)
	b[PosMagic] = Magic
	be.PutUint16(b[PosAttributes:], uint16(attributes))
	be.PutUint32(b[PosLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[PosFirstTimestamp:], uint64(firstTs))
	be.PutUint64(b[PosMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[PosProducerID:], ^uint64(0))
	be.PutUint16(b[PosProducerEpoch:], 0xffff)
	be.PutUint32(b[PosBaseSequence:], 0xffffffff)
	be.PutUint32(b[PosRecordCount:], uint32(len(recs)))
	b = append(b, body...)
	be.PutUint32(b[PosCRC:], crc32.Checksum(b[PosAttributes:], castagnoli))
	return b
}

// benchBatch builds a batch of about batchBytes made of recordBytes records.
func benchBatch(recordBytes, batchBytes int) []byte {
	n := max(batchBytes/(recordBytes+8), 1)
	return makeBatch(n, recordBytes, 1, 7)
}

// fuzzNow is the broker clock of the fuzz targets: a fixed time, so a
// failing input reproduces.
const fuzzNow = 1_700_000_000_000

// codecNames names the record-batch compression codecs tested, with
// "snappy-xerial" for the Java client's framing.
var codecNames = []string{"gzip", "snappy", "snappy-xerial", "lz4", "zstd"}

func codecOf(name string) int16 {
	return map[string]int16{"none": 0, "gzip": CodecGzip, "snappy": CodecSnappy, "snappy-xerial": CodecSnappy, "lz4": CodecLZ4, "zstd": CodecZstd}[name]
}

// compress encodes body with the named codec, as a producer would.
func compress(t testing.TB, name string, body []byte) []byte {
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
		return xerial(body, 32<<10)
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

// xerial frames body as snappy-java's stream does, in blocks of blockSize.
func xerial(body []byte, blockSize int) []byte {
	out := append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	for len(body) > 0 {
		n := min(blockSize, len(body))
		block := snappy.Encode(nil, body[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		body = body[n:]
	}
	return out
}

// withPayload replaces the records of batch (a buildBatch result) by
// payload, sets the codec and count, and fixes length and CRC.
func withPayload(batch []byte, codec int16, count int32, payload []byte) []byte {
	b := append(append([]byte(nil), batch[:HeaderSize]...), payload...)
	be := binary.BigEndian
	be.PutUint32(b[PosLength:], uint32(len(b)-LengthOverhead))
	be.PutUint16(b[PosAttributes:], uint16(int16(be.Uint16(b[PosAttributes:]))&^AttrCompressionMask|codec))
	be.PutUint32(b[PosRecordCount:], uint32(count))
	be.PutUint32(b[PosLastOffsetDelta:], uint32(count-1))
	return fixCRC(b)
}

func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[PosCRC:], crc32.Checksum(b[PosAttributes:], castagnoli))
	return b
}

// compressedBatch builds a batch of recs compressed with the named codec.
func compressedBatch(t testing.TB, name string, recs []testRecord, firstTs int64) []byte {
	plain := buildBatch(recs, firstTs, 0)
	return withPayload(plain, codecOf(name), int32(len(recs)), compress(t, name, plain[HeaderSize:]))
}

// variedRecords are records with null and present keys, empty and large
// values and headers, one larger than the walk window.
func variedRecords(now int64) ([]testRecord, int64) {
	return []testRecord{
		{value: []byte("a")},
		{key: []byte("k"), value: nil, tsDelta: 5},
		{key: []byte{}, value: bytes.Repeat([]byte("big "), walkWindow/2), tsDelta: 9},
		{value: []byte{}, tsDelta: 1},
	}, now
}

// rawRecord frames record fields (attributes onwards) with their length.
// Varints are zigzag: 0 is 0, -1 is 1, 1 is 2, -2 is 3, 20 is 40.
func rawRecord(fields []byte) []byte {
	return append(binary.AppendVarint(nil, int64(len(fields))), fields...)
}

// recordWith is one framed record with a one-byte value.
func recordWith(attrs byte, tsDelta, offsetDelta int64) []byte {
	f := []byte{attrs}
	f = binary.AppendVarint(f, tsDelta)
	f = binary.AppendVarint(f, offsetDelta)
	f = append(f, 1, 2, 'v', 0) // null key, value "v", no headers
	return rawRecord(f)
}

func withMaxTimestamp(b []byte, ts int64) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint64(b[PosMaxTimestamp:], uint64(ts))
	return fixCRC(b)
}

// bombRecord is the start of one record whose value claims size bytes:
// the zeros that follow in the stream are its value.
func bombRecord(size int64) []byte {
	f := []byte{0, 0, 0, 1} // attributes, tsDelta 0, offsetDelta 0, null key
	f = binary.AppendVarint(f, size)
	b := binary.AppendVarint(nil, int64(len(f))+size+1)
	return append(b, f...)
}

// zstdBomb is a batch whose one record claims size bytes of zeros, zstd
// compressed to a few KiB.
func zstdBomb(tb testing.TB, size int64) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		tb.Fatal(err)
	}
	enc.Write(bombRecord(size))
	if _, err := io.CopyN(enc, zeroReader{}, size); err != nil {
		tb.Fatal(err)
	}
	enc.Write([]byte{0}) // no headers
	if err := enc.Close(); err != nil {
		tb.Fatal(err)
	}
	one := buildBatch([]testRecord{{value: []byte("x")}}, time.Now().UnixMilli(), 0)
	return withPayload(one, CodecZstd, 1, buf.Bytes())
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// classOf reduces a validation result to its sentinel (nil if accepted).
func classOf[T any](_ T, err *Error) error {
	if err == nil {
		return nil
	}
	return err.Err
}
