package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
	"millrace/internal/waitfor"
)

// faultyFile wraps a file and fails writes or syncs on demand.
type faultyFile struct {
	file
	shortWrite *atomic.Bool
	failSync   *atomic.Bool
}

var errInjected = errors.New("injected I/O error")

func (f faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if f.shortWrite.Load() && len(p) > 1 {
		n, _ := f.file.WriteAt(p[:len(p)/2], off)
		return n, errInjected
	}
	return f.file.WriteAt(p, off)
}

func (f faultyFile) Sync() error {
	if f.failSync.Load() {
		return errInjected
	}
	return f.file.Sync()
}

func faultyOpener(short, sync *atomic.Bool) openFileFunc {
	return func(path string, flag int, perm os.FileMode) (file, error) {
		f, err := openOSFile(path, flag, perm)
		if err != nil {
			return nil, err
		}
		return faultyFile{file: f, shortWrite: short, failSync: sync}, nil
	}
}

func TestStickyShortWrite(t *testing.T) {
	var short, failSync atomic.Bool
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{openFile: faultyOpener(&short, &failSync)})
	mustAppend(t, l, batchtest.Make(2, 20, 1, 1))
	size := l.Size()
	short.Store(true)
	if _, err := l.Append(batchtest.Make(2, 20, 1, 2), 0); !errors.Is(err, errInjected) {
		t.Fatalf("short write: %v", err)
	}
	short.Store(false)
	// Sticky: the disk works again, the log still refuses.
	if _, err := l.Append(batchtest.Make(2, 20, 1, 3), 0); !errors.Is(err, errInjected) {
		t.Fatalf("after short write: %v", err)
	}
	if l.EndOffset() != 2 || l.Size() != size {
		t.Fatalf("partial write visible: end %d size %d", l.EndOffset(), l.Size())
	}
	if got := len(readAllBatches(t, l, 0)); got != 1 {
		t.Fatalf("%d batches readable", got)
	}
	l.Close()
	// No clean marker after a failed write; the half batch was taken back.
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Fatalf("marker written after failure: %v", err)
	}
	l = openTest(t, dir, DefaultConfig(), options{})
	defer l.Close()
	if l.EndOffset() != 2 {
		t.Fatalf("reopened end %d", l.EndOffset())
	}
	if info := mustAppend(t, l, batchtest.Make(1, 5, 1, 1)); info.FirstOffset != 2 {
		t.Fatalf("append at %d", info.FirstOffset)
	}
}

func TestStickyFailedFsync(t *testing.T) {
	var short, failSync atomic.Bool
	cfg := DefaultConfig()
	cfg.FlushMessages = 3
	l := openTest(t, t.TempDir(), cfg, options{openFile: faultyOpener(&short, &failSync)})
	defer l.Close()
	mustAppend(t, l, batchtest.Make(2, 20, 1, 1))
	failSync.Store(true)
	if _, err := l.Append(batchtest.Make(2, 20, 1, 2), 0); !errors.Is(err, errInjected) {
		t.Fatalf("append that triggers a failing fsync: %v", err)
	}
	failSync.Store(false)
	if _, err := l.Append(batchtest.Make(1, 20, 1, 3), 0); !errors.Is(err, errInjected) {
		t.Fatalf("append after failed fsync: %v", err)
	}
	if err := l.Flush(); !errors.Is(err, errInjected) {
		t.Fatalf("flush after failed fsync: %v", err)
	}
}

