package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// TestMaxTimestampSetAsKafka: a CreateTime batch whose header disagrees
// with its records is accepted and its header set to the records' largest
// timestamp, -1 when every record has none (librdkafka writes 0 there),
// with a CRC that matches the rewritten bytes; uncompressed and compressed.
func TestMaxTimestampSetAsKafka(t *testing.T) {
	now := time.Now().UnixMilli()
	cfg := DefaultConfig()
	noTs := []batchtest.Record{{Value: []byte("a")}, {Value: []byte("b")}}
	twoTs := []batchtest.Record{{Value: []byte("a")}, {Value: []byte("b"), TSDelta: 5}}
	cases := []struct {
		name        string
		recs        []batchtest.Record
		first       int64
		header      int64 // the producer's maxTimestamp
		wantHeader  int64
		compression string
	}{
		{"no timestamps, header 0 (librdkafka)", noTs, -1, 0, -1, "none"},
		{"understated", twoTs, now, now, now + 5, "none"},
		{"overstated", twoTs, now, now + 9, now + 5, "none"},
		{"right already", twoTs, now, now + 5, now + 5, "none"},
	}
	for _, name := range batchtest.CodecNames {
		cases = append(cases, struct {
			name        string
			recs        []batchtest.Record
			first       int64
			header      int64
			wantHeader  int64
			compression string
		}{name + " no timestamps, header 0", noTs, -1, 0, -1, name})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := batchtest.Build(c.recs, c.first, 0)
			if c.compression != "none" {
				b = batchtest.Compressed(t, c.compression, c.recs, c.first)
			}
			b = batchtest.WithMaxTimestamp(b, c.header)
			crcBefore := binary.BigEndian.Uint32(b[offCRC:])
			headers, err := testDecoder.Validate(b, cfg.MaxMessageBytes, produceRules(cfg, time.UnixMilli(now)))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got := int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])); got != c.wantHeader || headers[0].MaxTimestamp != c.wantHeader {
				t.Fatalf("maxTimestamp in bytes %d, in header %d; want %d", got, headers[0].MaxTimestamp, c.wantHeader)
			}
			if got := crc32.Checksum(b[offAttributes:], castagnoli); got != headers[0].CRC || got != binary.BigEndian.Uint32(b[offCRC:]) {
				t.Fatalf("CRC %08x does not match the rewritten bytes (header %08x)", binary.BigEndian.Uint32(b[offCRC:]), got)
			}
			if c.header == c.wantHeader && binary.BigEndian.Uint32(b[offCRC:]) != crcBefore {
				t.Fatal("a header that was right was rewritten")
			}
			if _, err := testDecoder.Validate(b, cfg.MaxMessageBytes, storedRules); err != nil {
				t.Fatalf("the rewritten batch no longer validates: %v", err)
			}
		})
	}
}

// TestNoTimestampRecordsAppended: records with timestamp -1 are appended
// on CreateTime and LogAppendTime topics alike and read back; -1 is exempt
// from the timestamp bounds (as in Kafka), while -2 is bounded like any
// other timestamp.
func TestNoTimestampRecordsAppended(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(batchtest.FuzzNow)}
	for _, timestampType := range []string{CreateTime, LogAppendTime} {
		t.Run(timestampType, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MessageTimestampType = timestampType
			cfg.MessageTimestampBeforeMax = time.Hour
			l := openTest(t, t.TempDir(), cfg, options{now: clock.now})
			defer l.Close()
			b := batchtest.WithMaxTimestamp(batchtest.Build([]batchtest.Record{{Value: []byte("a")}, {Value: []byte("b")}}, -1, 0), 0)
			info, err := l.Append(b, 0)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			want := int64(-1)
			if timestampType == LogAppendTime {
				want = batchtest.FuzzNow
			}
			if info.Records != 2 || info.MaxTimestamp != want {
				t.Fatalf("appended %+v, want 2 records and max timestamp %d", info, want)
			}
			hs := readAllBatches(t, l, 0) // validates the stored CRC
			if len(hs) != 1 || hs[0].MaxTimestamp != want || hs[0].Records != 2 {
				t.Fatalf("stored %+v", hs)
			}
			_, err = l.Append(batchtest.Build([]batchtest.Record{{Value: []byte("a")}}, -2, 0), 0)
			if timestampType == CreateTime && !errors.Is(err, ErrInvalidTimestamp) {
				t.Fatalf("timestamp -2 with before.max 1 h: %v, want ErrInvalidTimestamp", err)
			}
			if timestampType == LogAppendTime && err != nil {
				t.Fatalf("timestamp -2 on a LogAppendTime topic: %v", err)
			}
		})
	}
}

