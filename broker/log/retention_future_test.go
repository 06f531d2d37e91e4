package log

import (
	"os"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// TestRetentionPastFutureSegment: a segment whose records claim the year
// 9999 (appended before message.timestamp.after.max.ms bounded them) no
// longer keeps the old segments after it from time retention.
func TestRetentionPastFutureSegment(t *testing.T) {
	hour := time.Hour.Milliseconds()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	year9999 := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	old := now.UnixMilli() - 30*24*hour

	cases := []struct {
		name string
		// timestamps of the records, one batch (and segment) each; the
		// last segment is the active one.
		timestamps []int64
		// futureWritten is the last-modified time of the 9999 segments.
		futureWritten time.Time
		wantDeleted   int
	}{
		{"a future segment before old ones", []int64{year9999, old, old, now.UnixMilli()}, now, 3},
		{"two future segments before an old one", []int64{year9999, year9999, old, now.UnixMilli()}, now, 3},
		{"a future segment written long ago, before a recent one", []int64{year9999, now.UnixMilli(), now.UnixMilli()}, now.Add(-30 * 24 * time.Hour), 1},
		{"a future segment written recently, before a recent one", []int64{year9999, now.UnixMilli(), now.UnixMilli()}, now, 0},
		{"old segments before a future one", []int64{old, old, year9999, now.UnixMilli()}, now, 2},
		{"a future segment within after.max is trusted", []int64{now.UnixMilli() + hour, old, now.UnixMilli()}, now.Add(-30 * 24 * time.Hour), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SegmentBytes = 500
			cfg.Retention = 7 * 24 * time.Hour
			// As before the bound existed, so the 9999 batches get in.
			cfg.MessageTimestampAfterMax = never
			dir := t.TempDir()
			l := openTest(t, dir, cfg, options{now: func() time.Time { return now }})
			defer l.Close()
			for i, ts := range c.timestamps {
				mustAppend(t, l, batchtest.Make(1, 300, ts, byte(i)))
			}
			if got := len(l.Segments()); got != len(c.timestamps) {
				t.Fatalf("%d segments, want one per batch (%d)", got, len(c.timestamps))
			}
			for _, s := range l.Segments() {
				if s.MaxTimestamp == year9999 {
					if err := os.Chtimes(segmentPath(dir, s.BaseOffset, logSuffix), c.futureWritten, c.futureWritten); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := l.SetConfig(DefaultConfig().withRetention(cfg)); err != nil {
				t.Fatal(err)
			}
			n, err := l.EnforceRetention(now)
			if err != nil || n != c.wantDeleted || l.StartOffset() != int64(c.wantDeleted) {
				t.Fatalf("deleted %d segments (%v), start offset %d; want %d deleted", n, err, l.StartOffset(), c.wantDeleted)
			}
		})
	}
}

// withRetention is c with the segment and retention settings of from.
func (c Config) withRetention(from Config) Config {
	c.SegmentBytes, c.Retention = from.SegmentBytes, from.Retention
	return c
}
