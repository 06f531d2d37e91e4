package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/recordbatch/batchtest"
)

func TestWalkAcceptsEveryCodec(t *testing.T) {
	now := time.Now().UnixMilli()
	recs, first := batchtest.VariedRecords(now - 10)
	validate := func(b []byte) error {
		_, err := testDecoder.Validate(b, 4<<20, defaultRules(now))
		return err
	}
	plain := batchtest.Build(recs, first, 0)
	if err := validate(plain); err != nil {
		t.Fatalf("uncompressed: %v", err)
	}
	for _, name := range batchtest.CodecNames {
		if err := validate(batchtest.Compressed(t, name, recs, first)); err != nil {
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
		payload, typ := c.Compress(&buf, plain[HeaderSize:])
		b := batchtest.WithPayload(plain, int16(typ), int32(len(recs)), payload)
		if err := validate(b); err != nil {
			t.Errorf("kgo codec %d: %v", typ, err)
		}
	}
}

// TestWalkRefuses covers what a batch whose CRC and header are fine may
// still get wrong inside.
func TestWalkRefuses(t *testing.T) {
	now := time.Now().UnixMilli()
	junk := make([]byte, 200)
	for i := range junk {
		junk[i] = byte(i*131 + i*i*7 + 13)
	}
	one := batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, now, 0)
	record := one[HeaderSize:]
	twoRecords := batchtest.Build([]batchtest.Record{{Value: []byte("x")}, {Value: []byte("y")}}, now, 0)

	type tc struct {
		name  string
		batch []byte
		want  error
	}
	cases := []tc{
		{"2^31-1 records claimed, one sent", batchtest.WithPayload(one, 0, math.MaxInt32, record), ErrCorrupt},
		{"two records claimed, one sent", batchtest.WithPayload(one, 0, 2, record), ErrCorrupt},
		{"one record claimed, two sent", batchtest.WithPayload(twoRecords, 0, 1, twoRecords[HeaderSize:]), ErrCorrupt},
		{"offset deltas not from 0", batchtest.WithPayload(one, 0, 1, batchtest.RecordWith(0, 0, 7)), ErrInvalidRecord},
		{"bytes after the record fields", batchtest.WithPayload(one, 0, 1, batchtest.RawRecord([]byte{0, 0, 0, 1, 0, 0, 9})), ErrCorrupt},
		{"key longer than the record", batchtest.WithPayload(one, 0, 1, batchtest.RawRecord([]byte{0, 0, 0, 40, 0, 0})), ErrCorrupt},
		{"negative header count", batchtest.WithPayload(one, 0, 1, batchtest.RawRecord([]byte{0, 0, 0, 1, 0, 3})), ErrCorrupt},
		{"null header key", batchtest.WithPayload(one, 0, 1, batchtest.RawRecord([]byte{0, 0, 0, 1, 0, 2, 1, 1})), ErrCorrupt},
		{"future timestamp", batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, now+2*time.Hour.Milliseconds(), 0), ErrInvalidTimestamp},
		{"year 9999", batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 0), ErrInvalidTimestamp},
		{"LogAppendTime set by the producer", batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, now, AttrLogAppendTime), ErrInvalidTimestamp},
		{"snappy block claiming 1 GiB from 3 bytes", batchtest.WithPayload(one, CodecSnappy, 1, append(binary.AppendUvarint(nil, 1<<30), 0)), ErrCorrupt},
	}
	for _, name := range batchtest.CodecNames {
		codec := batchtest.CodecOf(name)
		cases = append(cases,
			tc{name + " junk payload", batchtest.WithPayload(one, codec, 1, junk), ErrCorrupt},
			tc{name + " 2^31-1 records claimed, one sent", batchtest.WithPayload(one, codec, math.MaxInt32, batchtest.Compress(t, name, record)), ErrCorrupt},
			tc{name + " offset deltas not from 0", batchtest.WithPayload(one, codec, 1, batchtest.Compress(t, name, batchtest.RecordWith(0, 0, 3))), ErrInvalidRecord},
			tc{name + " record cut short", batchtest.WithPayload(one, codec, 1, batchtest.Compress(t, name, record[:len(record)-1])), ErrCorrupt},
			tc{name + " future timestamp inside", batchtest.WithMaxTimestamp(batchtest.Compressed(t, name, []batchtest.Record{{Value: []byte("x")}, {TSDelta: 3 * time.Hour.Milliseconds()}}, now), now), ErrInvalidTimestamp},
		)
		if name != "snappy" {
			// The framed codecs check the stream's end: a payload cut short
			// within its trailer is refused even with whole records inside.
			whole := batchtest.Compress(t, name, record)
			cases = append(cases, tc{name + " payload cut short", batchtest.WithPayload(one, codec, 1, whole[:len(whole)-1]), ErrCorrupt})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := validateAt(c.batch, now)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("%T is not a *Error", err)
			}
		})
	}
}

