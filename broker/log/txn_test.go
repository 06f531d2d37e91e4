package log

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// txnBatch is idempotentBatch with the transactional attribute.
func txnBatch(producer int64, epoch int16, sequence int32, records int) []byte {
	b := idempotentBatch(producer, epoch, sequence, records)
	be := binary.BigEndian
	be.PutUint16(b[offAttributes:], be.Uint16(b[offAttributes:])|attrTransactional)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// endTxn appends a marker and fails the test on an error.
func endTxn(t *testing.T, l *Log, producer int64, commit bool) int64 {
	t.Helper()
	off, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: producer, Commit: commit, CoordinatorEpoch: 1}, 0)
	if err != nil {
		t.Fatalf("marker for producer %d: %v", producer, err)
	}
	return off
}

// firstUnstable returns FirstUnstableOffset as one value, -1 for none.
func firstUnstable(t *testing.T, l *Log) int64 {
	t.Helper()
	off, ok, err := l.FirstUnstableOffset()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return -1
	}
	return off
}

func aborted(t *testing.T, l *Log, from, to int64) []AbortedTxn {
	t.Helper()
	got, err := l.AbortedTransactions(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTxnMarkers: the first unstable offset follows the oldest ongoing
// transaction, a commit leaves no trace in the index, an abort lists the
// transaction in the marker's segment's .txnindex (Kafka's 34-byte entry)
// and AbortedTransactions answers exactly the ranges it overlaps.
func TestTxnMarkers(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	defer l.Close()
	if got := firstUnstable(t, l); got != -1 {
		t.Fatalf("empty log: first unstable %d", got)
	}
	mustProduce := func(b []byte) {
		t.Helper()
		if _, err := appendProduced(t, l, b); err != nil {
			t.Fatal(err)
		}
	}
	mustProduce(txnBatch(1, 0, 0, 2))        // 0-1
	mustProduce(txnBatch(2, 0, 0, 2))        // 2-3
	mustProduce(idempotentBatch(3, 0, 0, 1)) // 4
	mustProduce(txnBatch(1, 0, 2, 1))        // 5
	if got := firstUnstable(t, l); got != 0 {
		t.Fatalf("first unstable %d, want 0", got)
	}
	if _, err := appendProduced(t, l, idempotentBatch(1, 0, 3, 1)); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside a transaction: %v, want ErrInvalidTxnState", err)
	}
	if off := endTxn(t, l, 1, true); off != 6 {
		t.Fatalf("commit marker at %d, want 6", off)
	}
	if got := firstUnstable(t, l); got != 2 {
		t.Fatalf("after the commit: first unstable %d, want 2", got)
	}
	if len(aborted(t, l, 0, 100)) != 0 {
		t.Fatal("a commit was indexed as an abort")
	}
	if off := endTxn(t, l, 2, false); off != 7 {
		t.Fatalf("abort marker at %d, want 7", off)
	}
	if got := firstUnstable(t, l); got != -1 {
		t.Fatalf("after the abort: first unstable %d, want none", got)
	}
	want := AbortedTxn{ProducerID: 2, FirstOffset: 2, LastOffset: 7, LastStableOffset: 8}
	for _, c := range []struct {
		from, to int64
		want     bool
	}{{0, 100, true}, {0, 3, true}, {0, 2, false}, {7, 8, true}, {8, 100, false}, {3, 4, true}} {
		got := aborted(t, l, c.from, c.to)
		if c.want != (len(got) == 1) || c.want && got[0] != want {
			t.Errorf("AbortedTransactions(%d, %d) = %+v, want it listed: %v", c.from, c.to, got, c.want)
		}
	}
	b, err := os.ReadFile(segmentPath(dir, 0, txnIndexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	const entry = "0000" + "0000000000000002" + "0000000000000002" + "0000000000000007" + "0000000000000008"
	if got := hex.EncodeToString(b); got != entry {
		t.Fatalf(".txnindex\n%s\nwant\n%s", got, entry)
	}

	// Markers are fenced by producer and coordinator epoch.
	if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: 2, ProducerEpoch: 1, CoordinatorEpoch: 5}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 5}, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker with an older producer epoch: %v, want ErrInvalidProducerEpoch", err)
	}
	if _, err := l.AppendEndTxnMarker(EndTxnMarker{ProducerID: 2, ProducerEpoch: 1, CoordinatorEpoch: 4}, 0); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker from an older coordinator: %v, want ErrCoordinatorFenced", err)
	}
	// The bumped epoch's first batch starts at sequence 0.
	mustProduce(txnBatch(2, 1, 0, 1))
	producers, err := l.Producers()
	if err != nil {
		t.Fatal(err)
	}
	if p := producers[1]; p.ID != 2 || p.Epoch != 1 || p.CoordinatorEpoch != 5 || p.CurrentTxnStartOffset != 9 {
		t.Fatalf("producer 2: %+v", p)
	}
}

