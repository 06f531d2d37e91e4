package log

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// AppendValidated writes exactly what Append writes, and rejects batches
// that max.message.bytes, lowered after validation, no longer allows.
func TestAppendValidatedMatchesAppend(t *testing.T) {
	cfg := DefaultConfig()
	plain := openTest(t, t.TempDir(), cfg, options{})
	defer plain.Close()
	validated := openTest(t, t.TempDir(), cfg, options{})
	defer validated.Close()
	for i := range 20 {
		batch := batchtest.Make(1+i%7, 10+i*13, int64(1000+i), byte(i))
		want, err := plain.Append(append([]byte(nil), batch...), 3)
		if err != nil {
			t.Fatal(err)
		}
		v, err := validateProduce(testDecoder, append([]byte(nil), batch...), cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Headers()) != 1 || v.Headers()[0].Records != int32(1+i%7) {
			t.Fatalf("headers %+v", v.Headers())
		}
		got, err := validated.AppendValidated(v, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got.FirstOffset != want.FirstOffset || got.LastOffset != want.LastOffset || got.Records != want.Records || got.MaxTimestamp != want.MaxTimestamp {
			t.Fatalf("append %d: AppendValidated %+v, Append %+v", i, got, want)
		}
	}
	for _, l := range []*Log{plain, validated} {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := readBytes(t, plain), readBytes(t, validated)
	if !bytes.Equal(a, b) {
		t.Fatalf("logs differ: %d and %d bytes", len(a), len(b))
	}

	big := batchtest.Make(10, 100, 1, 1)
	v, err := validateProduce(testDecoder, big, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lowered := cfg
	lowered.MaxMessageBytes = len(big) - 1
	if err := validated.SetConfig(lowered); err != nil {
		t.Fatal(err)
	}
	end := validated.EndOffset()
	if _, err := validated.AppendValidated(v, 3); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("AppendValidated after lowering max.message.bytes: %v, want ErrBatchTooLarge", err)
	}
	if validated.EndOffset() != end {
		t.Fatalf("rejected batch moved the log end from %d to %d", end, validated.EndOffset())
	}
	if _, err := validated.AppendValidated(ValidBatches{}, 3); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("AppendValidated of nothing: %v, want ErrCorruptBatch", err)
	}
}

func readBytes(t *testing.T, l *Log) []byte {
	t.Helper()
	s, err := l.Read(l.StartOffset(), maxInt, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
