package log

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"millrace/internal/recordbatch"
	"millrace/internal/recordbatch/batchtest"
)

func TestHoldingFileKeepsWritesUntilSync(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	f, err := openHoldingFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	onDisk := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	read := func(off int64, n int) (string, error) {
		b := make([]byte, n)
		got, err := f.ReadAt(b, off)
		return string(b[:got]), err
	}
	if _, err := f.WriteAt([]byte("hello "), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("world"), 6)
	f.WriteAt([]byte("W"), 6) // a later write over an earlier one wins
	if got, err := read(0, 11); got != "hello World" || err != nil {
		t.Fatalf("read %q, %v", got, err)
	}
	if got, err := read(4, 20); got != "o World" || err != io.EOF {
		t.Fatalf("read past the end: %q, %v", got, err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 11 {
		t.Fatalf("stat: %v, %v", fi, err)
	}
	if got := onDisk(); got != "hello " {
		t.Fatalf("the kernel has %q before the fsync", got)
	}
	if err := f.Truncate(8); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(0, 20); got != "hello Wo" {
		t.Fatalf("after truncate: %q", got)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := onDisk(); got != "hello Wo" {
		t.Fatalf("after the fsync the kernel has %q", got)
	}
	f.WriteAt([]byte("lost"), 8)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := onDisk(); got != "hello Wo" {
		t.Fatalf("unsynced write survived the close: %q", got)
	}
}

// TestPowerCutKeepsWhatSyncToReported abandons a log opened through the
// holding layer, as a power cut would, and reopens its directory: exactly
// the records SyncTo reported durable are there.
func TestPowerCutKeepsWhatSyncToReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000 // several segments, so rolls are covered
	l := openTest(t, dir, cfg, options{openFile: openHoldingFile})
	var batches [][]byte
	for i := range 12 {
		b := batchtest.Make(2, 100, int64(i), byte(i))
		batches = append(batches, b)
		mustAppend(t, l, b)
		if i == 8 {
			if err := l.SyncTo(context.Background(), l.EndOffset()); err != nil {
				t.Fatal(err)
			}
		}
	}
	durable := l.DurableOffset()
	if durable != 18 || l.EndOffset() != 24 || len(l.Segments()) < 3 {
		t.Fatalf("durable %d, end %d, %d segments; want 18, 24 and several", durable, l.EndOffset(), len(l.Segments()))
	}
	// The power cut: l is never closed, its held writes are never written.
	after := openTest(t, dir, cfg, options{})
	defer after.Close()
	if after.EndOffset() != durable {
		t.Fatalf("recovered log ends at %d, want the durable offset %d", after.EndOffset(), durable)
	}
	got := readAllBatches(t, after, 0)
	if len(got) != 9 {
		t.Fatalf("%d batches recovered, want 9", len(got))
	}
	for i, h := range got {
		if want := recordbatch.HeaderAt(batches[i]); h.CRC != want.CRC || h.MaxTimestamp != want.MaxTimestamp {
			t.Fatalf("batch %d: CRC %x, max timestamp %d; want %x, %d", i, h.CRC, h.MaxTimestamp, want.CRC, want.MaxTimestamp)
		}
	}
}
