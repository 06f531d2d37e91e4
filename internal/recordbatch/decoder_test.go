package recordbatch

import (
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// TestDecodersShareNoState: a Decoder's limit on decompressions at once
// is its own. With every slot of one Decoder taken, another still decodes;
// and the first decodes again once its slot is given back.
func TestDecodersShareNoState(t *testing.T) {
	now := time.Now().UnixMilli()
	batch := batchtest.Compressed(t, "zstd", []batchtest.Record{{Value: []byte("x")}}, now)
	busy, other := NewDecoder(1), NewDecoder(1)
	busy.acquire()
	if _, err := other.Validate(batch, defaultMaxMessageBytes, defaultRules(now)); err != nil {
		t.Fatalf("a second decoder, the first one's slot taken: %v", err)
	}
	busy.release()
	if _, err := busy.Validate(batch, defaultMaxMessageBytes, defaultRules(now)); err != nil {
		t.Fatalf("the first decoder, its slot given back: %v", err)
	}
}

// TestNewDecoderConcurrency: the bound is what was asked, or the CPUs
// (at least two) when nothing was.
func TestNewDecoderConcurrency(t *testing.T) {
	if got := cap(NewDecoder(3).slots); got != 3 {
		t.Errorf("NewDecoder(3) decodes %d at once", got)
	}
	if got := cap(NewDecoder(0).slots); got < 2 {
		t.Errorf("NewDecoder(0) decodes %d at once, want at least 2", got)
	}
}

// TestBatchtestWalkWindow: the builders' WalkWindow, which makes records
// larger than the walk window, is this package's.
func TestBatchtestWalkWindow(t *testing.T) {
	if batchtest.WalkWindow != walkWindow {
		t.Fatalf("batchtest.WalkWindow %d, walkWindow %d", batchtest.WalkWindow, walkWindow)
	}
}
