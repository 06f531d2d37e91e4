package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// storedRules walk batches read back from a log: they were produced, so
// their records must walk, but LogAppendTime may have been applied.
var storedRules = &recordRules{maxDecompressed: math.MaxInt64}

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
	_, err := validateBatches(b, cfg.MaxMessageBytes, produceRules(cfg, time.UnixMilli(now)))
	return err
}

func TestWalkAcceptsEveryCodec(t *testing.T) {
	now := time.Now().UnixMilli()
	recs, first := variedRecords(now - 10)
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 4 << 20
	plain := buildBatch(recs, first, 0)
	if err := validateAt(plain, cfg, now); err != nil {
		t.Fatalf("uncompressed: %v", err)
	}
	for _, name := range codecNames {
		if err := validateAt(compressedBatch(t, name, recs, first), cfg, now); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// franz-go's own encoders, as its producer sends batches.
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		c, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		payload, typ := c.Compress(&buf, plain[batchHeaderSize:])
		b := withPayload(plain, int16(typ), int32(len(recs)), payload)
		if err := validateAt(b, cfg, now); err != nil {
			t.Errorf("kgo codec %d: %v", typ, err)
		}
	}
}

// TestWalkRefuses covers what a batch whose CRC and header are fine may
// still get wrong inside.
func TestWalkRefuses(t *testing.T) {
	now := time.Now().UnixMilli()
	cfg := DefaultConfig()
	junk := make([]byte, 200)
	for i := range junk {
		junk[i] = byte(i*131 + i*i*7 + 13)
	}
	one := buildBatch([]testRecord{{value: []byte("x")}}, now, 0)
	record := one[batchHeaderSize:]
	twoRecords := buildBatch([]testRecord{{value: []byte("x")}, {value: []byte("y")}}, now, 0)

	type tc struct {
		name  string
		batch []byte
		want  error
	}
	cases := []tc{
		{"2^31-1 records claimed, one sent", withPayload(one, 0, math.MaxInt32, record), ErrCorruptBatch},
		{"two records claimed, one sent", withPayload(one, 0, 2, record), ErrCorruptBatch},
		{"one record claimed, two sent", withPayload(twoRecords, 0, 1, twoRecords[batchHeaderSize:]), ErrCorruptBatch},
		{"offset deltas not from 0", withPayload(one, 0, 1, recordWith(0, 0, 7)), ErrInvalidRecord},
		{"bytes after the record fields", withPayload(one, 0, 1, rawRecord([]byte{0, 0, 0, 1, 0, 0, 9})), ErrCorruptBatch},
		{"key longer than the record", withPayload(one, 0, 1, rawRecord([]byte{0, 0, 0, 40, 0, 0})), ErrCorruptBatch},
		{"negative header count", withPayload(one, 0, 1, rawRecord([]byte{0, 0, 0, 1, 0, 3})), ErrCorruptBatch},
		{"null header key", withPayload(one, 0, 1, rawRecord([]byte{0, 0, 0, 1, 0, 2, 1, 1})), ErrCorruptBatch},
		{"future timestamp", buildBatch([]testRecord{{value: []byte("x")}}, now+2*time.Hour.Milliseconds(), 0), ErrInvalidTimestamp},
		{"year 9999", buildBatch([]testRecord{{value: []byte("x")}}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 0), ErrInvalidTimestamp},
		{"LogAppendTime set by the producer", buildBatch([]testRecord{{value: []byte("x")}}, now, attrLogAppendTime), ErrInvalidTimestamp},
		{"snappy block claiming 1 GiB from 3 bytes", withPayload(one, codecSnappy, 1, append(binary.AppendUvarint(nil, 1<<30), 0)), ErrCorruptBatch},
	}
	for _, name := range codecNames {
		codec := codecOf(name)
		cases = append(cases,
			tc{name + " junk payload", withPayload(one, codec, 1, junk), ErrCorruptBatch},
			tc{name + " 2^31-1 records claimed, one sent", withPayload(one, codec, math.MaxInt32, compress(t, name, record)), ErrCorruptBatch},
			tc{name + " offset deltas not from 0", withPayload(one, codec, 1, compress(t, name, recordWith(0, 0, 3))), ErrInvalidRecord},
			tc{name + " record cut short", withPayload(one, codec, 1, compress(t, name, record[:len(record)-1])), ErrCorruptBatch},
			tc{name + " future timestamp inside", withMaxTimestamp(compressedBatch(t, name, []testRecord{{value: []byte("x")}, {tsDelta: 3 * time.Hour.Milliseconds()}}, now), now), ErrInvalidTimestamp},
		)
		if name != "snappy" {
			// The framed codecs check the stream's end: a payload cut short
			// within its trailer is refused even with whole records inside.
			whole := compress(t, name, record)
			cases = append(cases, tc{name + " payload cut short", withPayload(one, codec, 1, whole[:len(whole)-1]), ErrCorruptBatch})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := validateAt(c.batch, cfg, now)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("%T is not a *BatchError", err)
			}
		})
	}
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
	return withPayload(one, codecZstd, 1, buf.Bytes())
}

