package log

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// cacheConfig gives one 3-record batch of 200-byte values per segment.
func cacheConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	cfg.IndexIntervalBytes = 100
	cfg.FileDeleteDelay = 0 // a deleted segment's files go when nothing reads them
	return cfg
}

// writeSegments writes n batches (so n segments) to a new log in dir and
// closes it cleanly; it returns each batch as read back.
func writeSegments(t *testing.T, dir string, n int) [][]byte {
	t.Helper()
	l := openTest(t, dir, cacheConfig(), options{})
	var out [][]byte
	for i := range n {
		mustAppend(t, l, batchtest.Make(3, 200, int64(1000+i), byte(i)))
	}
	for _, s := range l.Segments() {
		out = append(out, readSegmentBytes(t, l, s.BaseOffset))
	}
	if len(l.Segments()) != n {
		t.Fatalf("%d segments, want %d", len(l.Segments()), n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// readSegmentBytes reads the batch at offset.
func readSegmentBytes(t *testing.T, l *Log, offset int64) []byte {
	t.Helper()
	s, err := l.Read(offset, 1, l.EndOffset())
	if err != nil {
		t.Fatalf("read %d: %v", offset, err)
	}
	defer s.Close()
	b, err := s.ReadAll()
	if err != nil {
		t.Fatalf("read %d: %v", offset, err)
	}
	return b
}

// openDescriptorsUnder counts this process's descriptors on files under dir.
func openDescriptorsUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

func logFile(l *Log, i int) *cachedFile {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segments[i].log.(*cachedFile)
}

// After a clean stop only the active segment is opened; the old ones take a
// descriptor when first read, and the cache shared by several logs keeps
// the total at its limit however many segments are read.
func TestFileCacheLazyOpenAndBound(t *testing.T) {
	root := t.TempDir()
	const logs, segments, limit = 4, 5, 3
	want := make([][][]byte, logs)
	for i := range logs {
		want[i] = writeSegments(t, filepath.Join(root, string(rune('a'+i))), segments)
	}
	files := newFileCache(limit)
	var open []*Log
	for i := range logs {
		l := openTest(t, filepath.Join(root, string(rune('a'+i))), cacheConfig(), options{files: files})
		defer l.Close()
		open = append(open, l)
		for j := range segments - 1 {
			if logFile(l, j).isOpen() {
				t.Fatalf("log %d: old segment %d opened at start", i, j)
			}
		}
	}
	if n := openDescriptorsUnder(t, root); n > limit {
		t.Fatalf("%d descriptors open after opening %d logs, limit %d", n, logs, limit)
	}
	for round := range 2 { // the second round reads files the cache closed
		for i, l := range open {
			for j, s := range l.Segments() {
				if got := readSegmentBytes(t, l, s.BaseOffset); !bytes.Equal(got, want[i][j]) {
					t.Fatalf("round %d: log %d segment %d read back different bytes", round, i, j)
				}
				if n := files.openCount(); n > limit {
					t.Fatalf("cache holds %d descriptors, limit %d", n, limit)
				}
			}
		}
	}
	if n := openDescriptorsUnder(t, root); n > limit {
		t.Fatalf("%d descriptors open after reading every segment, limit %d", n, limit)
	}
	if logFile(open[0], 0).isOpen() {
		t.Fatal("the least recently read segment is still open")
	}
}

// A Slice pins its file: a sendfile or read in progress never loses its
// descriptor to the cache, and a Slice on a segment deleted while its file
// was closed reopens it under its .deleted name.
func TestFileCacheSliceOfClosedDeletedSegment(t *testing.T) {
	dir := t.TempDir()
	want := writeSegments(t, dir, 4)
	files := newFileCache(1)
	cfg := cacheConfig()
	l := openTest(t, dir, cfg, options{files: files})
	defer l.Close()
	held, err := l.Read(0, 1, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	readSegmentBytes(t, l, 3) // closes segment 0's file
	if logFile(l, 0).isOpen() {
		t.Fatal("segment 0 still open past the limit of 1")
	}
	cfg.RetentionBytes = 1 // delete every segment but the active one
	// Only by size: the records' timestamps are old, and retention.ms
	// would take the active segment too.
	cfg.Retention = -1
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if n, err := l.EnforceRetention(time.Now()); err != nil || n != 3 {
		t.Fatalf("retention deleted %d segments (%v), want 3", n, err)
	}
	if _, err := os.Stat(segmentPath(dir, 0, logSuffix)); !os.IsNotExist(err) {
		t.Fatalf("deleted segment's file still under its name: %v", err)
	}
	got, err := held.ReadAll()
	if err != nil || !bytes.Equal(got, want[0]) {
		t.Fatalf("slice of a deleted, closed segment: %v", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segmentPath(dir, 0, logSuffix) + deletedSuffix); !os.IsNotExist(err) {
		t.Fatalf("deleted segment not unlinked after its last reader: %v", err)
	}
	if n := len(l.Segments()); n != 1 || l.StartOffset() != 9 {
		t.Fatalf("%d segments from %d after retention, want the active one from 9", n, l.StartOffset())
	}
}

// Truncating into an old segment whose files the cache closed reopens them,
// cuts the log there and appends after it; a clean restart sees the same.
func TestFileCacheTruncateClosedSegment(t *testing.T) {
	dir := t.TempDir()
	want := writeSegments(t, dir, 4)
	files := newFileCache(1)
	l := openTest(t, dir, cacheConfig(), options{files: files})
	readSegmentBytes(t, l, 3)
	readSegmentBytes(t, l, 9) // closes segment 1's file again
	if logFile(l, 1).isOpen() {
		t.Fatal("segment 1 still open past the limit of 1")
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 3 || len(l.Segments()) != 2 {
		t.Fatalf("after truncation to 3: end %d, %d segments", l.EndOffset(), len(l.Segments()))
	}
	mustAppend(t, l, batchtest.Make(2, 50, 5000, 7))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, cacheConfig(), options{files: newFileCache(1)})
	defer l.Close()
	if l.EndOffset() != 5 || l.recoveredSegments.Load() != 0 {
		t.Fatalf("reopened: end %d, scanned %d segments; want 5 and none", l.EndOffset(), l.recoveredSegments.Load())
	}
	if got := readSegmentBytes(t, l, 0); !bytes.Equal(got, want[0]) {
		t.Fatal("segment 0 changed")
	}
	if hs := readAllBatches(t, l, 0); len(hs) != 2 || hs[1].BaseOffset != 3 || hs[1].Records != 2 {
		t.Fatalf("batches after truncate and append: %+v", hs)
	}
}

// After a crash the segments from the recovery point are scanned and the
// torn tail cut as before; the trusted ones below it stay unopened.
func TestFileCacheCrashRecoveryScansFromRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, cacheConfig(), options{files: newFileCache(2)})
	for i := range 6 {
		mustAppend(t, l, batchtest.Make(3, 200, int64(1000+i), byte(i)))
		if i == 3 {
			if err := l.Flush(); err != nil { // recovery point 12: segment 4 on
				t.Fatal(err)
			}
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	if err := writeCheckpoint(filepath.Join(dir, recoveryPointFile), [][]int64{{12}}); err != nil {
		t.Fatal(err)
	}
	// Tear the last batch.
	last := segmentPath(dir, 15, logSuffix)
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()-10); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, cacheConfig(), options{files: newFileCache(2)})
	defer l.Close()
	if n := l.recoveredSegments.Load(); n != 2 {
		t.Fatalf("scanned %d segments, want the 2 from the recovery point", n)
	}
	if l.EndOffset() != 15 {
		t.Fatalf("end %d after the torn tail, want 15", l.EndOffset())
	}
	for i := range 3 {
		if logFile(l, i).isOpen() {
			t.Fatalf("trusted segment %d opened by recovery", i)
		}
	}
	if hs := readAllBatches(t, l, 0); len(hs) != 5 {
		t.Fatalf("%d batches readable, want 5", len(hs))
	}
	mustAppend(t, l, batchtest.Make(1, 10, 9000, 1))
	if l.EndOffset() != 16 {
		t.Fatalf("append after recovery ends at %d", l.EndOffset())
	}
}

// The segments a replacement writes and the transaction indexes markers
// write are held by the cache like every other segment file: their
// descriptors stay within its limit and a file it closed reopens under the
// name the swap gave it.
func TestFileCacheHoldsReplacedSegmentsAndTxnIndexes(t *testing.T) {
	dir := t.TempDir()
	const limit = 2
	l := buildReplaceLog(t, dir, options{files: newFileCache(limit)})
	defer l.Close()
	segs := l.Segments()
	build, want := filteredCopy(t, l, segs[1].BaseOffset, segs[5].BaseOffset)
	if err := l.ReplaceSegments(segs[1].BaseOffset, segs[5].BaseOffset, build); err != nil {
		t.Fatal(err)
	}
	if n := openDescriptorsUnder(t, dir); n > limit {
		t.Fatalf("%d descriptors open after the replacement, limit %d", n, limit)
	}
	for round := range 2 { // the second round reopens what the first closed
		checkContents(t, l, want)
		if n := openDescriptorsUnder(t, dir); n > limit {
			t.Fatalf("round %d: %d descriptors open after reading every segment, limit %d", round, n, limit)
		}
	}

	for p := int64(1); p <= 3; p++ {
		if _, err := appendProduced(t, l, txnBatch(p, 0, 0, 1)); err != nil {
			t.Fatal(err)
		}
		endTxn(t, l, p, false)
		readSegmentBytes(t, l, 0) // makes the index the least recently used
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := openDescriptorsUnder(t, dir); n > limit {
		t.Fatalf("%d descriptors open after three aborts, limit %d", n, limit)
	}
	if got := len(aborted(t, l, 0, l.EndOffset())); got != 3 {
		t.Fatalf("%d aborted transactions listed, want 3", got)
	}
	var onDisk int
	for _, s := range l.Segments() {
		entries, err := decodeTxnIndex(readFileOrEmpty(t, segmentPath(dir, s.BaseOffset, txnIndexSuffix)))
		if err != nil {
			t.Fatalf("transaction index of segment %d: %v", s.BaseOffset, err)
		}
		onDisk += len(entries)
	}
	if onDisk != 3 {
		t.Fatalf("%d entries in the transaction indexes on disk, want 3", onDisk)
	}
}