func TestRetentionWhileReading(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4000
	cfg.RetentionBytes = 20000
	cfg.IndexIntervalBytes = 500
	cfg.FileDeleteDelay = 0 // files go when no Slice holds them
	l := openTest(t, t.TempDir(), cfg, options{now: clock.now})
	defer l.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	// Writer plus retention.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1500; i++ {
			b := batchtest.Make(3, 60, int64(i), byte(i))
			if _, err := l.Append(b, 0); err != nil {
				errs <- err
				break
			}
			if i%20 == 0 {
				if _, err := l.EnforceRetention(clock.now()); err != nil {
					errs <- err
					break
				}
			}
		}
		stop.Store(true)
	}()
	// Readers iterate from the start and check every batch's content.
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var off int64
			for !stop.Load() {
				if off < l.StartOffset() {
					off = l.StartOffset()
				}
				s, err := l.Read(off, 3000, l.EndOffset())
				if errors.Is(err, ErrOffsetOutOfRange) && off < l.StartOffset() {
					continue // retention moved past us between the two calls
				}
				if err != nil {
					errs <- err
					return
				}
				if s.Len() == 0 {
					s.Close()
					time.Sleep(100 * time.Microsecond)
					continue // caught up with the writer
				}
				// Let retention delete the segment under the open Slice.
				time.Sleep(time.Duration(off%3) * time.Millisecond)
				b, err := s.ReadAll()
				s.Close()
				if err != nil {
					errs <- err
					return
				}
				hs, err := testDecoder.Validate(b, maxInt, storedRules)
				if err != nil {
					errs <- err
					return
				}
				for _, h := range hs {
					// Batch i holds offsets 3i..3i+2 and timestamps from i.
					if h.FirstTimestamp != h.BaseOffset/3 {
						errs <- errors.New("read returned the wrong batch")
						return
					}
				}
				off = s.NextOffset()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l.StartOffset() == 0 || l.Size() > cfg.RetentionBytes+2*cfg.SegmentBytes {
		t.Fatalf("retention did not run: start %d size %d", l.StartOffset(), l.Size())
	}
	// Deleted files are gone once no Slice holds them.
	entries, _ := os.ReadDir(l.Dir())
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), deletedSuffix) {
			t.Fatalf("leftover %s", e.Name())
		}
	}
}

func TestRetentionByTimeWithTheActiveSegment(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 500
	cfg.Retention = time.Hour
	l := openTest(t, t.TempDir(), cfg, options{})
	defer l.Close()
	for i := 0; i < 10; i++ {
		mustAppend(t, l, batchtest.Make(1, 300, int64(i)*int64(time.Hour/time.Millisecond), byte(i)))
	}
	// Segment i's largest timestamp is i hours. At 10h, keep segments newer than 9h.
	now := time.UnixMilli(10 * int64(time.Hour/time.Millisecond))
	n, err := l.EnforceRetention(now)
	if err != nil || n != 9 || l.StartOffset() != 9 || len(l.Segments()) != 1 {
		t.Fatalf("deleted %d (%v), start %d, %d segments", n, err, l.StartOffset(), len(l.Segments()))
	}
	// The active segment goes too once all of it has expired, as in
	// Kafka: rolled, so an empty one stays at the end offset.
	if n, _ := l.EnforceRetention(now.Add(100 * time.Hour)); n != 1 || l.StartOffset() != 10 || l.EndOffset() != 10 || len(l.Segments()) != 1 {
		t.Fatalf("expired active segment: deleted %d, offsets [%d, %d)", n, l.StartOffset(), l.EndOffset())
	}
	// Retention after a restart uses the time index's last entry.
}

func TestLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	if e := l.LatestEpoch(); e != -1 {
		t.Fatalf("empty log epoch %d", e)
	}
	app := func(epoch int32) {
		if _, err := l.Append(batchtest.Make(2, 5, 1, 1), epoch); err != nil {
			t.Fatal(err)
		}
	}
	app(1) // 0-1
	app(1) // 2-3
	app(3) // 4-5
	app(5) // 6-7
	cases := []struct {
		ask       int32
		epoch     int32
		endOffset int64
	}{{5, 5, 8}, {3, 3, 6}, {4, 3, 6}, {1, 1, 4}, {0, 0, 0}, {6, -1, -1}, {-1, -1, -1}}
	for _, c := range cases {
		if e, o := l.EndOffsetForEpoch(c.ask); e != c.epoch || o != c.endOffset {
			t.Fatalf("epoch %d: got (%d, %d), want (%d, %d)", c.ask, e, o, c.epoch, c.endOffset)
		}
	}
	if err := l.TruncateTo(5); err != nil { // inside epoch 3's batch: cuts to 4
		t.Fatal(err)
	}
	if e := l.LatestEpoch(); e != 1 {
		t.Fatalf("after truncate latest epoch %d", e)
	}
	app(7)
	l.Close()
	l = openTest(t, dir, DefaultConfig(), options{})
	defer l.Close()
	if e, o := l.EndOffsetForEpoch(1); e != 1 || o != 4 {
		t.Fatalf("after restart epoch 1 ends at (%d, %d)", e, o)
	}
	if l.LatestEpoch() != 7 {
		t.Fatalf("latest %d", l.LatestEpoch())
	}
	// Replicated batches keep their epochs and offsets.
	b := batchtest.Make(2, 5, 1, 1)
	copy(b[offBaseOffset:], []byte{0, 0, 0, 0, 0, 0, 0, 6})
	copy(b[offLeaderEpoch:], []byte{0, 0, 0, 9})
	if _, err := l.AppendReplicated(b); err != nil {
		t.Fatal(err)
	}
	if l.LatestEpoch() != 9 || l.EndOffset() != 8 {
		t.Fatalf("replicated: epoch %d end %d", l.LatestEpoch(), l.EndOffset())
	}
	if _, err := l.AppendReplicated(b); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("replayed batch: %v", err)
	}
}

func TestConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	v := c.Values()
	want := map[string]string{"segment.bytes": "1073741824", "segment.ms": "604800000", "flush.ms": "9223372036854775807",
		"flush.messages": "9223372036854775807", "retention.bytes": "-1", "max.message.bytes": "1048588",
		"message.timestamp.type": "CreateTime", "file.delete.delay.ms": "60000", "segment.index.bytes": "10485760", "index.interval.bytes": "4096", "retention.ms": "604800000"}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("%s = %q, want %q", k, v[k], w)
		}
	}
	if len(ConfigNames()) != len(v) {
		t.Fatalf("names %v", ConfigNames())
	}
	// Round trip through Set.
	var d Config
	for k, val := range v {
		if err := d.Set(k, val); err != nil {
			t.Fatal(err)
		}
	}
	if d != c {
		t.Fatalf("round trip: %+v", d)
	}
	if err := d.Set("retention.ms", "-1"); err != nil || d.Retention >= 0 {
		t.Fatalf("unlimited retention: %v", err)
	}
	if err := d.Set("no.such", "1"); err == nil {
		t.Fatal("unknown name accepted")
	}
	if err := d.Set("segment.bytes", "x"); err == nil {
		t.Fatal("non-integer accepted")
	}
	d.SegmentBytes = 10
	d.MessageTimestampType = "Now"
	err := d.Validate()
	if err == nil || !strings.Contains(err.Error(), "segment.bytes") || !strings.Contains(err.Error(), "message.timestamp.type") {
		t.Fatalf("validate: %v", err)
	}
}

func TestManager(t *testing.T) {
	dir := t.TempDir()
	clock := &fakeClock{t: time.UnixMilli(100 * int64(time.Hour/time.Millisecond))}
	m, err := openManager(dir, DefaultConfig(), testLogger(t), options{now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 500
	cfg.Retention = time.Hour
	l, err := m.Create("clicks", 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := m.Create("clicks", 3, cfg); again != l {
		t.Fatal("Create did not return the existing log")
	}
	if _, err := m.Create("../evil", 0, cfg); err == nil {
		t.Fatal("bad topic accepted")
	}
	for i := 0; i < 5; i++ {
		mustAppend(t, l, batchtest.Make(1, 300, 1, byte(i))) // ancient timestamps
	}
	// The expired active segment waits for the high watermark.
	var highWatermark atomic.Int64
	highWatermark.Store(4)
	m.SetRetentionBound(func(TopicPartition) (int64, bool) { return highWatermark.Load(), true })
	m.Start(5 * time.Millisecond)
	waitStart := func(want int64) {
		t.Helper()
		waitfor.Until(t, 10*time.Second, fmt.Sprintf("background retention to start the log at %d", want), func() bool { return l.StartOffset() == want })
		if l.StartOffset() != want {
			t.Fatalf("background retention did not run: start %d, want %d", l.StartOffset(), want)
		}
	}
	waitStart(4)
	highWatermark.Store(5)
	waitStart(5)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = OpenManager(dir, DefaultConfig(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	l, ok := m.Get("clicks", 3)
	if !ok || l.EndOffset() != 5 || len(m.All()) != 1 {
		t.Fatalf("reopened manager: %v", ok)
	}
	if err := m.Remove("clicks", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "clicks-3")); !os.IsNotExist(err) {
		t.Fatalf("data not removed: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