// TestBombRefusedInBoundedMemory: 1 GiB of zeros behind a record header, zstd
// compressed to a few KiB, is refused within bounded memory. How long the
// refusal takes (decoding no more than the bound: 64 MiB of zeros decode
// in well under a second, 1 GiB would not) is BenchmarkRefuseZstdBomb's.
func TestBombRefusedInBoundedMemory(t *testing.T) {
	batch := zstdBomb(t, 1<<30)
	one := buildBatch([]testRecord{{value: []byte("x")}}, time.Now().UnixMilli(), 0)

	cfg := DefaultConfig()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := validateAt(batch, cfg, time.Now().UnixMilli())
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("got %v, want ErrBatchTooLarge", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("refusing the bomb allocated %d MiB", grew>>20)
	}

	// A snappy block states its decoded length: refused before decoding.
	bomb := snappy.Encode(nil, append(bombRecord(cfg.MaxDecompressedBytes), make([]byte, cfg.MaxDecompressedBytes)...))
	if err := validateAt(withPayload(one, codecSnappy, 1, bomb), cfg, time.Now().UnixMilli()); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("snappy bomb: got %v, want ErrBatchTooLarge", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestLargeRecordPath walks the same records through windows small
// enough that every record takes the read-through path, and through the
// whole buffer: both must agree.
func TestLargeRecordPath(t *testing.T) {
	now := time.Now().UnixMilli()
	recs := []testRecord{{key: []byte("key"), value: []byte("value one")}, {value: nil, tsDelta: 300}, {key: []byte{}, value: bytes.Repeat([]byte{7}, 100)}}
	good := buildBatch(recs, now, 0)
	bad := withPayload(good, 0, 3, append(append([]byte(nil), good[batchHeaderSize:]...), 0))
	rules := produceRules(DefaultConfig(), time.UnixMilli(now))
	for _, window := range []int{16, 24, 40, 1 << 10} {
		for _, b := range [][]byte{good, bad} {
			h := parseHeader(b)
			var whole, through recordStream
			whole.resetBytes(b[batchHeaderSize:])
			through.reset(bytes.NewReader(b[batchHeaderSize:]), make([]byte, window), math.MaxInt64)
			m1, e1 := whole.walk(h, rules)
			m2, e2 := through.walk(h, rules)
			if (e1 == nil) != (e2 == nil) || e1 != nil && e1.Err != e2.Err || m1 != m2 {
				t.Errorf("window %d: whole buffer %d %v, read through %d %v", window, m1, e1, m2, e2)
			}
		}
	}
}

// BenchmarkRefuseZstdBomb: refusing 1 GiB of zeros compressed to a few KiB
// costs decoding the bound (MaxDecompressedBytes), not the gigabyte.
func BenchmarkRefuseZstdBomb(b *testing.B) {
	batch := zstdBomb(b, 1<<30)
	cfg := DefaultConfig()
	for b.Loop() {
		if err := validateAt(batch, cfg, time.Now().UnixMilli()); !errors.Is(err, ErrBatchTooLarge) {
			b.Fatalf("got %v, want ErrBatchTooLarge", err)
		}
	}
}
