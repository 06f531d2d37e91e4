package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"millrace/internal/recordbatch"
)

// storedRules walk batches read back from a log: they were produced, so
// their records must walk, but LogAppendTime may have been applied.
var storedRules = &recordbatch.Rules{MaxDecompressed: math.MaxInt64}

// fuzzSeedBatches are valid produced batches, uncompressed and in every
// codec, stamped at fuzzNow.
func fuzzSeedBatches(f *testing.F) [][]byte {
	recs := []testRecord{{value: []byte("a")}, {key: []byte("k"), tsDelta: 3}, {key: []byte{}, value: bytes.Repeat([]byte("v"), 300), tsDelta: 1}}
	out := [][]byte{buildBatch(recs, fuzzNow, 0)}
	for _, name := range codecNames {
		out = append(out, compressedBatch(f, name, recs, fuzzNow))
	}
	return out
}

// fuzzNow is the broker clock of the fuzz targets: a fixed time, so a
// failing input reproduces.
const fuzzNow = 1_700_000_000_000

// codecNames names the record-batch compression codecs tested, with
// "snappy-xerial" for the Java client's framing.
var codecNames = []string{"gzip", "snappy", "snappy-xerial", "lz4", "zstd"}

func codecOf(name string) int16 {
	return map[string]int16{"none": 0, "gzip": codecGzip, "snappy": codecSnappy, "snappy-xerial": codecSnappy, "lz4": codecLZ4, "zstd": codecZstd}[name]
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

// withPayload replaces the records of batch (a buildBatch result) by
// payload, sets the codec and count, and fixes length and CRC.
func withPayload(batch []byte, codec int16, count int32, payload []byte) []byte {
	b := append(append([]byte(nil), batch[:batchHeaderSize]...), payload...)
	be := binary.BigEndian
	be.PutUint32(b[offLength:], uint32(len(b)-batchLengthOverhead))
	be.PutUint16(b[offAttributes:], uint16(int16(be.Uint16(b[offAttributes:]))&^attrCompressionMask|codec))
	be.PutUint32(b[offRecordCount:], uint32(count))
	be.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
	return fixCRC(b)
}

func fixCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// compressedBatch builds a batch of recs compressed with the named codec.
func compressedBatch(t testing.TB, name string, recs []testRecord, firstTs int64) []byte {
	plain := buildBatch(recs, firstTs, 0)
	return withPayload(plain, codecOf(name), int32(len(recs)), compress(t, name, plain[batchHeaderSize:]))
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

func validateAt(b []byte, cfg Config, now int64) error {
	_, err := testDecoder.Validate(b, cfg.MaxMessageBytes, produceRules(cfg, time.UnixMilli(now)))
	return err
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
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	return fixCRC(b)
}

func TestTimestampBounds(t *testing.T) {
	const now = fuzzNow
	hour := time.Hour.Milliseconds()
	at := func(ts int64) []byte { return buildBatch([]testRecord{{value: []byte("x")}}, ts, 0) }
	bounded := DefaultConfig()
	bounded.MessageTimestampBeforeMax = 24 * time.Hour
	unbounded := DefaultConfig()
	if err := unbounded.Set("message.timestamp.after.max.ms", "9223372036854775807"); err != nil {
		t.Fatal(err)
	}
	logAppend := DefaultConfig()
	logAppend.MessageTimestampType = LogAppendTime
	cases := []struct {
		name  string
		cfg   Config
		batch []byte
		ok    bool
	}{
		{"an hour ahead, the default bound", DefaultConfig(), at(now + hour), true},
		{"past the default bound", DefaultConfig(), at(now + hour + 1), false},
		{"1970, before.max unbounded by default", DefaultConfig(), at(0), true},
		{"no timestamp (-1)", DefaultConfig(), at(-1), true},
		{"a day behind with before.max 1 day", bounded, at(now - 24*hour), true},
		{"older with before.max 1 day", bounded, at(now - 24*hour - 1), false},
		{"LogAppendTime topic: not checked", logAppend, at(now + 100*hour), true},
		{"year 9999 with after.max Long.MAX", unbounded, at(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), true},
		{"year 1 with before.max Long.MAX (the default)", DefaultConfig(), at(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), true},
		{"second record out of range", DefaultConfig(), buildBatch([]testRecord{{value: []byte("x")}, {tsDelta: 2 * hour}}, now, 0), false},
	}
	for _, c := range cases {
		err := validateAt(c.batch, c.cfg, now)
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("%s: got %v, want ErrInvalidTimestamp", c.name, err)
		}
	}
}

// TestDefaultMaxDecompressedBytes: the codec's default bound, which a sink
// validates consumed batches under, is the topic default's.
func TestDefaultMaxDecompressedBytes(t *testing.T) {
	if got, want := int64(recordbatch.DefaultMaxDecompressedBytes), DefaultConfig().MaxDecompressedBytes; got != want {
		t.Fatalf("recordbatch.DefaultMaxDecompressedBytes %d, millrace.max.decompressed.bytes default %d", got, want)
	}
}
