package log

import (
	"path/filepath"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// TestRetentionDeletesExpiredActiveSegment: as Kafka, a non-empty active
// segment whose records are all older than retention.ms is rolled and
// deleted, once every record is below the high watermark (and fsynced on
// a millrace.flush.on.ack topic); the log keeps an empty active segment at
// its end offset, takes appends there, and reopens so.
func TestRetentionDeletesExpiredActiveSegment(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	old := now.Add(-2 * time.Hour).UnixMilli()
	cases := []struct {
		name          string
		policy        string
		timestamps    []int64 // one batch each, in the active segment
		highWatermark int64
		flushOnAck    bool
		wantDeleted   int
	}{
		{"all records expired", PolicyDelete, []int64{old, old}, -1, false, 1},
		{"compact,delete", "compact,delete", []int64{old}, -1, false, 1},
		{"a recent record", PolicyDelete, []int64{old, now.UnixMilli()}, -1, false, 0},
		{"compact only", PolicyCompact, []int64{old}, -1, false, 0},
		{"not all replicated", PolicyDelete, []int64{old, old}, 1, false, 0},
		{"all replicated", PolicyDelete, []int64{old, old}, 2, false, 1},
		{"not fsynced on a flush-on-ack topic", PolicyDelete, []int64{old}, -1, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Retention = time.Hour
			cfg.CleanupPolicy = c.policy
			cfg.FlushOnAck = c.flushOnAck
			dir := filepath.Join(t.TempDir(), "t-0")
			l := openTest(t, dir, cfg, options{now: func() time.Time { return now }})
			defer func() { l.Close() }()
			batch := func(ts int64) []byte {
				if c.policy == PolicyDelete {
					return batchtest.Make(1, 100, ts, 0)
				}
				return keyedBatch(t, ts, codecNone, "k=v")
			}
			for _, ts := range c.timestamps {
				mustAppend(t, l, batch(ts))
			}
			end := l.EndOffset()
			n, err := l.EnforceRetentionBelow(now, c.highWatermark)
			if err != nil || n != c.wantDeleted {
				t.Fatalf("deleted %d segments (%v), want %d", n, err, c.wantDeleted)
			}
			segs := l.Segments()
			if c.wantDeleted == 0 {
				if l.StartOffset() != 0 || len(segs) != 1 || segs[0].Size == 0 {
					t.Fatalf("kept log: start %d, segments %+v", l.StartOffset(), segs)
				}
				return
			}
			if l.StartOffset() != end || l.EndOffset() != end || len(segs) != 1 || segs[0].BaseOffset != end || segs[0].Size != 0 {
				t.Fatalf("after deleting the active segment: offsets [%d, %d), segments %+v; want one empty segment at %d", l.StartOffset(), l.EndOffset(), segs, end)
			}
			info := mustAppend(t, l, batch(now.UnixMilli()))
			if info.FirstOffset != end {
				t.Fatalf("next append at %d, want %d", info.FirstOffset, end)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, dir, cfg, options{now: func() time.Time { return now }})
			if l.StartOffset() != end || l.EndOffset() != end+1 {
				t.Fatalf("reopened with offsets [%d, %d), want [%d, %d)", l.StartOffset(), l.EndOffset(), end, end+1)
			}
		})
	}
}

// TestRetentionDeletesActiveSegmentOnceFsynced: on a flush-on-ack topic
// the expired active segment goes once its records are fsynced.
func TestRetentionDeletesActiveSegmentOnceFsynced(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	cfg := DefaultConfig()
	cfg.Retention = time.Hour
	cfg.FlushOnAck = true
	l := openTest(t, filepath.Join(t.TempDir(), "t-0"), cfg, options{now: func() time.Time { return now }})
	defer l.Close()
	mustAppend(t, l, batchtest.Make(1, 100, now.Add(-2*time.Hour).UnixMilli(), 0))
	if n, err := l.EnforceRetention(now); err != nil || n != 0 {
		t.Fatalf("before the fsync: deleted %d (%v)", n, err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := l.EnforceRetention(now); err != nil || n != 1 || l.StartOffset() != 1 {
		t.Fatalf("after the fsync: deleted %d (%v), start offset %d", n, err, l.StartOffset())
	}
}