// TestTxnIndexTruncation: truncating below an abort marker removes its
// entry (and the file), and the transaction is ongoing again.
func TestTxnIndexTruncation(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	defer l.Close()
	if _, err := appendProduced(t, l, txnBatch(1, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	marker := endTxn(t, l, 1, false)
	if len(aborted(t, l, 0, 10)) != 1 {
		t.Fatal("abort not indexed")
	}
	if err := l.TruncateTo(marker); err != nil {
		t.Fatal(err)
	}
	if got := aborted(t, l, 0, 10); len(got) != 0 {
		t.Fatalf("after truncating the marker: %+v", got)
	}
	if _, err := os.Stat(segmentPath(dir, 0, txnIndexSuffix)); !os.IsNotExist(err) {
		t.Fatalf("empty .txnindex left behind: %v", err)
	}
	if got := firstUnstable(t, l); got != 0 {
		t.Fatalf("first unstable after truncation %d, want 0", got)
	}
}

// TestTxnStateAcrossRestarts: the ongoing transaction (snapshot version 2)
// and the index survive a clean restart; after a crash that lost the index
// file, rebuilding the producer state from the log brings the entry back;
// an index entry past the recovered log end is dropped.
func TestTxnStateAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	mustAppend(t, l, batchtest.Make(1, 8, 1, 0))                          // 0: before any transaction
	if _, err := appendProduced(t, l, txnBatch(1, 0, 0, 1)); err != nil { // 1
		t.Fatal(err)
	}
	endTxn(t, l, 1, false)                                                // 2
	if _, err := appendProduced(t, l, txnBatch(2, 0, 0, 1)); err != nil { // 3, ongoing
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
	wantAborted := []AbortedTxn{{ProducerID: 1, FirstOffset: 1, LastOffset: 2, LastStableOffset: 3}}

	clean := openTest(t, dir, DefaultConfig(), options{})
	if got := firstUnstable(t, clean); got != 3 {
		t.Fatalf("clean restart: first unstable %d, want 3", got)
	}
	if got := aborted(t, clean, 0, 10); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("clean restart: aborted %+v, want %+v", got, wantAborted)
	}
	clean.Close()

	// The crashed copy has no snapshot (none was written before the
	// crash): the state is rebuilt by scanning the whole log.
	if err := os.Remove(segmentPath(crashed, 0, txnIndexSuffix)); err != nil {
		t.Fatal(err)
	}
	recovered := openTest(t, crashed, DefaultConfig(), options{})
	defer recovered.Close()
	if got := firstUnstable(t, recovered); got != 3 {
		t.Fatalf("after the crash: first unstable %d, want 3", got)
	}
	if got := aborted(t, recovered, 0, 10); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("after the crash: aborted %+v, want %+v", got, wantAborted)
	}
	if _, err := os.Stat(segmentPath(crashed, 0, txnIndexSuffix)); err != nil {
		t.Fatalf("index not rewritten: %v", err)
	}

	// An entry whose marker the log no longer has goes at Open.
	stale := filepath.Join(t.TempDir(), "p-0")
	copyDir(t, dir, stale)
	if err := writeTxnIndex(stale, 0, append(wantAborted, AbortedTxn{ProducerID: 9, FirstOffset: 3, LastOffset: 50, LastStableOffset: 51})); err != nil {
		t.Fatal(err)
	}
	reopened := openTest(t, stale, DefaultConfig(), options{})
	defer reopened.Close()
	if got := aborted(t, reopened, 0, 100); !reflect.DeepEqual(got, wantAborted) {
		t.Fatalf("entry past the end kept: %+v", got)
	}
}

