package log

import (
	"context"
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

// syncCounter opens files whose Sync on a segment's .log file is counted,
// reported on synced and, while gate is set, held until gate is closed.
type syncCounter struct {
	logSyncs atomic.Int64
	synced   chan struct{} // one value per .log fsync, dropped when full
	mu       sync.Mutex
	gate     chan struct{} // guarded by mu
	entered  chan struct{} // a held Sync has started
}

func newSyncCounter() *syncCounter {
	return &syncCounter{synced: make(chan struct{}, 1024), entered: make(chan struct{}, 16)}
}

type countedFile struct {
	file
	c *syncCounter
}

func (f countedFile) Sync() error {
	f.c.mu.Lock()
	gate := f.c.gate
	f.c.mu.Unlock()
	if gate != nil {
		f.c.entered <- struct{}{}
		<-gate
	}
	err := f.file.Sync()
	f.c.logSyncs.Add(1)
	select {
	case f.c.synced <- struct{}{}:
	default:
	}
	return err
}

func (c *syncCounter) open(path string, flag int, perm os.FileMode) (file, error) {
	f, err := openOSFile(path, flag, perm)
	if err != nil || !strings.HasSuffix(path, logSuffix) {
		return f, err
	}
	return countedFile{file: f, c: c}, nil
}

// reset forgets the fsyncs so far (Open fsyncs a new log's first segment).
func (c *syncCounter) reset() {
	c.logSyncs.Store(0)
	for len(c.synced) > 0 {
		<-c.synced
	}
}

// waitSynced waits for the next counted fsync, failing after a generous
// deadline (only a broken timer takes that long).
func (c *syncCounter) waitSynced(t *testing.T) {
	t.Helper()
	select {
	case <-c.synced:
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync within 10 s")
	}
}

// waitDurable waits for the durable offset to reach want: the fsync counted
// by waitSynced is followed by the bookkeeping of the flush that made it.
func waitDurable(t *testing.T, l *Log, want int64) {
	t.Helper()
	waitfor.Until(t, 10*time.Second, fmt.Sprintf("durable offset %d", want), func() bool { return l.DurableOffset() == want })
}

func TestFlushMsFiresOnItsOwn(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	cfg := DefaultConfig()
	cfg.FlushInterval = 50 * time.Millisecond
	// No Manager, so no retention check: only the log's own timer flushes.
	l := openTest(t, t.TempDir(), cfg, options{openFile: c.open})
	c.reset()
	defer l.Close()
	appended := time.Now()
	mustAppend(t, l, batchtest.Make(3, 20, 1, 1))
	if l.DurableOffset() != 0 {
		t.Fatalf("durable offset %d right after the append", l.DurableOffset())
	}
	c.waitSynced(t)
	if waited := time.Since(appended); waited < cfg.FlushInterval {
		t.Fatalf("fsynced %v after the append, before flush.ms %v", waited, cfg.FlushInterval)
	}
	waitDurable(t, l, 3)
	if rp, _, err := readOffsetCheckpoint(filepath.Join(l.Dir(), recoveryPointFile)); err != nil || rp != 3 {
		t.Fatalf("recovery point %d (%v), want 3", rp, err)
	}
	// The next append starts a new flush.ms period, and is flushed too.
	mustAppend(t, l, batchtest.Make(2, 20, 1, 2))
	c.waitSynced(t)
	waitDurable(t, l, 5)
}

func TestFlushMsCountsFromTheOldestUnflushedAppend(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	c := newSyncCounter()
	cfg := DefaultConfig()
	cfg.FlushInterval = 20 * time.Millisecond
	l := openTest(t, t.TempDir(), cfg, options{openFile: c.open, now: clock.now})
	c.reset()
	defer l.Close()
	mustAppend(t, l, batchtest.Make(1, 20, 1, 1))
	// The timer fires in real time, finds the append (by the log's clock)
	// not yet flush.ms old and re-arms, until the clock moves.
	if err := l.FlushIfDue(clock.now().Add(cfg.FlushInterval - time.Millisecond)); err != nil || c.logSyncs.Load() != 0 {
		t.Fatalf("flushed before flush.ms: %d fsyncs, %v", c.logSyncs.Load(), err)
	}
	clock.advance(cfg.FlushInterval)
	c.waitSynced(t)
	waitDurable(t, l, 1)
}

func TestFlushMsLoweredWhileArmed(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	cfg := DefaultConfig()
	cfg.FlushInterval = time.Hour
	l := openTest(t, t.TempDir(), cfg, options{openFile: c.open})
	c.reset()
	defer l.Close()
	mustAppend(t, l, batchtest.Make(2, 20, 1, 1))
	cfg.FlushInterval = 10 * time.Millisecond
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	c.waitSynced(t)
	waitDurable(t, l, 2)
}

func TestFlushMessagesFsyncsAtTheCount(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	cfg := DefaultConfig()
	cfg.FlushMessages = 5
	l := openTest(t, t.TempDir(), cfg, options{openFile: c.open})
	c.reset()
	defer l.Close()
	mustAppend(t, l, batchtest.Make(2, 20, 1, 1))
	mustAppend(t, l, batchtest.Make(2, 20, 1, 2))
	if n := c.logSyncs.Load(); n != 0 || l.DurableOffset() != 0 {
		t.Fatalf("4 of 5 records: %d fsyncs, durable offset %d", n, l.DurableOffset())
	}
	mustAppend(t, l, batchtest.Make(2, 20, 1, 3))
	if n := c.logSyncs.Load(); n != 1 || l.DurableOffset() != 6 {
		t.Fatalf("6 of 5 records: %d fsyncs, durable offset %d; want 1 and 6", n, l.DurableOffset())
	}
}

func TestFlushTimerStopsWithClose(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.FlushInterval = time.Millisecond
	dir := t.TempDir()
	for i := 0; i < 20; i++ {
		l := openTest(t, dir, cfg, options{})
		mustAppend(t, l, batchtest.Make(1, 20, 1, byte(i)))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// A firing after Close would find the log closed; one during it
		// is waited for. Either way the next Open sees a clean log.
	}
	l := openTest(t, dir, cfg, options{})
	defer l.Close()
	if l.EndOffset() != 20 || l.recoveredSegments.Load() != 0 {
		t.Fatalf("end %d, %d segments recovered; want 20 and a clean open", l.EndOffset(), l.recoveredSegments.Load())
	}
}

func TestSyncToGroupCommit(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	l := openTest(t, t.TempDir(), DefaultConfig(), options{openFile: c.open})
	c.reset()
	defer l.Close()
	ctx := context.Background()

	gate := make(chan struct{})
	c.mu.Lock()
	c.gate = gate
	c.mu.Unlock()
	first := mustAppend(t, l, batchtest.Make(1, 100, 1, 0))
	firstDone := make(chan error, 1)
	go func() { firstDone <- l.SyncTo(ctx, first.LastOffset+1) }()
	<-c.entered // the first fsync is under way, held
	c.mu.Lock()
	c.gate = nil
	c.mu.Unlock()

	// Producers keep appending during the fsync, then wait for durability.
	const producers = 8
	errs := make(chan error, producers)
	for i := range producers {
		go func() {
			info, err := l.Append(batchtest.Make(1, 100, 1, byte(i+1)), 1)
			if err == nil {
				err = l.SyncTo(ctx, info.LastOffset+1)
			}
			errs <- err
		}()
	}
	waitfor.Until(t, 10*time.Second, "every append while the fsync is held (appends must not wait for it)", func() bool { return l.EndOffset() == producers+1 })
	if l.DurableOffset() != 0 {
		t.Fatalf("durable offset %d before any fsync finished", l.DurableOffset())
	}
	close(gate)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// One fsync for the first batch, one for the eight appended meanwhile.
	if n := c.logSyncs.Load(); n != 2 {
		t.Fatalf("%d fsyncs of the segment for %d waiters, want 2", n, producers+1)
	}
	if l.DurableOffset() != producers+1 {
		t.Fatalf("durable offset %d, want %d", l.DurableOffset(), producers+1)
	}
	// Already durable: no fsync.
	if err := l.SyncTo(ctx, 3); err != nil || c.logSyncs.Load() != 2 {
		t.Fatalf("SyncTo below the durable offset: %v, %d fsyncs", err, c.logSyncs.Load())
	}
}

func TestSyncToAfterTruncation(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	l := openTest(t, t.TempDir(), DefaultConfig(), options{openFile: c.open})
	c.reset()
	defer l.Close()
	ctx := context.Background()
	for i := range 4 {
		mustAppend(t, l, batchtest.Make(2, 20, 1, byte(i)))
	}
	if err := l.SyncTo(ctx, 8); err != nil || l.DurableOffset() != 8 {
		t.Fatalf("SyncTo(8): %v, durable offset %d", err, l.DurableOffset())
	}
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if l.DurableOffset() != 4 {
		t.Fatalf("durable offset %d after truncating to 4", l.DurableOffset())
	}
	// Offsets 4..7 again, but new records, not fsynced yet.
	mustAppend(t, l, batchtest.Make(4, 20, 1, 9))
	if l.DurableOffset() != 4 {
		t.Fatalf("durable offset %d claims the re-appended records", l.DurableOffset())
	}
	before := c.logSyncs.Load()
	if err := l.SyncTo(ctx, 8); err != nil || c.logSyncs.Load() != before+1 || l.DurableOffset() != 8 {
		t.Fatalf("SyncTo(8) after re-append: %v, %d fsyncs, durable offset %d", err, c.logSyncs.Load()-before, l.DurableOffset())
	}
	if err := l.SyncTo(ctx, 9); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("SyncTo beyond the end: %v", err)
	}
}

