package log

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/recordbatch/batchtest"
)

// FuzzRecompress: every batch the produce validation accepts is stored,
// on a topic of each compression.type, as a batch that validates again,
// has the topic's codec, keeps every header field but length, codec and
// CRC, and holds the same record bytes; or is refused as too large.
// Nothing panics.
func FuzzRecompress(f *testing.F) {
	for _, b := range batchtest.FuzzSeeds(f) {
		f.Add(b)
	}
	decompressor := kgo.DefaultDecompressor()
	targets := map[string]int{"uncompressed": codecNone, "gzip": codecGzip, "snappy": codecSnappy, "lz4": codecLZ4, "zstd": codecZstd}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := DefaultConfig()
		kept, err := validateProduce(testDecoder, b, cfg, time.UnixMilli(batchtest.FuzzNow))
		if err != nil {
			return
		}
		records := func(v []byte, h BatchHeader) []byte {
			body := v[batchHeaderSize:h.Size()]
			if h.Compression() == codecNone {
				return body
			}
			out, err := decompressor.Decompress(body, kgo.CompressionCodecType(h.Compression()))
			if err != nil {
				t.Fatalf("franz-go cannot decompress a stored batch: %v", err)
			}
			return out
		}
		for name, codec := range targets {
			cfg.CompressionType = name
			v, err := validateProduce(testDecoder, b, cfg, time.UnixMilli(batchtest.FuzzNow))
			if errors.Is(err, ErrBatchTooLarge) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: refused a batch the validation accepts: %v", name, err)
			}
			if _, err := testDecoder.Validate(v.bytes, maxInt, storedRules); err != nil {
				t.Fatalf("%s: stored a batch that does not validate: %v", name, err)
			}
			pos, keptPos := 0, 0
			for i, h := range v.headers {
				was := kept.headers[i]
				if !was.Control() && h.Compression() != codec {
					t.Fatalf("%s: batch %d stored with codec %d", name, i, h.Compression())
				}
				if h.BaseOffset != was.BaseOffset || h.LastOffsetDelta != was.LastOffsetDelta || h.FirstTimestamp != was.FirstTimestamp ||
					h.MaxTimestamp != was.MaxTimestamp || h.ProducerID != was.ProducerID || h.ProducerEpoch != was.ProducerEpoch ||
					h.BaseSequence != was.BaseSequence || h.Records != was.Records || h.Attributes&^attrCompressionMask != was.Attributes&^attrCompressionMask {
					t.Fatalf("%s: batch %d header %+v, was %+v", name, i, h, was)
				}
				if !bytes.Equal(records(v.bytes[pos:], h), records(kept.bytes[keptPos:], was)) {
					t.Fatalf("%s: batch %d records changed", name, i)
				}
				pos += h.Size()
				keptPos += was.Size()
			}
		}
	})
}
