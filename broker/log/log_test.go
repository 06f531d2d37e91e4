package log

import (
	"bytes"
	"errors"
	"testing"

	"millrace/internal/recordbatch"
	"millrace/internal/recordbatch/batchtest"
)

func TestAppendReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 100
	l := openTest(t, dir, cfg, options{})
	var want [][]byte
	for i := 0; i < 50; i++ {
		b := batchtest.Make(1+i%5, 40, 1000+int64(i)*10, byte(i))
		info := mustAppend(t, l, b)
		if info.FirstOffset != int64(len(want))*0+info.FirstOffset {
			t.Fatal("unreachable")
		}
		want = append(want, b)
	}
	var next int64
	for i, b := range want {
		h := recordbatch.HeaderAt(b)
		s, err := l.Read(next, 1, l.EndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", next, err)
		}
		got, err := s.ReadAll()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(b) || !bytes.Equal(got[offMagic:], b[offMagic:]) {
			t.Fatalf("batch %d differs", i)
		}
		if s.FirstOffset() != next || s.NextOffset() != next+int64(h.Records) {
			t.Fatalf("batch %d: offsets %d..%d, want %d..%d", i, s.FirstOffset(), s.NextOffset(), next, next+int64(h.Records))
		}
		next += int64(h.Records)
	}
	if l.EndOffset() != next {
		t.Fatalf("end offset %d, want %d", l.EndOffset(), next)
	}
	if _, err := l.Read(next+1, 100, next); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past end: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, dir, cfg, options{})
	defer l2.Close()
	if l2.EndOffset() != next || l2.recoveredSegments.Load() != 0 {
		t.Fatalf("reopen: end %d recovered %d", l2.EndOffset(), l2.recoveredSegments.Load())
	}
	if got := len(readAllBatches(t, l2, 0)); got != len(want) {
		t.Fatalf("reopened log has %d batches, want %d", got, len(want))
	}
}