func TestSyncToAcrossARoll(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 300
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{openFile: c.open})
	c.reset()
	for i := range 6 {
		mustAppend(t, l, batchtest.Make(1, 100, 1, byte(i)))
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("%d segments, want several", len(l.Segments()))
	}
	if err := l.SyncTo(context.Background(), 6); err != nil {
		t.Fatal(err)
	}
	// Every segment written since the last fsync was fsynced once.
	if n := c.logSyncs.Load(); n != int64(len(l.Segments())) {
		t.Fatalf("%d fsyncs for %d segments", n, len(l.Segments()))
	}
}

func TestSyncToFailedFsyncIsSticky(t *testing.T) {
	t.Parallel()
	var short, failSync atomic.Bool
	l := openTest(t, t.TempDir(), DefaultConfig(), options{openFile: faultyOpener(&short, &failSync)})
	defer l.Close()
	mustAppend(t, l, batchtest.Make(2, 20, 1, 1))
	failSync.Store(true)
	if err := l.SyncTo(context.Background(), 2); !errors.Is(err, errInjected) {
		t.Fatalf("SyncTo with a failing fsync: %v", err)
	}
	failSync.Store(false)
	if l.DurableOffset() != 0 {
		t.Fatalf("durable offset %d after a failed fsync", l.DurableOffset())
	}
	if _, err := l.Append(batchtest.Make(1, 20, 1, 2), 0); !errors.Is(err, errInjected) {
		t.Fatalf("append after a failed fsync: %v", err)
	}
	if err := l.SyncTo(context.Background(), 2); !errors.Is(err, errInjected) {
		t.Fatalf("SyncTo after a failed fsync: %v", err)
	}
}

func TestSyncToWaiterGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	l := openTest(t, t.TempDir(), DefaultConfig(), options{openFile: c.open})
	c.reset()
	defer l.Close()
	gate := make(chan struct{})
	c.mu.Lock()
	c.gate = gate
	c.mu.Unlock()
	mustAppend(t, l, batchtest.Make(1, 20, 1, 1))
	held := make(chan error, 1)
	go func() { held <- l.SyncTo(context.Background(), 1) }()
	<-c.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.SyncTo(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter with a cancelled context: %v", err)
	}
	c.mu.Lock()
	c.gate = nil
	c.mu.Unlock()
	close(gate)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

func TestFlushTimerStopWaitsForAFiring(t *testing.T) {
	t.Parallel()
	var timer flushTimer
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	timer.arm(0, func() {
		close(entered)
		<-release
		finished.Store(true)
	})
	<-entered
	stopped := make(chan bool)
	go func() {
		timer.stop()
		stopped <- finished.Load()
	}()
	close(release)
	if !<-stopped {
		t.Fatal("stop returned while the timer's function was still running")
	}
	// Stopped for good: arming again schedules nothing.
	timer.arm(0, func() { t.Error("fired after stop") })
	timer.stop()
}

func TestSyncToWhileRetentionDeletesTheSegment(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 300
	cfg.RetentionBytes = 0 // every segment but the active one goes
	cfg.FileDeleteDelay = 0
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{openFile: c.open})
	defer l.Close()
	for i := range 6 {
		mustAppend(t, l, batchtest.Make(1, 100, 1, byte(i)))
	}
	gate := make(chan struct{})
	c.mu.Lock()
	c.gate = gate
	c.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- l.SyncTo(context.Background(), 6) }()
	<-c.entered // fsyncing the oldest segment, outside the append lock
	c.mu.Lock()
	c.gate = nil
	c.mu.Unlock()
	deleted, err := l.EnforceRetention(time.Now())
	if err != nil || deleted == 0 {
		t.Fatalf("retention during the fsync: %d deleted, %v", deleted, err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.DurableOffset() != 6 {
		t.Fatalf("durable offset %d, want 6", l.DurableOffset())
	}
	// The fsync's reference kept the deleted files open; its release
	// removed them.
	left, err := filepath.Glob(filepath.Join(dir, "*"+deletedSuffix))
	if err != nil || len(left) != 0 {
		t.Fatalf("deleted segment files left behind: %v %v", left, err)
	}
}

func TestTurningFlushOnAckOnFsyncsFirst(t *testing.T) {
	t.Parallel()
	c := newSyncCounter()
	cfg := DefaultConfig()
	l := openTest(t, t.TempDir(), cfg, options{openFile: c.open})
	defer l.Close()
	c.reset()
	mustAppend(t, l, batchtest.Make(3, 20, 1, 1))
	if l.DurableOffset() != 0 {
		t.Fatalf("durable offset %d before any fsync", l.DurableOffset())
	}
	cfg.FlushOnAck = true
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	// What consumers could see before stays visible after.
	if l.DurableOffset() != 3 || c.logSyncs.Load() != 1 {
		t.Fatalf("durable offset %d after %d fsyncs, want 3 after 1", l.DurableOffset(), c.logSyncs.Load())
	}
	// Setting it again fsyncs nothing.
	mustAppend(t, l, batchtest.Make(1, 20, 1, 2))
	if err := l.SetConfig(cfg); err != nil || c.logSyncs.Load() != 1 {
		t.Fatalf("setting it again: %v, %d fsyncs", err, c.logSyncs.Load())
	}
}