// TestBombRefusedInBoundedMemory: 1 GiB of zeros behind a record header, zstd
// compressed to a few KiB, is refused within bounded memory. How long the
// refusal takes (decoding no more than the bound: 64 MiB of zeros decode
// in well under a second, 1 GiB would not) is BenchmarkRefuseZstdBomb's.
func TestBombRefusedInBoundedMemory(t *testing.T) {
	batch := zstdBomb(t, 1<<30)
	one := batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, time.Now().UnixMilli(), 0)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := validateAt(batch, time.Now().UnixMilli())
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("refusing the bomb allocated %d MiB", grew>>20)
	}

	// A snappy block states its decoded length: refused before decoding.
	bomb := snappy.Encode(nil, append(bombRecord(DefaultMaxDecompressedBytes), make([]byte, DefaultMaxDecompressedBytes)...))
	if err := validateAt(batchtest.WithPayload(one, CodecSnappy, 1, bomb), time.Now().UnixMilli()); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("snappy bomb: got %v, want ErrTooLarge", err)
	}
}

// TestLargeRecordPath walks the same records through windows small
// enough that every record takes the read-through path, and through the
// whole buffer: both must agree.
func TestLargeRecordPath(t *testing.T) {
	now := time.Now().UnixMilli()
	recs := []batchtest.Record{{Key: []byte("key"), Value: []byte("value one")}, {Value: nil, TSDelta: 300}, {Key: []byte{}, Value: bytes.Repeat([]byte{7}, 100)}}
	good := batchtest.Build(recs, now, 0)
	bad := batchtest.WithPayload(good, 0, 3, append(append([]byte(nil), good[HeaderSize:]...), 0))
	rules := defaultRules(now)
	for _, window := range []int{16, 24, 40, 1 << 10} {
		for _, b := range [][]byte{good, bad} {
			h := HeaderAt(b)
			var whole, through recordStream
			whole.resetBytes(b[HeaderSize:])
			through.reset(bytes.NewReader(b[HeaderSize:]), make([]byte, window), math.MaxInt64)
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
	for b.Loop() {
		if err := validateAt(batch, time.Now().UnixMilli()); !errors.Is(err, ErrTooLarge) {
			b.Fatalf("got %v, want ErrTooLarge", err)
		}
	}
}

// TestRecordErrorsBounded: a batch of many bad records lists the first
// maxRecordErrors and counts them all; a framing fault after a bad record
// is a corrupt batch, with no record listed.
func TestRecordErrorsBounded(t *testing.T) {
	now := time.Now().UnixMilli()
	compacted := defaultRules(now)
	compacted.RequireKeys = true // a compacted topic's
	n := maxRecordErrors + 5
	recs := make([]batchtest.Record, n)
	_, err := testDecoder.Validate(batchtest.Build(recs, now, 0), defaultMaxMessageBytes, compacted)
	var be *Error
	if !errors.As(err, &be) || len(be.Records) != maxRecordErrors || be.Records[maxRecordErrors-1].Index != maxRecordErrors-1 {
		t.Fatalf("got %v with %d records listed, want %d", err, len(be.Records), maxRecordErrors)
	}
	if want := "1005 record(s) refused (the first 1000 listed)"; !strings.HasPrefix(be.Reason, want) {
		t.Fatalf("reason %q, want it to start %q", be.Reason, want)
	}

	one := batchtest.Build([]batchtest.Record{{}, {}}, now, 0)
	cut := batchtest.WithPayload(one, 0, 2, append(batchtest.RecordWith(0, 0, 0), 9))
	_, err = testDecoder.Validate(cut, defaultMaxMessageBytes, compacted)
	if !errors.As(err, &be) || !errors.Is(err, ErrCorrupt) || be.Records != nil {
		t.Fatalf("keyless record then a cut one: %v (records %+v), want a corrupt batch and none listed", err, be)
	}
}
