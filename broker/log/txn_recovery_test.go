package log

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// readFileOrEmpty returns a file's bytes on disk, none if it is absent.
func readFileOrEmpty(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// TestTxnIndexAppendedAndFlushedWithSegment: an abort appends its entry to
// the .txnindex without fsync (the file layer here keeps unsynced writes
// from the disk, as a power cut would), the segment's flush makes it
// durable, and the next abort appends to the same file rather than
// replacing it.
func TestTxnIndexAppendedAndFlushedWithSegment(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{openFile: openHoldingFile})
	defer l.Close()
	path := segmentPath(dir, 0, txnIndexSuffix)
	var first os.FileInfo
	for p := int64(1); p <= 2; p++ {
		if _, err := appendProduced(t, l, txnBatch(p, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		endTxn(t, l, p, false)
		if got := len(aborted(t, l, 0, 100)); got != int(p) {
			t.Fatalf("after abort %d: %d aborted transactions listed", p, got)
		}
		if b := readFileOrEmpty(t, path); len(b) != int(p-1)*txnIndexEntrySize {
			t.Fatalf("after abort %d, before the flush: %d bytes on disk, want %d", p, len(b), (p-1)*txnIndexEntrySize)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		b := readFileOrEmpty(t, path)
		entries, err := decodeTxnIndex(b)
		if err != nil || len(entries) != int(p) || entries[p-1].ProducerID != p {
			t.Fatalf("after abort %d and the flush: %+v, %v", p, entries, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = fi
		} else if !os.SameFile(first, fi) {
			t.Fatal("the index file was replaced, not appended to")
		}
	}
}

// TestTxnIndexRecoveredAfterPowerCut: entries appended after the last
// producer snapshot and never fsynced, lost or torn by a power cut, come
// back from the log when the reopened log loads its producer state, and
// the entry fsynced before the snapshot is kept.
func TestTxnIndexRecoveredAfterPowerCut(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{openFile: openHoldingFile})
	if _, err := appendProduced(t, l, txnBatch(1, 0, 0, 1)); err != nil { // 0
		t.Fatal(err)
	}
	endTxn(t, l, 1, false)                                                // 1
	l.maintainProducers()                                                 // snapshot at 2: the first entry is fsynced before it
	if _, err := appendProduced(t, l, txnBatch(2, 0, 0, 1)); err != nil { // 2
		t.Fatal(err)
	}
	endTxn(t, l, 2, false)                                                // 3
	if _, err := appendProduced(t, l, txnBatch(3, 0, 0, 1)); err != nil { // 4, ongoing
		t.Fatal(err)
	}
	// flush.on.ack's fsync: the batches are durable, the second entry not.
	if err := l.SyncTo(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	want := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2},
		{ProducerID: 2, FirstOffset: 2, LastOffset: 3, LastStableOffset: 4},
	}
	lost := filepath.Join(t.TempDir(), "p-0")
	copyDir(t, dir, lost) // what the disk holds: the power cut
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	index := segmentPath(lost, 0, txnIndexSuffix)
	if b := readFileOrEmpty(t, index); len(b) != txnIndexEntrySize {
		t.Fatalf("the power cut left %d bytes of index, want the one fsynced entry", len(b))
	}
	torn := filepath.Join(t.TempDir(), "p-0")
	copyDir(t, lost, torn)
	half := encodeTxnIndex(want[1:])[:txnIndexEntrySize/2]
	if err := os.WriteFile(segmentPath(torn, 0, txnIndexSuffix), append(readFileOrEmpty(t, index), half...), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"lost": lost, "torn": torn} {
		r := openTest(t, d, DefaultConfig(), options{})
		if got := aborted(t, r, 0, 100); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s entry: aborted %+v, want %+v", name, got, want)
		}
		if got := firstUnstable(t, r); got != 4 {
			t.Fatalf("%s entry: first unstable %d, want 4", name, got)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		entries, err := decodeTxnIndex(readFileOrEmpty(t, segmentPath(d, 0, txnIndexSuffix)))
		if err != nil || !reflect.DeepEqual(entries, want) {
			t.Fatalf("%s entry: index file after recovery %+v, %v", name, entries, err)
		}
	}
}

// TestDecodeTxnIndexKeepsTrustedPrefix: a damaged entry and everything
// after it are dropped, the entries before it kept.
func TestDecodeTxnIndexKeepsTrustedPrefix(t *testing.T) {
	good := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 1, LastStableOffset: 2}, {ProducerID: 2, FirstOffset: 2, LastOffset: 5, LastStableOffset: 6}}
	valid := encodeTxnIndex(good)
	badVersion := encodeTxnIndex(good[1:])
	badVersion[1] = 1
	for _, tc := range []struct {
		name string
		b    []byte
		want []AbortedTxn
	}{
		{"whole", valid, good},
		{"torn last entry", valid[:len(valid)-3], good[:1]},
		{"zeroed last entry", append(encodeTxnIndex(good[:1]), make([]byte, txnIndexEntrySize)...), good[:1]},
		{"out of order", encodeTxnIndex([]AbortedTxn{good[1], good[0]}), good[1:]},
		{"unknown version", append(encodeTxnIndex(good[:1]), badVersion...), good[:1]},
	} {
		got, err := decodeTxnIndex(tc.b)
		if !reflect.DeepEqual(got, tc.want) || (err == nil) != (tc.name == "whole") {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
		if err != nil && !errors.Is(err, errBadTxnIndex) {
			t.Errorf("%s: error %v does not wrap errBadTxnIndex", tc.name, err)
		}
	}
}

// TestTxnStateKnownWithoutSnapshot: an open transaction holds the last
// stable offset back after a crash before any producer snapshot was
// written, and after the snapshot was deleted by hand: the state is rebuilt
// from the log.
func TestTxnStateKnownWithoutSnapshot(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	mustAppend(t, l, batchtest.Make(1, 8, 1, 0))                          // 0
	if _, err := appendProduced(t, l, txnBatch(1, 0, 0, 1)); err != nil { // 1, stays open
		t.Fatal(err)
	}
	mustAppend(t, l, batchtest.Make(2, 8, 1, 1)) // 2-3
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "p-0")
	copyDir(t, dir, crashed)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(crashed, producerSnapshotFile)); !os.IsNotExist(err) {
		t.Fatalf("a snapshot was on disk before the crash: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, producerSnapshotFile)); err != nil {
		t.Fatalf("deleting the snapshot Close wrote: %v", err)
	}
	for name, d := range map[string]string{"crash before any snapshot": crashed, "snapshot deleted": dir} {
		r := openTest(t, d, DefaultConfig(), options{})
		if got := firstUnstable(t, r); got != 1 {
			t.Errorf("%s: first unstable offset %d, want 1 (the open transaction)", name, got)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProducerSnapshotAtRoll: every segment roll writes the producer
// snapshot at the new segment's base, so that a crash replays at most the
// active segment; the state after a crash is complete.
func TestProducerSnapshotAtRoll(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 300
	l := openTest(t, dir, cfg, options{})
	seq := int32(0)
	for len(l.Segments()) < 3 {
		if _, err := appendProduced(t, l, idempotentBatch(7, 0, seq, 1)); err != nil {
			t.Fatal(err)
		}
		seq++
		segs := l.Segments()
		snap, err := readProducerSnapshot(dir)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(segs) == 1 && snap != nil:
			t.Fatalf("a snapshot at %d before any roll", snap.offset)
		case len(segs) > 1 && (snap == nil || snap.offset != segs[len(segs)-1].BaseOffset):
			t.Fatalf("after the roll to %d: snapshot %+v", segs[len(segs)-1].BaseOffset, snap)
		}
	}
	if _, err := appendProduced(t, l, idempotentBatch(7, 0, seq, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if snap, err := readProducerSnapshot(dir); err != nil || snap == nil || snap.offset != l.EndOffset() {
		t.Fatalf("after Roll: snapshot %+v, %v; want one at %d", snap, err, l.EndOffset())
	}
	if _, err := appendProduced(t, l, idempotentBatch(7, 0, seq+1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "p-0")
	copyDir(t, dir, crashed)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, crashed, cfg, options{})
	defer r.Close()
	got, err := r.Producers()
	if err != nil || len(got) != 1 || got[0].LastSequence != seq+1 {
		t.Fatalf("after the crash: producers %+v, %v; want producer 7 at sequence %d", got, err, seq+1)
	}
}

// TestTxnIndexFaultsRewriteIt: a short write of an entry, or a failed
// fsync of the index, makes the log rewrite the index whole from memory
// (atomically, durably) rather than leave a torn entry or trust a later
// fsync; appends carry on after it.
func TestTxnIndexFaultsRewriteIt(t *testing.T) {
	dir := t.TempDir()
	var short, failSync atomic.Bool
	faulty := faultyOpener(&short, &failSync)
	open := func(path string, flag int, perm os.FileMode) (file, error) {
		if strings.HasSuffix(path, txnIndexSuffix) {
			return faulty(path, flag, perm)
		}
		return openOSFile(path, flag, perm)
	}
	l := openTest(t, dir, DefaultConfig(), options{openFile: open})
	defer l.Close()
	abort := func(p int64) {
		t.Helper()
		if _, err := appendProduced(t, l, txnBatch(p, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		endTxn(t, l, p, false)
	}
	onDisk := func(want int) {
		t.Helper()
		entries, err := decodeTxnIndex(readFileOrEmpty(t, segmentPath(dir, 0, txnIndexSuffix)))
		if err != nil || len(entries) != want {
			t.Fatalf("index on disk: %+v, %v; want %d whole entries", entries, err, want)
		}
	}

	short.Store(true)
	abort(1)
	short.Store(false)
	onDisk(1) // rewritten, durably, at once

	abort(2)
	failSync.Store(true)
	if err := l.Flush(); err != nil {
		t.Fatalf("flush with the index's fsync failing: %v", err)
	}
	failSync.Store(false)
	onDisk(2)

	abort(3)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	onDisk(3)
	if got := len(aborted(t, l, 0, 100)); got != 3 {
		t.Fatalf("%d aborted transactions listed, want 3", got)
	}
}

// TestAbortedTransactionsWhileAborting: readers listing aborted
// transactions while aborts append to the same segment's entries (in
// place) always see whole entries in marker order (run with -race).
func TestAbortedTransactionsWhileAborting(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	const aborts = 200
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := int64(1); p <= aborts; p++ {
			if _, err := appendProduced(t, l, txnBatch(p, 0, 0, 1)); err != nil {
				t.Error(err)
				return
			}
			if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: p}, 0); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for {
		finished := false
		select {
		case <-done:
			finished = true // every abort is in: this read must see them all
		default:
		}
		got, err := l.AbortedTransactions(0, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range got {
			if a.ProducerID != int64(i+1) || a.LastOffset != 2*int64(i)+1 {
				t.Fatalf("entry %d of %d: %+v", i, len(got), a)
			}
		}
		if finished {
			if len(got) != aborts {
				t.Fatalf("%d aborted transactions listed after %d aborts", len(got), aborts)
			}
			return
		}
	}
}

// TestNewLogStateKnownAtOpen: a new log's producer state is known from the
// start (there is nothing to scan), so the first fetch after many
// non-idempotent appends does not scan them; a log with batches and no
// snapshot still loads its state lazily.
func TestNewLogStateKnownAtOpen(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	if !l.txnStateLoaded.Load() {
		t.Fatal("a new log's producer state is not loaded at open")
	}
	mustAppend(t, l, batchtest.Make(4, 8, 1, 0))
	if _, err := appendProduced(t, l, txnBatch(1, 0, 0, 1)); err != nil { // 4, stays open
		t.Fatal(err)
	}
	if got := firstUnstable(t, l); got != 4 {
		t.Fatalf("first unstable offset %d, want 4 (the open transaction)", got)
	}
	if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: 1, Commit: true}, 0); err != nil {
		t.Fatal(err)
	}
	if got := firstUnstable(t, l); got != -1 {
		t.Fatalf("first unstable offset %d after the commit, want -1", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, producerSnapshotFile)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	r := openTest(t, dir, DefaultConfig(), options{})
	defer r.Close()
	if r.txnStateLoaded.Load() {
		t.Fatal("a log with batches and no snapshot loaded its producer state at open, before anything needed it")
	}
}