// TestRecordErrors: every record refused for what it holds is listed, with
// its index and why, and the batch's error says how many; a timestamp among
// the reasons makes it INVALID_TIMESTAMP, as in Kafka.
func TestRecordErrors(t *testing.T) {
	now := time.Now().UnixMilli()
	hour := time.Hour.Milliseconds()
	compacted := DefaultConfig()
	compacted.CleanupPolicy = PolicyCompact
	compacted.CompactedMaxKeyBytes = 4
	keyed := func(n int, keyless ...int) []batchtest.Record {
		recs := make([]batchtest.Record, n)
		for i := range recs {
			recs[i] = batchtest.Record{Key: []byte("k"), Value: []byte("v")}
		}
		for _, i := range keyless {
			recs[i].Key = nil
		}
		return recs
	}
	withLongKey := keyed(5, 1)
	withLongKey[3].Key = []byte("too long")
	withFuture := keyed(4, 0)
	withFuture[2].TSDelta = 2 * hour

	type want struct {
		indexes []int
		words   []string // in the messages, in order
		err     error
	}
	cases := []struct {
		name  string
		cfg   Config
		batch []byte
		want  want
	}{
		{"keyless records on a compacted topic", compacted, batchtest.Build(keyed(10, 0, 3, 9), now, 0),
			want{[]int{0, 3, 9}, []string{"no key", "no key", "no key"}, ErrInvalidRecord}},
		{"zstd: keyless records", compacted, batchtest.Compressed(t, "zstd", keyed(10, 2, 5), now),
			want{[]int{2, 5}, []string{"no key", "no key"}, ErrInvalidRecord}},
		{"keyless and too long a key", compacted, batchtest.Build(withLongKey, now, 0),
			want{[]int{1, 3}, []string{"no key", "key of 8 bytes"}, ErrInvalidRecord}},
		{"a timestamp among the reasons", compacted, batchtest.Build(withFuture, now, 0),
			want{[]int{0, 2}, []string{"no key", "timestamp"}, ErrInvalidTimestamp}},
		{"timestamps only", DefaultConfig(), batchtest.Build([]batchtest.Record{{Value: []byte("x"), TSDelta: 2 * hour}, {Value: []byte("y")}}, now, 0),
			want{[]int{0}, []string{"timestamp"}, ErrInvalidTimestamp}},
		{"offset deltas", DefaultConfig(), batchtest.WithPayload(batchtest.Build(keyed(2), now, 0), 0, 2, append(batchtest.RecordWith(0, 0, 0), batchtest.RecordWith(0, 0, 0)...)),
			want{[]int{1}, []string{"offset delta 0"}, ErrInvalidRecord}},
		{"second batch: indexes count the first's records", compacted,
			append(batchtest.Build(keyed(3), now, 0), batchtest.Build(keyed(2, 1), now, 0)...),
			want{[]int{4}, []string{"no key"}, ErrInvalidRecord}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := validateAt(c.batch, c.cfg, now)
			var be *BatchError
			if !errors.As(err, &be) || !errors.Is(err, c.want.err) {
				t.Fatalf("got %v, want a *BatchError for %v", err, c.want.err)
			}
			if len(be.Records) != len(c.want.indexes) {
				t.Fatalf("record errors %+v, want indexes %v", be.Records, c.want.indexes)
			}
			for i, r := range be.Records {
				if r.Index != c.want.indexes[i] || !strings.Contains(r.Message, c.want.words[i]) {
					t.Errorf("record error %d: %+v, want index %d and %q", i, r, c.want.indexes[i], c.want.words[i])
				}
			}
			if !strings.Contains(be.Reason, "record(s) refused") {
				t.Errorf("reason %q does not count the records", be.Reason)
			}
		})
	}
}
