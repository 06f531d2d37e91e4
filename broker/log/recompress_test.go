package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/recordbatch"
	"millrace/internal/recordbatch/batchtest"
)

// txnProducerBatch is a batch of recs as an idempotent, transactional
// producer sends it, compressed with the named codec ("none" for none).
func txnProducerBatch(t testing.TB, name string, recs []batchtest.Record, firstTs int64) []byte {
	plain := batchtest.Build(recs, firstTs, attrTransactional)
	be := binary.BigEndian
	be.PutUint64(plain[offProducerID:], 7001)
	be.PutUint16(plain[offProducerEpoch:], 3)
	be.PutUint32(plain[offBaseSequence:], 42)
	if name == "none" {
		return batchtest.FixCRC(plain)
	}
	return batchtest.WithPayload(plain, batchtest.CodecOf(name), int32(len(recs)), batchtest.Compress(t, name, plain[batchHeaderSize:]))
}

// TestRecompressEveryCodec: a produced batch of every codec, on a topic of
// every compression.type, is stored with the topic's codec; its header
// keeps every field but length, codec and CRC, its CRC is right, and its
// records are byte for byte those produced, read by franz-go's consumer
// decompressor.
func TestRecompressEveryCodec(t *testing.T) {
	now := time.Now().UnixMilli()
	recs, first := batchtest.VariedRecords(now - 10)
	plainRecords := batchtest.Build(recs, first, 0)[batchHeaderSize:]
	targets := map[string]int{"uncompressed": codecNone, "gzip": codecGzip, "snappy": codecSnappy, "lz4": codecLZ4, "zstd": codecZstd}
	decompressor := kgo.DefaultDecompressor()
	for _, source := range append([]string{"none"}, batchtest.CodecNames...) {
		in := txnProducerBatch(t, source, recs, first)
		want := recordbatch.HeaderAt(in)
		for target, codec := range targets {
			t.Run(source+"-to-"+target, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.MaxMessageBytes = 4 << 20
				if err := cfg.Set("compression.type", target); err != nil {
					t.Fatal(err)
				}
				original := bytes.Clone(in)
				v, err := validateProduce(testDecoder, in, cfg, time.UnixMilli(now))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(in, original) {
					t.Fatal("the produced buffer was changed")
				}
				if len(v.headers) != 1 {
					t.Fatalf("%d batches", len(v.headers))
				}
				got := v.headers[0]
				if got.Compression() != codec {
					t.Fatalf("stored with codec %d, want %d", got.Compression(), codec)
				}
				if source == "none" && codec == codecNone || batchtest.CodecOf(source) == int16(codec) && source != "snappy-xerial" {
					if &v.bytes[0] != &in[0] {
						t.Fatal("a batch already in the topic's codec was copied")
					}
				}
				same := func(h BatchHeader) BatchHeader {
					h.Length, h.CRC, h.Attributes = 0, 0, h.Attributes&^attrCompressionMask
					return h
				}
				if same(got) != same(want) {
					t.Fatalf("header %+v, want %+v but length, codec and CRC", got, want)
				}
				if _, err := testDecoder.Validate(v.bytes, maxInt, storedRules); err != nil {
					t.Fatalf("the stored batch does not validate: %v", err)
				}
				body := v.bytes[batchHeaderSize:]
				if codec != codecNone {
					if body, err = decompressor.Decompress(body, kgo.CompressionCodecType(codec)); err != nil {
						t.Fatalf("franz-go cannot decompress it: %v", err)
					}
				}
				if !bytes.Equal(body, plainRecords) {
					t.Fatal("the records changed")
				}
			})
		}
	}
}

// TestRecompressProducerKeepsBatch: compression.type=producer stores the
// batch as sent, whatever its codec.
func TestRecompressProducerKeepsBatch(t *testing.T) {
	now := time.Now().UnixMilli()
	recs, first := batchtest.VariedRecords(now - 10)
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 4 << 20
	for _, source := range append([]string{"none"}, batchtest.CodecNames...) {
		in := txnProducerBatch(t, source, recs, first)
		v, err := validateProduce(testDecoder, in, cfg, time.UnixMilli(now))
		if err != nil {
			t.Fatal(err)
		}
		if &v.bytes[0] != &in[0] || len(v.bytes) != len(in) {
			t.Errorf("%s: the batch was rewritten", source)
		}
	}
}

// TestRecompressKeepsControlBatches: a control batch is stored as it is
// (Kafka compresses control records only when they are written
// compressed), beside a batch that is recompressed.
func TestRecompressKeepsControlBatches(t *testing.T) {
	control := batchtest.Build([]batchtest.Record{{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}}}, 1000, attrTransactional|attrControl)
	data := batchtest.Make(3, 10, 1000, 1)
	in := append(bytes.Clone(control), data...)
	headers, err := testDecoder.Validate(in, maxInt, storedRules)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.CompressionType = "zstd"
	out, rewritten, err := recompressBatches(testDecoder, in, headers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[:len(control)], control) {
		t.Fatal("the control batch was rewritten")
	}
	if len(rewritten) != 2 || rewritten[0].Compression() != codecNone || rewritten[1].Compression() != codecZstd {
		t.Fatalf("codecs %d, %d; want the control batch uncompressed and the data batch zstd", rewritten[0].Compression(), rewritten[1].Compression())
	}
}

