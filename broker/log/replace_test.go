package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"millrace/internal/recordbatch"
	"millrace/internal/recordbatch/batchtest"
)

// storedBatch is one batch as Read returns it.
type storedBatch struct {
	base  int64
	bytes []byte
}

// readStored reads the whole log batch by batch.
func readStored(t testing.TB, l *Log) []storedBatch {
	t.Helper()
	var out []storedBatch
	for off := l.StartOffset(); off < l.EndOffset(); {
		s, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := s.ReadAll()
		s.Close()
		if err != nil {
			t.Fatalf("read all %d: %v", off, err)
		}
		hs, err := testDecoder.Validate(b, maxInt, nil)
		if err != nil {
			t.Fatalf("read at %d returned invalid batches: %v", off, err)
		}
		for _, h := range hs {
			out = append(out, storedBatch{h.BaseOffset, bytes.Clone(b[:h.Size()])})
			b = b[h.Size():]
		}
		off = s.NextOffset()
	}
	return out
}

// replaceConfig makes segments of a few batches, so a run is easy to find.
func replaceConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 150
	cfg.FileDeleteDelay = 0 // replaced segments' files go when nothing reads them
	return cfg
}

// buildReplaceLog writes 60 batches of 1–3 records into dir and flushes
// them, so the segments below the active one are trusted at the next open
// and read through their index files.
func buildReplaceLog(t *testing.T, dir string, opts ...options) *Log {
	t.Helper()
	l := openTest(t, dir, replaceConfig(), append(opts, options{})[0])
	for i := range 60 {
		mustAppend(t, l, batchtest.Make(1+i%3, 40+i%30, int64(1000+i), byte(i)))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n < 6 {
		t.Fatalf("want at least 6 segments, got %d", n)
	}
	return l
}

// filteredCopy returns a build that appends the batches in [from, to) that
// dropped keeps, and the log's batches as they should be afterwards.
func filteredCopy(t *testing.T, l *Log, from, to int64) (func(w *SegmentWriter) error, []storedBatch) {
	t.Helper()
	all := readStored(t, l)
	first := slices.IndexFunc(all, func(b storedBatch) bool { return b.base >= from })
	end := slices.IndexFunc(all, func(b storedBatch) bool { return b.base >= to })
	if end-first < 6 {
		t.Fatalf("run [%d, %d) has only %d batches", from, to, end-first)
	}
	// Every third batch goes, and the last one, so the new run ends well
	// before to and its extent is not what its offsets say.
	var want, kept []storedBatch
	for i, b := range all {
		if i >= first && i < end {
			if (i-first)%3 == 2 || i == end-1 {
				continue
			}
			kept = append(kept, b)
		}
		want = append(want, b)
	}
	build := func(w *SegmentWriter) error {
		for _, b := range kept {
			if err := w.Append(b.bytes); err != nil {
				return err
			}
		}
		return nil
	}
	return build, want
}

// checkContents checks that the log holds exactly want, that every offset
// reads as the batch holding it or, in a gap, the next batch, and that every
// offset index entry of every segment file points at the batch it names.
func checkContents(t *testing.T, l *Log, want []storedBatch) {
	t.Helper()
	got := readStored(t, l)
	if len(got) != len(want) {
		t.Fatalf("log has %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].base != want[i].base || !bytes.Equal(got[i].bytes, want[i].bytes) {
			t.Fatalf("batch %d at offset %d differs from the one wanted at %d", i, got[i].base, want[i].base)
		}
	}
	for off, i := l.StartOffset(), 0; off < l.EndOffset(); off++ {
		for recordbatch.HeaderAt(want[i].bytes).LastOffset() < off {
			i++
		}
		s, err := l.Read(off, 1, l.EndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := s.ReadAll()
		s.Close()
		if err != nil || !bytes.Equal(b, want[i].bytes) {
			t.Fatalf("read %d: got %d bytes (err %v), want the batch at %d", off, len(b), err, want[i].base)
		}
	}
	for _, seg := range l.Segments() {
		ib, err := os.ReadFile(segmentPath(l.Dir(), seg.BaseOffset, indexSuffix))
		if err != nil {
			t.Fatal(err)
		}
		entries, ok := decodeOffsetEntries(ib, seg.Size)
		if !ok {
			t.Fatalf("segment %d: damaged offset index", seg.BaseOffset)
		}
		lb, err := os.ReadFile(segmentPath(l.Dir(), seg.BaseOffset, logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if h := recordbatch.HeaderAt(lb[e.pos:]); h.BaseOffset != seg.BaseOffset+int64(e.rel) {
				t.Fatalf("segment %d: index entry %+v points at a batch at offset %d", seg.BaseOffset, e, h.BaseOffset)
			}
		}
		tb, err := os.ReadFile(segmentPath(l.Dir(), seg.BaseOffset, timeIndexSuffix))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := decodeTimeEntries(tb); !ok {
			t.Fatalf("segment %d: damaged time index", seg.BaseOffset)
		}
	}
}

// checkNoReplacementFiles checks that no file of a replacement is left.
func checkNoReplacementFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) || strings.HasSuffix(n, deletedSuffix) || strings.HasPrefix(n, replacementFile) {
			t.Fatalf("left over after the replacement: %s", n)
		}
	}
}

