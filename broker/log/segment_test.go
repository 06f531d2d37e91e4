package log

import (
	"os"
	"testing"
)

// A new segment over stale files (left by a crash, say) starts empty, and
// one over no files creates them empty.
func TestNewEmptySegmentReplacesStaleFiles(t *testing.T) {
	dir := t.TempDir()
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.WriteFile(segmentPath(dir, 5, suffix), []byte("stale bytes"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, base := range []int64{5, 9} {
		s, err := newEmptySegment(dir, base, openOSFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			fi, err := os.Stat(segmentPath(dir, base, suffix))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != 0 {
				t.Errorf("segment %d: %s file has %d bytes, want 0", base, suffix, fi.Size())
			}
		}
		if s.size != 0 || s.nextOffset != base || len(s.index) != 0 || !s.loaded {
			t.Errorf("segment %d: size %d next %d index %d loaded %v", base, s.size, s.nextOffset, len(s.index), s.loaded)
		}
		if err := s.release(); err != nil {
			t.Fatal(err)
		}
	}
}
