package log

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// TestRecoverWritesAfterFailedWrite: a failed write makes the log refuse
// appends; retries fail while the disk still fails, and once it works
// again the log is verified (a torn tail cut off, indexes rebuilt) and
// takes appends again with no reopen. Every acknowledged batch stays
// readable, and a later reopen finds a clean log.
func TestRecoverWritesAfterFailedWrite(t *testing.T) {
	var short, failSync atomic.Bool
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 64 // index entries to rewrite, so a failing disk fails the retry
	l := openTest(t, dir, cfg, options{openFile: faultyOpener(&short, &failSync)})
	for i := range 5 {
		mustAppend(t, l, batchtest.Make(2, 20, 1, byte(i)))
	}
	end, size := l.EndOffset(), l.Size()

	short.Store(true)
	if _, err := l.Append(batchtest.Make(2, 20, 1, 9), 0); !errors.Is(err, errInjected) {
		t.Fatalf("append on a failing disk: %v", err)
	}
	if !l.Refusing() {
		t.Fatal("a failed write did not make the log refuse appends")
	}
	// What a failed truncation would leave: half a batch past the end.
	torn := batchtest.Make(2, 20, 1, 10)
	f, err := os.OpenFile(segmentPath(dir, 0, logSuffix), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(torn[:len(torn)/2]); err != nil {
		t.Fatal(err)
	}
	f.Close()

	if ok, err := l.RecoverWrites(); ok || err == nil {
		t.Fatalf("retry while the disk still fails: ok %v, err %v", ok, err)
	}
	if !l.Refusing() {
		t.Fatal("a failed retry cleared the refusal")
	}

	short.Store(false)
	if ok, err := l.RecoverWrites(); !ok || err != nil {
		t.Fatalf("retry with the disk working: ok %v, err %v", ok, err)
	}
	if l.Refusing() {
		t.Fatal("still refusing after a successful retry")
	}
	if fi, err := os.Stat(segmentPath(dir, 0, logSuffix)); err != nil || fi.Size() != size {
		t.Fatalf("segment file after recovery: %v bytes, %v; want the %d bytes appended", fi.Size(), err, size)
	}
	info := mustAppend(t, l, batchtest.Make(2, 20, 1, 11))
	if info.FirstOffset != end {
		t.Fatalf("first append after recovery at %d, want %d", info.FirstOffset, end)
	}
	if got := len(readAllBatches(t, l, 0)); got != 6 {
		t.Fatalf("%d batches readable, want 6", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, cfg, options{})
	defer l.Close()
	if got := l.recoveredSegments.Load(); got != 0 {
		t.Fatalf("reopen after recovery scanned %d segments: the close was not clean", got)
	}
	if l.EndOffset() != end+2 || len(readAllBatches(t, l, 0)) != 6 {
		t.Fatalf("reopened: end %d, want %d", l.EndOffset(), end+2)
	}
}

// TestRecoverWritesNotAfterFailedFsync: after a failed fsync what the page
// cache returns may not be on disk, so only a reopen recovers.
func TestRecoverWritesNotAfterFailedFsync(t *testing.T) {
	var short, failSync atomic.Bool
	l := openTest(t, t.TempDir(), DefaultConfig(), options{openFile: faultyOpener(&short, &failSync)})
	defer l.Close()
	mustAppend(t, l, batchtest.Make(2, 20, 1, 1))
	failSync.Store(true)
	if err := l.Flush(); !errors.Is(err, errInjected) {
		t.Fatalf("flush with a failing fsync: %v", err)
	}
	failSync.Store(false)
	if ok, err := l.RecoverWrites(); ok || !errors.Is(err, ErrNeedsReopen) {
		t.Fatalf("retry after a failed fsync: ok %v, err %v; want ErrNeedsReopen", ok, err)
	}
	if !l.Refusing() {
		t.Fatal("the log accepts appends after a failed fsync")
	}
}

// TestRecoverWritesRefusesDamagedSegment: if the active segment no longer
// reads back as what was appended, the retry does not trust it.
func TestRecoverWritesRefusesDamagedSegment(t *testing.T) {
	var short, failSync atomic.Bool
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{openFile: faultyOpener(&short, &failSync)})
	defer l.Close()
	mustAppend(t, l, batchtest.Make(2, 20, 1, 1))
	mustAppend(t, l, batchtest.Make(2, 20, 1, 2))
	short.Store(true)
	if _, err := l.Append(batchtest.Make(2, 20, 1, 3), 0); !errors.Is(err, errInjected) {
		t.Fatalf("append on a failing disk: %v", err)
	}
	short.Store(false)
	path := segmentPath(dir, 0, logSuffix)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff // a bit flip in the last acknowledged batch
	if err := os.WriteFile(filepath.Clean(path), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.RecoverWrites(); ok || !errors.Is(err, ErrNeedsReopen) {
		t.Fatalf("retry over a damaged batch: ok %v, err %v; want ErrNeedsReopen", ok, err)
	}
}

// indexFaultOpener fails writes to index files while fail is set: an
// append's data lands, the flush after it fails.
func indexFaultOpener(fail *atomic.Bool) openFileFunc {
	never := new(atomic.Bool)
	return func(path string, flag int, perm os.FileMode) (file, error) {
		f, err := openOSFile(path, flag, perm)
		if err != nil || filepath.Ext(path) == logSuffix {
			return f, err
		}
		return faultyFile{file: f, shortWrite: fail, failSync: never}, nil
	}
}

// TestRecoverWritesKeepsIdempotence: a batch whose data was written but
// whose flush failed was refused to its producer; after the retry clears
// the failure, the producer's retry of that batch is a duplicate, not a
// second copy.
func TestRecoverWritesKeepsIdempotence(t *testing.T) {
	var fail atomic.Bool
	cfg := DefaultConfig()
	cfg.FlushMessages = 1
	cfg.IndexIntervalBytes = 16
	l := openTest(t, t.TempDir(), cfg, options{openFile: indexFaultOpener(&fail)})
	defer l.Close()
	for seq := range int32(2) {
		if _, err := appendProduced(t, l, idempotentBatch(7, 0, seq, 1)); err != nil {
			t.Fatalf("append seq %d: %v", seq, err)
		}
	}
	fail.Store(true)
	retried := idempotentBatch(7, 0, 2, 1)
	if _, err := appendProduced(t, l, retried); !errors.Is(err, errInjected) {
		t.Fatalf("append whose flush fails: %v", err)
	}
	fail.Store(false)
	if ok, err := l.RecoverWrites(); !ok || err != nil {
		t.Fatalf("retry: ok %v, err %v", ok, err)
	}
	info, err := appendProduced(t, l, retried)
	if err != nil || !info.Duplicate {
		t.Fatalf("the producer's retry after recovery: %+v, %v; want a duplicate", info, err)
	}
	if n := len(readAllBatches(t, l, 0)); n != 3 {
		t.Fatalf("%d batches in the log, want 3", n)
	}
}