// TestRecompressGrowingPastMaxMessageBytes: a compressed batch that would
// be larger than max.message.bytes once stored uncompressed is refused
// with MESSAGE_TOO_LARGE, and a bomb past millrace.max.decompressed.bytes
// is refused as the validator refuses it.
func TestRecompressGrowingPastMaxMessageBytes(t *testing.T) {
	now := time.Now().UnixMilli()
	recs := []batchtest.Record{{Value: bytes.Repeat([]byte("z"), 64<<10)}}
	in := txnProducerBatch(t, "zstd", recs, now)
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 16 << 10
	cfg.CompressionType = "uncompressed"
	if len(in) > cfg.MaxMessageBytes {
		t.Fatalf("the compressed batch (%d bytes) must fit max.message.bytes", len(in))
	}
	// Refused while it is decoded, not once the whole batch is held.
	if _, err := validateProduce(testDecoder, in, cfg, time.UnixMilli(now)); !errors.Is(err, ErrBatchTooLarge) || !strings.Contains(err.Error(), "once recompressed") {
		t.Fatalf("ValidateProduce: %v, want ErrBatchTooLarge for the recompressed size", err)
	}
	cfg.CompressionType = "gzip"
	if _, err := validateProduce(testDecoder, in, cfg, time.UnixMilli(now)); err != nil {
		t.Fatalf("recompressed with gzip: %v", err)
	}
}

// TestAppendRecompresses: a log on a zstd topic stores an uncompressed
// producer's batches as zstd, with their offsets, and reads them back.
func TestAppendRecompresses(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CompressionType = "zstd"
	l := openTest(t, t.TempDir(), cfg, options{})
	first := mustAppend(t, l, batchtest.Make(5, 100, time.Now().UnixMilli(), 1))
	second := mustAppend(t, l, batchtest.Make(3, 100, time.Now().UnixMilli(), 2))
	if first.FirstOffset != 0 || second.FirstOffset != 5 || l.EndOffset() != 8 {
		t.Fatalf("offsets %d and %d, end %d", first.FirstOffset, second.FirstOffset, l.EndOffset())
	}
	for _, h := range readAllBatches(t, l, 0) {
		if h.Compression() != codecZstd {
			t.Fatalf("batch at %d stored with codec %d, want zstd", h.BaseOffset, h.Compression())
		}
	}
}

// TestFormatSettings: the values compression.type and
// message.format.version accept, as Kafka 3.x accepts them.
func TestFormatSettings(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"compression.type", "producer", true},
		{"compression.type", "uncompressed", true},
		{"compression.type", "gzip", true},
		{"compression.type", "snappy", true},
		{"compression.type", "lz4", true},
		{"compression.type", "zstd", true},
		{"compression.type", "none", false}, // a producer's name, not the topic's
		{"compression.type", "ZSTD", false},
		{"compression.type", "brotli", false},
		{"message.format.version", "0.10.0.0", true}, // librdkafka's test 0092
		{"message.format.version", "0.10.0", true},
		{"message.format.version", "0.10.0-IV1", true},
		{"message.format.version", "0.11.0", true},
		{"message.format.version", "2.8", true},
		{"message.format.version", "3.0-IV1", true},
		{"message.format.version", "0.7.0", false},
		{"message.format.version", "4.0", false},
		{"message.format.version", "latest", false},
		{"message.format.version", "", false},
	} {
		cfg := DefaultConfig()
		err := cfg.Set(tc.name, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: %v, want accepted %v", tc.name, tc.value, err, tc.ok)
			continue
		}
		if tc.ok {
			if err := cfg.Validate(); err != nil {
				t.Errorf("%s=%q: Validate: %v", tc.name, tc.value, err)
			}
			if got := cfg.Values()[tc.name]; got != tc.value {
				t.Errorf("%s=%q reported as %q", tc.name, tc.value, got)
			}
		}
	}
	for v, old := range map[string]bool{"0.8.2": true, "0.9.0": true, "0.10.0.0": true, "0.10.2-IV0": true, "0.11.0": false, "2.8": false, "3.0-IV1": false} {
		if MessageFormatBeforeV2(v) != old {
			t.Errorf("MessageFormatBeforeV2(%q) = %v", v, !old)
		}
	}
	d := DefaultConfig().Values()
	if d["compression.type"] != "producer" || d["message.format.version"] != "3.0-IV1" {
		t.Fatalf("defaults %q, %q", d["compression.type"], d["message.format.version"])
	}
}
