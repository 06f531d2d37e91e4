package recordbatch

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"millrace/internal/recordbatch/batchtest"
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

// benchBatch builds a batch of about batchBytes made of recordBytes records.
func benchBatch(recordBytes, batchBytes int) []byte {
	n := max(batchBytes/(recordBytes+8), 1)
	return batchtest.Make(n, recordBytes, 1, 7)
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
	one := batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, time.Now().UnixMilli(), 0)
	return batchtest.WithPayload(one, CodecZstd, 1, buf.Bytes())
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
