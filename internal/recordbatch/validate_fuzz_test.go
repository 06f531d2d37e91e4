package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/recordbatch/batchtest"
)

// FuzzValidateProduced feeds arbitrary batches to the produce validation:
// it must never panic, and whatever it accepts a franz-go consumer must be
// able to decompress and decode into exactly the records the header
// announces, numbered from 0.
func FuzzValidateProduced(f *testing.F) {
	for _, b := range batchtest.FuzzSeeds(f) {
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(batchtest.WithPayload(b, CodecZstd, 2, b[HeaderSize:]))
	}
	rules := defaultRules(batchtest.FuzzNow)
	decompressor := kgo.DefaultDecompressor()
	f.Fuzz(func(t *testing.T, b []byte) {
		headers, err := testDecoder.Validate(b, 1<<20, rules)
		if err != nil {
			var be *Error
			if !errors.As(err, &be) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		pos := 0
		for _, h := range headers {
			body := b[pos+HeaderSize : pos+h.Size()]
			pos += h.Size()
			records, err := decompressor.Decompress(body, kgo.CompressionCodecType(h.Compression()))
			if err != nil {
				t.Fatalf("accepted a batch franz-go cannot decompress: %v", err)
			}
			maxTs := int64(NoTimestamp) // Kafka's floor for the batch's maxTimestamp
			for i := 0; i < int(h.Records); i++ {
				length, n := binary.Varint(records)
				if n <= 0 || length < 0 || int64(len(records)-n) < length {
					t.Fatalf("record %d: accepted a bad length", i)
				}
				var r kmsg.Record
				if err := r.ReadFrom(records[:n+int(length)]); err != nil {
					t.Fatalf("record %d: accepted a record kmsg cannot read: %v", i, err)
				}
				if r.OffsetDelta != int32(i) {
					t.Fatalf("record %d: accepted offset delta %d", i, r.OffsetDelta)
				}
				maxTs = max(maxTs, h.FirstTimestamp+r.TimestampDelta64)
				records = records[n+int(length):]
			}
			if len(records) != 0 {
				t.Fatalf("accepted %d bytes after the last record", len(records))
			}
			if maxTs != h.MaxTimestamp {
				t.Fatalf("accepted maxTimestamp %d, records' largest %d", h.MaxTimestamp, maxTs)
			}
		}
	})
}

// FuzzValidateCompressed compresses arbitrary record bytes with each codec
// and checks that the walk through the decompressor, and through a window
// so small that every record is read across refills, judges them exactly
// as the walk of the same bytes uncompressed does.
func FuzzValidateCompressed(f *testing.F) {
	for _, b := range batchtest.FuzzSeeds(f)[:1] {
		for codec := range len(batchtest.CodecNames) {
			f.Add(uint8(codec), int32(3), b[HeaderSize:])
		}
	}
	f.Add(uint8(0), int32(1), []byte{12, 0, 0, 0, 1, 0, 0})
	f.Add(uint8(4), int32(math.MaxInt32), []byte{12, 0, 0, 0, 1, 0, 0})
	rules := defaultRules(batchtest.FuzzNow)
	f.Fuzz(func(t *testing.T, codec uint8, count int32, records []byte) {
		if count < 1 {
			return
		}
		name := batchtest.CodecNames[int(codec)%len(batchtest.CodecNames)]
		plain := batchtest.Build([]batchtest.Record{{}}, batchtest.FuzzNow, 0)
		plain = batchtest.WithPayload(plain, 0, count, records)
		h := HeaderAt(plain)
		want := classOf(validateOne(testDecoder, plain, 1<<20, rules))
		compressed := batchtest.WithPayload(plain, batchtest.CodecOf(name), count, batchtest.Compress(t, name, records))
		if got := classOf(validateOne(testDecoder, compressed, 1<<30, rules)); got != want {
			t.Fatalf("%s: %v, uncompressed: %v", name, got, want)
		}
		var through recordStream
		through.reset(bytes.NewReader(records), make([]byte, 16), math.MaxInt64)
		if got := classOf(through.walk(h, rules)); got != want {
			t.Fatalf("16-byte window: %v, whole buffer: %v", got, want)
		}
	})
}