func TestReplaceSegmentsKeepsOffsets(t *testing.T) {
	dir := t.TempDir()
	l := buildReplaceLog(t, dir)
	segs := l.Segments()
	from, to := segs[1].BaseOffset, segs[5].BaseOffset
	build, want := filteredCopy(t, l, from, to)
	lastOld, err := os.Stat(segmentPath(dir, segs[4].BaseOffset, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	var newSegments []SegmentInfo
	err = l.ReplaceSegments(from, to, func(w *SegmentWriter) error {
		if err := build(w); err != nil {
			return err
		}
		newSegments = w.Segments()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Four segments' kept batches outgrow one segment.bytes.
	if len(newSegments) < 2 || newSegments[0].BaseOffset != from {
		t.Fatalf("new segments %+v: want several, the first at %d", newSegments, from)
	}
	checkContents(t, l, want)
	checkNoReplacementFiles(t, dir)
	// Time retention judges the new segments as it judged the old ones.
	for _, s := range newSegments {
		fi, err := os.Stat(segmentPath(dir, s.BaseOffset, logSuffix))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(lastOld.ModTime()) || s.MaxTimestamp < 1000 {
			t.Fatalf("new segment %d: modified %v, largest timestamp %d; want the last old segment's time %v and a record timestamp", s.BaseOffset, fi.ModTime(), s.MaxTimestamp, lastOld.ModTime())
		}
	}
	end := l.EndOffset()
	if info := mustAppend(t, l, batchtest.Make(2, 10, 5000, 1)); info.FirstOffset != end {
		t.Fatalf("append after the replacement at %d, want %d", info.FirstOffset, end)
	}
	want = readStored(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A clean reopen, then an unclean one that scans every segment from
	// offset 0: the gaps the replacement left must not read as a torn tail.
	l = openTest(t, dir, replaceConfig(), options{})
	checkContents(t, l, want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{cleanShutdownFile, recoveryPointFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	l = openTest(t, dir, replaceConfig(), options{})
	defer l.Close()
	if got, n := l.recoveredSegments.Load(), len(l.Segments()); got != int64(n) {
		t.Fatalf("unclean open scanned %d of %d segments", got, n)
	}
	checkContents(t, l, want)
}

// TestReplaceSegmentsCrashAtEveryStep stops the swap after each of its
// durable steps, as a killed process would, and opens what is on disk: the
// log must hold exactly the old run before the commit and exactly the new
// one from the commit on, with valid indexes.
func TestReplaceSegmentsCrashAtEveryStep(t *testing.T) {
	pristine := filepath.Join(t.TempDir(), "p-0")
	l := buildReplaceLog(t, pristine)
	segs := l.Segments()
	from, to := segs[1].BaseOffset, segs[5].BaseOffset
	old := readStored(t, l)
	build, want := filteredCopy(t, l, from, to)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The log was open when the process died: no clean-shutdown marker.
	if err := os.Remove(filepath.Join(pristine, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}

	reopen := func(t *testing.T, dir string, want []storedBatch) {
		t.Helper()
		l := openTest(t, dir, replaceConfig(), options{})
		defer l.Close()
		checkContents(t, l, want)
		checkNoReplacementFiles(t, dir)
	}

	t.Run("during build", func(t *testing.T) {
		work := filepath.Join(t.TempDir(), "p-0")
		copyDir(t, pristine, work)
		l := openTest(t, work, replaceConfig(), options{})
		defer l.Close()
		crashed := filepath.Join(t.TempDir(), "p-0")
		stop := errors.New("stop")
		err := l.ReplaceSegments(from, to, func(w *SegmentWriter) error {
			if err := build(w); err != nil {
				return err
			}
			copyDir(t, work, crashed)
			return stop
		})
		if !errors.Is(err, stop) {
			t.Fatalf("replace: %v", err)
		}
		if !fileExists(segmentPath(crashed, from, logSuffix) + cleanedSuffix) {
			t.Fatal("no .cleaned file was written during the build")
		}
		checkNoReplacementFiles(t, work)
		reopen(t, crashed, old)
	})

	committed := false
	var steps []string
	for n := 0; ; n++ {
		work := filepath.Join(t.TempDir(), "p-0")
		copyDir(t, pristine, work)
		l := openTest(t, work, replaceConfig(), options{})
		var step string
		calls := 0
		l.replace.stopAfter = func(s string) bool {
			calls++
			step = s
			return calls > n
		}
		err := l.ReplaceSegments(from, to, build)
		if err == nil {
			l.Close()
			break
		}
		if !errors.Is(err, errStopped) {
			t.Fatalf("replace stopped after %d steps: %v", n, err)
		}
		steps = append(steps, step)
		crashed := filepath.Join(t.TempDir(), "p-0")
		copyDir(t, work, crashed)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		committed = committed || step == "committed"
		if committed {
			reopen(t, crashed, want)
		} else {
			reopen(t, crashed, old)
		}
	}
	// cleaned, 4 files per new segment to .swap, committed, old deleted,
	// 4 files per new segment to their names, swapped.
	if len(steps) < 10 || steps[0] != "cleaned" || !slices.Contains(steps, "committed") || steps[len(steps)-1] != "swapped" {
		t.Fatalf("stopped at %q", steps)
	}
}

// TestReplaceSegmentsConcurrentReaders reads across swaps: a Slice taken
// before a swap still reads the old bytes after it, and a reader looping
// over the log meanwhile only ever sees the stored batches at their offsets.
func TestReplaceSegmentsConcurrentReaders(t *testing.T) {
	dir := t.TempDir()
	l := buildReplaceLog(t, dir)
	defer l.Close()
	segs := l.Segments()
	from, to := segs[1].BaseOffset, segs[5].BaseOffset
	all := readStored(t, l)
	byOffset := map[int64][]byte{}
	for _, b := range all {
		byOffset[b.base] = b.bytes
	}

	held, err := l.Read(from, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	heldBytes, err := held.ReadAll()
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, b := range readStored(t, l) {
				if !bytes.Equal(b.bytes, byOffset[b.base]) {
					readErr = errors.New("a concurrent read returned a batch not stored at its offset")
					return
				}
			}
		}
	})
	build, want := filteredCopy(t, l, from, to)
	if err := l.ReplaceSegments(from, to, build); err != nil {
		t.Fatal(err)
	}
	if !fileExists(segmentPath(dir, from, logSuffix) + deletedSuffix) {
		t.Fatal("the held segment's file is gone while a Slice reads it")
	}
	// Again, over the new segments, keeping everything. This one reuses the
	// .deleted name of the held segment: the Slice reads through its open
	// file either way.
	if err := l.ReplaceSegments(from, to, func(w *SegmentWriter) error {
		for _, b := range want {
			if b.base >= from && b.base < to {
				if err := w.Append(b.bytes); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	checkContents(t, l, want)

	after, err := held.ReadAll()
	if err != nil || !bytes.Equal(after, heldBytes) {
		t.Fatalf("a Slice held across the swap read %d bytes (err %v), want its %d", len(after), err, len(heldBytes))
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoReplacementFiles(t, dir)
}

func TestReplaceSegmentsRefused(t *testing.T) {
	dir := t.TempDir()
	l := buildReplaceLog(t, dir)
	defer l.Close()
	segs := l.Segments()
	active := segs[len(segs)-1]
	want := readStored(t, l)
	keepAll := func(w *SegmentWriter) error { return nil }
	ranges := map[string][2]int64{
		"the active segment":    {active.BaseOffset, active.BaseOffset + 1},
		"from not a base":       {segs[1].BaseOffset + 1, segs[2].BaseOffset},
		"to not a base":         {segs[1].BaseOffset, segs[2].BaseOffset + 1},
		"empty run":             {segs[2].BaseOffset, segs[2].BaseOffset},
		"to below from":         {segs[2].BaseOffset, segs[1].BaseOffset},
		"beyond the end of log": {segs[1].BaseOffset, active.NextOffset + 100},
	}
	for name, r := range ranges {
		if err := l.ReplaceSegments(r[0], r[1], keepAll); err == nil {
			t.Errorf("%s: replacing [%d, %d) succeeded", name, r[0], r[1])
		}
	}

	from, to := segs[1].BaseOffset, segs[3].BaseOffset
	var inRun []storedBatch
	var outside []byte
	for _, b := range want {
		if b.base >= from && b.base < to {
			inRun = append(inRun, b)
		} else if b.base >= to && outside == nil {
			outside = b.bytes
		}
	}
	builds := map[string]func(w *SegmentWriter) error{
		"batch past the run": func(w *SegmentWriter) error { return w.Append(outside) },
		"offsets going back": func(w *SegmentWriter) error {
			if err := w.Append(inRun[1].bytes); err != nil {
				return err
			}
			return w.Append(inRun[0].bytes)
		},
		"offsets going back in one call": func(w *SegmentWriter) error {
			return w.Append(slices.Concat(inRun[1].bytes, inRun[0].bytes))
		},
		"corrupt batch": func(w *SegmentWriter) error {
			b := bytes.Clone(inRun[0].bytes)
			b[len(b)-1] ^= 1
			return w.Append(b)
		},
		"build failing": func(w *SegmentWriter) error {
			if err := w.Append(inRun[0].bytes); err != nil {
				return err
			}
			return errors.New("cleaner gave up")
		},
	}
	for name, build := range builds {
		if err := l.ReplaceSegments(from, to, build); err == nil {
			t.Errorf("%s: replacement succeeded", name)
		}
		checkNoReplacementFiles(t, dir)
	}
	checkContents(t, l, want)
	if info := mustAppend(t, l, batchtest.Make(1, 10, 5000, 1)); info.FirstOffset != want[len(want)-1].base+int64(recordbatch.HeaderAt(want[len(want)-1].bytes).LastOffsetDelta)+1 {
		t.Fatalf("refused replacements disturbed appends: appended at %d", info.FirstOffset)
	}
}

// TestReplaceSegmentsConflict deletes the run while its replacement is
// built: the replacement is abandoned and leaves nothing behind.
func TestReplaceSegmentsConflict(t *testing.T) {
	dir := t.TempDir()
	l := buildReplaceLog(t, dir)
	defer l.Close()
	segs := l.Segments()
	from, to := segs[1].BaseOffset, segs[3].BaseOffset
	build, _ := filteredCopy(t, l, from, to)
	err := l.ReplaceSegments(from, to, func(w *SegmentWriter) error {
		if err := build(w); err != nil {
			return err
		}
		return l.AdvanceStartOffset(to)
	})
	if !errors.Is(err, ErrReplaceConflict) {
		t.Fatalf("replace after the run was deleted: %v", err)
	}
	checkNoReplacementFiles(t, dir)
	if got := l.Segments()[0].BaseOffset; got != to {
		t.Fatalf("first segment at %d, want %d", got, to)
	}
	if _, err := l.Append(batchtest.Make(1, 10, 5000, 1), 1); err != nil {
		t.Fatalf("append after an abandoned replacement: %v", err)
	}
}

// TestReplaceSegmentsWithNothing drops a whole run: one empty segment keeps
// its place, and reads of its offsets go on to the next segment, before and
// after an unclean reopen.
func TestReplaceSegmentsWithNothing(t *testing.T) {
	dir := t.TempDir()
	l := buildReplaceLog(t, dir)
	segs := l.Segments()
	from, to := segs[2].BaseOffset, segs[4].BaseOffset
	var want []storedBatch
	for _, b := range readStored(t, l) {
		if b.base < from || b.base >= to {
			want = append(want, b)
		}
	}
	if err := l.ReplaceSegments(from, to, func(*SegmentWriter) error { return nil }); err != nil {
		t.Fatal(err)
	}
	checkContents(t, l, want)
	if got := l.Segments()[2]; got.BaseOffset != from || got.Size != 0 {
		t.Fatalf("segment after the replacement: %+v, want an empty one at %d", got, from)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{cleanShutdownFile, recoveryPointFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	l = openTest(t, dir, replaceConfig(), options{})
	defer l.Close()
	checkContents(t, l, want)
}

// BenchmarkReplaceSegments rewrites 32 MiB of closed segments, every batch
// kept, as a cleaner pass that finds nothing to drop would: read through
// Read, write, fsync, swap. Compare with dd writing the same bytes with
// conv=fsync.
func BenchmarkReplaceSegments(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 20
	dir := benchDir(b)
	l, err := openLog(dir, cfg, nil, options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch(100, 16<<10)
	for l.Size() < 32<<20 {
		if _, err := l.Append(append([]byte(nil), batch...), 1); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	segs := l.Segments()
	from, to := segs[0].BaseOffset, segs[len(segs)-1].BaseOffset
	size := l.Size()
	copyAll := func(w *SegmentWriter) error {
		for off := from; off < to; {
			s, err := l.Read(off, 1<<20, to)
			if err != nil {
				return err
			}
			data, err := s.ReadAll()
			s.Close()
			if err == nil {
				err = w.Append(data)
			}
			if err != nil {
				return err
			}
			off = s.NextOffset()
		}
		return nil
	}
	b.SetBytes(size)
	m := startCPUMeter(b)
	for range b.N {
		if err := l.ReplaceSegments(from, to, copyAll); err != nil {
			b.Fatal(err)
		}
	}
	m.report(size)
}

// TestReplaceSegmentsWriteFailure fails the replacement's writes and fsyncs:
// the replacement is abandoned without a trace and the log goes on
// accepting appends, as nothing it holds was touched.
func TestReplaceSegmentsWriteFailure(t *testing.T) {
	for _, fault := range []string{"short write", "failed fsync"} {
		t.Run(fault, func(t *testing.T) {
			var short, failSync atomic.Bool
			dir := t.TempDir()
			l := buildReplaceLog(t, dir, options{openFile: faultyOpener(&short, &failSync)})
			defer l.Close()
			segs := l.Segments()
			from, to := segs[1].BaseOffset, segs[3].BaseOffset
			build, _ := filteredCopy(t, l, from, to)
			want := readStored(t, l)
			err := l.ReplaceSegments(from, to, func(w *SegmentWriter) error {
				if fault == "short write" {
					short.Store(true)
				} else {
					defer failSync.Store(true)
				}
				return build(w)
			})
			short.Store(false)
			failSync.Store(false)
			if !errors.Is(err, errInjected) {
				t.Fatalf("replace with a %s: %v", fault, err)
			}
			checkNoReplacementFiles(t, dir)
			checkContents(t, l, want)
			if _, err := l.Append(batchtest.Make(1, 10, 5000, 1), 1); err != nil {
				t.Fatalf("append after a failed replacement: %v", err)
			}
		})
	}
}