// TestProducerSnapshotV2: the transaction fields round-trip and version 1
// reads as no transaction.
func TestProducerSnapshotV2(t *testing.T) {
	s := producerSnapshot{offset: 50, producers: map[int64]*producerEntry{
		1: {epoch: 2, lastTimestamp: 7, txnOngoing: true, txnFirstOffset: 40, coordinatorEpoch: 4, batches: []producerBatch{{0, 0, 40, 40}}},
		2: {epoch: 0, lastTimestamp: 8, batches: []producerBatch{{-1, -1, 45, 45}}},
	}}
	got, err := decodeProducerSnapshot(encodeProducerSnapshot(s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip %+v, %v; want %+v", got, err, s)
	}
	if v := binary.BigEndian.Uint16(encodeProducerSnapshot(s)[4:]); v != 2 {
		t.Fatalf("wrote version %d, want 2", v)
	}
}

// TestTxnIndexCarriedByReplacement: a replacement of segments holding
// abort markers keeps every aborted transaction listed and indexed, in the
// segment that holds its marker, wherever a crash stops the swap.
func TestTxnIndexCarriedByReplacement(t *testing.T) {
	pristine := filepath.Join(t.TempDir(), "p-0")
	l := openTest(t, pristine, DefaultConfig(), options{})
	// Three segments of two aborted transactions each, then the active one.
	for s := range int64(3) {
		for i := range int64(2) {
			id := s*2 + i + 1
			if _, err := appendProduced(t, l, txnBatch(id, 0, 0, 1)); err != nil {
				t.Fatal(err)
			}
			endTxn(t, l, id, false)
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, l, batchtest.Make(1, 8, 1, 0))
	want := aborted(t, l, 0, 100)
	if len(want) != 6 {
		t.Fatalf("%d aborted transactions, want 6", len(want))
	}
	var run [][]byte
	for _, b := range readStored(t, l) {
		if b.base < 12 {
			run = append(run, b.bytes)
		}
	}
	// Two new segments for the three old ones: [0, 4) and [4, 12).
	build := func(w *SegmentWriter) error {
		for i, b := range run {
			if i == 4 {
				if err := w.startSegment(4); err != nil {
					return err
				}
			}
			if err := w.Append(b); err != nil {
				return err
			}
		}
		return nil
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(pristine, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		work := filepath.Join(t.TempDir(), "p-0")
		copyDir(t, pristine, work)
		l := openTest(t, work, DefaultConfig(), options{})
		calls := 0
		l.replace.stopAfter = func(string) bool { calls++; return calls > n }
		err := l.ReplaceSegments(0, 12, build)
		done := err == nil
		if !done && !errors.Is(err, errStopped) {
			t.Fatalf("replace stopped after %d steps: %v", n, err)
		}
		crashed := filepath.Join(t.TempDir(), "p-0")
		copyDir(t, work, crashed)
		if done {
			if got := aborted(t, l, 0, 100); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the replacement: %+v, want %+v", got, want)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		reopened := openTest(t, crashed, DefaultConfig(), options{})
		if got := aborted(t, reopened, 0, 100); !reflect.DeepEqual(got, want) {
			t.Fatalf("reopened after %d steps: %+v, want %+v", n, got, want)
		}
		if done {
			for base, entries := range map[int64]int{0: 2, 4: 4} {
				b, err := os.ReadFile(segmentPath(crashed, base, txnIndexSuffix))
				if err != nil || len(b) != entries*txnIndexEntrySize {
					t.Fatalf("segment %d's .txnindex: %d bytes, %v; want %d entries", base, len(b), err, entries)
				}
			}
		}
		reopened.Close()
		if done {
			return
		}
	}
}

// TestTxnIndexDropsRemovedMarkers: a replacement that leaves out an abort
// marker (with its transaction's records) leaves out its index entry.
func TestTxnIndexDropsRemovedMarkers(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	for id := range int64(2) {
		if _, err := appendProduced(t, l, txnBatch(id+1, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		endTxn(t, l, id+1, false)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, batchtest.Make(1, 8, 1, 0))
	stored := readStored(t, l)
	// Producer 2's batch and marker stay; producer 1's go.
	err := l.ReplaceSegments(0, 4, func(w *SegmentWriter) error {
		return errors.Join(w.Append(stored[2].bytes), w.Append(stored[3].bytes))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []AbortedTxn{{ProducerID: 2, FirstOffset: 2, LastOffset: 3, LastStableOffset: 4}}
	if got := aborted(t, l, 0, 10); !reflect.DeepEqual(got, want) {
		t.Fatalf("after dropping producer 1's transaction: %+v, want %+v", got, want)
	}
}

// FuzzTxnIndex: decoding never panics, and the entries it trusts (all of
// them, or those before a damaged one) re-encode to an index that decodes
// whole to the same entries.
func FuzzTxnIndex(f *testing.F) {
	f.Add(encodeTxnIndex([]AbortedTxn{{ProducerID: 1, FirstOffset: 2, LastOffset: 7, LastStableOffset: 8}}))
	f.Add([]byte{0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, _ := decodeTxnIndex(b)
		again, err := decodeTxnIndex(encodeTxnIndex(entries))
		if err != nil || !reflect.DeepEqual(again, entries) {
			t.Fatalf("re-encoding changed the index: %v", err)
		}
	})
}

// FuzzParseControlRecord: any bytes, a marker the log built included,
// parse (and are scanned for transactional batches) without panicking; a
// built marker parses to what it says.
func FuzzParseControlRecord(f *testing.F) {
	marker := encodeEndTxnMarker(EndTxnMarker{ProducerID: 3, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 9})
	if typ, epoch, ok := parseControlRecord(marker); !ok || typ != controlTypeCommit || epoch != 9 {
		f.Fatalf("built marker parsed as type %d epoch %d ok %v", typ, epoch, ok)
	}
	f.Add(marker)
	f.Fuzz(func(t *testing.T, b []byte) {
		parseControlRecord(b)
		hasTransactional(b)
	})
}

// TestTxnStableOffsetNeverPassesAnOpenTransaction: a reader that reads
// the log end and then the first unstable offset, as the last stable
// offset is computed, never sees the end past a transaction's first batch
// without the first unstable offset stopping in front of it.
func TestTxnStableOffsetNeverPassesAnOpenTransaction(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	const txns = 300
	done := make(chan struct{})
	bad := make(chan string, 1)
	go func() {
		defer close(done)
		for {
			end := l.EndOffset()
			first, ok, err := l.FirstUnstableOffset()
			if err != nil {
				bad <- err.Error()
				return
			}
			// Each transaction is one record at an even offset and its
			// marker after it: an odd end, the same before and after
			// the first unstable offset was read, means one was open
			// all along.
			if end%2 == 1 && l.EndOffset() == end && (!ok || first > end-1) {
				bad <- fmt.Sprintf("log end %d with the transaction at %d open, first unstable %d (%v)", end, end-1, first, ok)
				return
			}
			if end == 2*txns {
				return
			}
		}
	}()
	for i := range int64(txns) {
		if _, err := appendProduced(t, l, txnBatch(i+1, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		endTxn(t, l, i+1, i%2 == 0)
	}
	<-done
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
}
