package log

import (
	"path/filepath"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
	"millrace/internal/waitfor"
)

// A segment retention deletes keeps its files, renamed *.deleted, until
// file.delete.delay.ms has passed, and they are unlinked then; closing
// the log removes the ones still waiting.
func TestDeletedSegmentFilesWaitTheDelay(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 300
	cfg.FileDeleteDelay = time.Hour
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{})
	defer l.Close()
	deletedLogs := func() int {
		m, err := filepath.Glob(filepath.Join(dir, "*"+logSuffix+deletedSuffix))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	retain := func(delay time.Duration) int {
		t.Helper()
		for i := range 4 {
			mustAppend(t, l, batchtest.Make(1, 100, 1, byte(i)))
		}
		cfg.RetentionBytes = 0 // every segment but the active one goes
		cfg.FileDeleteDelay = delay
		if err := l.SetConfig(cfg); err != nil {
			t.Fatal(err)
		}
		n, err := l.EnforceRetention(time.Now())
		if err != nil || n == 0 {
			t.Fatalf("retention deleted %d segments: %v", n, err)
		}
		return n
	}

	held := retain(time.Hour)
	if got := deletedLogs(); got != held {
		t.Fatalf("%d *.log.deleted files after retention deleted %d segments with an hour's delay", got, held)
	}
	gone := retain(50 * time.Millisecond)
	if got := deletedLogs(); got != held+gone {
		t.Fatalf("%d *.log.deleted files right after the second retention, want %d", got, held+gone)
	}
	waitfor.Until(t, 10*time.Second, "the segments deleted with a 50 ms delay unlinked", func() bool {
		return deletedLogs() == held
	})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := deletedLogs(); got != 0 {
		t.Fatalf("%d *.log.deleted files after the log closed", got)
	}
}
