package log

import (
	"os"
	"path/filepath"
	"testing"

	"millrace/internal/recordbatch/batchtest"
)

// buildCrashLog writes batches into a log with small segments and returns
// the directory (closed uncleanly: no marker) and the batch boundaries
// (file position within the active segment and next offset) of the active
// segment.
func buildCrashLog(t *testing.T, cfg Config) (dir string, activeBase int64, ends []int64, nexts []int64) {
	dir = t.TempDir()
	l := openTest(t, dir, cfg, options{})
	for i := 0; i < 120; i++ {
		mustAppend(t, l, batchtest.Make(1+i%4, 30+i%50, int64(1000+i), byte(i)))
		if i == 60 {
			// Everything so far is durable; recovery starts from here.
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	active := segs[len(segs)-1]
	// Batch boundaries of the active segment.
	var pos int64
	for _, h := range readAllBatches(t, l, active.BaseOffset) {
		pos += int64(h.Size())
		ends = append(ends, pos)
		nexts = append(nexts, h.NextOffset())
	}
	// Persist indexes so the copy looks like a crashed broker's directory,
	// but do not Close: there is no clean-shutdown marker.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	return dir, active.BaseOffset, ends, nexts
}

// checkRecovered reopens dir and checks that the log ends at wantEnd, every
// surviving offset is readable, and appends continue densely.
func checkRecovered(t *testing.T, dir string, cfg Config, wantEnd int64) {
	t.Helper()
	l := openTest(t, dir, cfg, options{})
	defer l.Close()
	if l.recoveredSegments.Load() == 0 {
		t.Fatal("unclean open did not scan")
	}
	if got := l.EndOffset(); got != wantEnd {
		t.Fatalf("recovered end offset %d, want %d", got, wantEnd)
	}
	// Every offset reads and lands in the batch that holds it.
	for off := l.StartOffset(); off < wantEnd; off++ {
		s, err := l.Read(off, 1, wantEnd)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := s.ReadAll()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		hs, err := testDecoder.Validate(b, maxInt, storedRules)
		if err != nil || len(hs) != 1 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
			t.Fatalf("read %d: headers %+v err %v", off, hs, err)
		}
	}
	info, err := l.Append(batchtest.Make(3, 10, 5000, 9), 2)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != wantEnd {
		t.Fatalf("append after recovery at %d, want %d", info.FirstOffset, wantEnd)
	}
	if got := len(readAllBatches(t, l, l.StartOffset())); got == 0 {
		t.Fatal("no batches after recovery")
	}
}

func crashConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 150
	return cfg
}

func TestCrashRecoveryTornTail(t *testing.T) {
	cfg := crashConfig()
	src, base, ends, nexts := buildCrashLog(t, cfg)

	// Cut at many byte positions inside the last few batches.
	first := 0
	if len(ends) > 4 {
		first = len(ends) - 4
	}
	startPos := int64(0)
	if first > 0 {
		startPos = ends[first-1]
	}
	for cut := startPos; cut <= ends[len(ends)-1]; cut += 11 {
		dst := filepath.Join(t.TempDir(), "p-0")
		copyDir(t, src, dst)
		if err := os.Truncate(segmentPath(dst, base, logSuffix), cut); err != nil {
			t.Fatal(err)
		}
		want := base
		for i, e := range ends {
			if e <= cut {
				want = nexts[i]
			}
		}
		checkRecovered(t, dst, cfg, want)
	}
}

func TestCrashRecoveryFlippedBytes(t *testing.T) {
	cfg := crashConfig()
	src, base, ends, nexts := buildCrashLog(t, cfg)
	first := max(len(ends)-3, 0)
	for bi := first; bi < len(ends); bi++ {
		start := int64(0)
		if bi > 0 {
			start = ends[bi-1]
		}
		// Flip bytes in the header (except baseOffset/epoch, which no check
		// covers for the first batch... they are checked by offset sequence)
		// and in the body.
		for pos := start + offLength; pos < ends[bi]; pos += 9 {
			if pos >= start+offLeaderEpoch && pos < start+offMagic {
				continue // partitionLeaderEpoch is covered by nothing, as in Kafka
			}
			dst := filepath.Join(t.TempDir(), "p-0")
			copyDir(t, src, dst)
			p := segmentPath(dst, base, logSuffix)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[pos] ^= 0x5a
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			want := base
			if bi > 0 {
				want = nexts[bi-1]
			}
			checkRecovered(t, dst, cfg, want)
		}
	}
}

func TestCrashRecoveryDropsLaterSegments(t *testing.T) {
	cfg := crashConfig()
	src, _, _, _ := buildCrashLog(t, cfg)
	dst := filepath.Join(t.TempDir(), "p-0")
	copyDir(t, src, dst)
	// Remove the recovery point: recovery scans everything, and a corrupt
	// batch in the second segment drops every later segment.
	if err := os.Remove(filepath.Join(dst, recoveryPointFile)); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, src, cfg, options{})
	segs := l.Segments()
	l.Close()
	os.Remove(filepath.Join(src, cleanShutdownFile))
	second := segs[1]
	p := segmentPath(dst, second.BaseOffset, logSuffix)
	data, _ := os.ReadFile(p)
	data[batchHeaderSize+3] ^= 0xff // inside the first batch's records
	os.WriteFile(p, data, 0o644)
	checkRecovered(t, dst, cfg, second.BaseOffset)
	for _, s := range segs[2:] {
		if _, err := os.Stat(segmentPath(dst, s.BaseOffset, logSuffix)); !os.IsNotExist(err) {
			t.Fatalf("segment %d survived corruption before it: %v", s.BaseOffset, err)
		}
	}
}
