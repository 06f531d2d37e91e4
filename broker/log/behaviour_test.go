package log

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

func TestReadSemantics(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	big := batchtest.Make(10, 500, 1, 1) // ~5 KB, offsets 0..9
	small := batchtest.Make(2, 10, 2, 2) // offsets 10..11
	mustAppend(t, l, big)
	mustAppend(t, l, small)
	mustAppend(t, l, small) // 12..13

	// First batch whole even above maxBytes; reading from inside a batch returns it whole.
	s, err := l.Read(5, 100, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(big) || s.FirstOffset() != 0 || s.NextOffset() != 10 {
		t.Fatalf("got len %d first %d next %d", s.Len(), s.FirstOffset(), s.NextOffset())
	}
	s.Close()
	// maxBytes stops before a batch that does not fit.
	s, _ = l.Read(0, len(big)+len(small), l.EndOffset())
	if s.NextOffset() != 12 || s.Len() != len(big)+len(small) {
		t.Fatalf("maxBytes: next %d len %d", s.NextOffset(), s.Len())
	}
	s.Close()
	// maxOffset (high watermark) excludes batches whose last offset reaches it.
	s, _ = l.Read(0, 1<<20, 12)
	if s.NextOffset() != 12 {
		t.Fatalf("maxOffset 12: next %d", s.NextOffset())
	}
	s.Close()
	s, _ = l.Read(10, 1<<20, 11)
	if s.Len() != 0 || s.NextOffset() != 10 {
		t.Fatalf("maxOffset inside first batch: len %d next %d", s.Len(), s.NextOffset())
	}
	s.Close()
	// At the end: empty; beyond or below: out of range.
	s, err = l.Read(14, 100, 14)
	if err != nil || s.Len() != 0 || s.NextOffset() != 14 {
		t.Fatalf("read at end: %v len %d", err, s.Len())
	}
	s.Close()
	if _, err := l.Read(15, 100, 15); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past end: %v", err)
	}
	if _, err := l.Read(-1, 100, 15); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
}

func TestAppendRejectsBadBatchesAtomically(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	good := batchtest.Make(3, 20, 1, 1)
	bad := batchtest.Make(3, 20, 1, 2)
	bad[len(bad)-1] ^= 1
	_, err := l.Append(append(append([]byte(nil), good...), bad...), 0)
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(err, ErrCorruptBatch) || be.Position != len(good) {
		t.Fatalf("got %v", err)
	}
	if l.EndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("partial append: end %d size %d", l.EndOffset(), l.Size())
	}
	tooBig := batchtest.Make(1, 2000, 1, 1)
	cfg := l.Config()
	cfg.MaxMessageBytes = 1000
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(tooBig, 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("got %v", err)
	}
	info, err := l.Append(append([]byte(nil), good...), 0)
	if err != nil || info.FirstOffset != 0 || info.LastOffset != 2 || info.Records != 3 {
		t.Fatalf("info %+v err %v", info, err)
	}
}

func TestTruncateThenAppend(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	cfg.IndexIntervalBytes = 100
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{})
	for i := 0; i < 40; i++ {
		mustAppend(t, l, batchtest.Make(2, 40, int64(i), byte(i))) // batch i: offsets 2i, 2i+1
	}
	nseg := len(l.Segments())
	// Inside a batch: rounds down to its base.
	if err := l.TruncateTo(31); err != nil {
		t.Fatal(err)
	}
	if l.EndOffset() != 30 {
		t.Fatalf("end %d, want 30", l.EndOffset())
	}
	if len(l.Segments()) >= nseg {
		t.Fatalf("later segments not deleted: %d of %d", len(l.Segments()), nseg)
	}
	info := mustAppend(t, l, batchtest.Make(3, 40, 100, 7))
	if info.FirstOffset != 30 {
		t.Fatalf("append after truncate at %d", info.FirstOffset)
	}
	hs := readAllBatches(t, l, 0)
	if last := hs[len(hs)-1]; last.BaseOffset != 30 || last.Records != 3 {
		t.Fatalf("last batch %+v", last)
	}
	// Survives a clean restart and an unclean one.
	l.Close()
	l = openTest(t, dir, cfg, options{})
	if l.EndOffset() != 33 || len(readAllBatches(t, l, 0)) != len(hs) {
		t.Fatalf("after restart end %d", l.EndOffset())
	}
	// Below the start offset: empties the log and restarts there.
	if err := l.AdvanceStartOffset(10); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(4); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 4 || l.EndOffset() != 4 {
		t.Fatalf("full truncate: start %d end %d", l.StartOffset(), l.EndOffset())
	}
	if info := mustAppend(t, l, batchtest.Make(1, 5, 1, 1)); info.FirstOffset != 4 {
		t.Fatalf("append at %d", info.FirstOffset)
	}
	l.Close()
}

func TestRollBySizeAndAge(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	cfg.SegmentAge = time.Hour
	l := openTest(t, t.TempDir(), cfg, options{now: clock.now})
	defer l.Close()
	b := batchtest.Make(1, 300, 1, 1) // ~380 bytes
	mustAppend(t, l, b)
	mustAppend(t, l, b)
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments after 2 batches", n)
	}
	mustAppend(t, l, b) // would exceed 1000
	segs := l.Segments()
	if len(segs) != 2 || segs[1].BaseOffset != 2 || segs[0].Size != int64(2*len(b)) {
		t.Fatalf("size roll: %+v", segs)
	}
	clock.advance(59 * time.Minute)
	mustAppend(t, l, batchtest.Make(1, 10, 1, 1))
	if n := len(l.Segments()); n != 2 {
		t.Fatalf("rolled too early: %d", n)
	}
	clock.advance(2 * time.Minute)
	mustAppend(t, l, batchtest.Make(1, 10, 1, 1))
	if segs := l.Segments(); len(segs) != 3 || segs[2].BaseOffset != 4 {
		t.Fatalf("age roll: %+v", segs)
	}
	// A batch larger than a whole segment is refused.
	if _, err := l.Append(batchtest.Make(1, 1200, 1, 1), 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("got %v", err)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600
	cfg.IndexIntervalBytes = 50
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{})
	// batch i: 3 records at offsets 3i..3i+2, timestamps 100i, 100i+1, 100i+2.
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batchtest.Make(3, 20, int64(100*i), byte(i)))
	}
	check := func(l *Log) {
		t.Helper()
		for _, c := range []struct{ ts, off, gotTs int64 }{
			{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 100}, {101, 4, 101}, {1500, 45, 1500},
			{1502, 47, 1502}, {2902, 89, 2902}, {2903, -1, -1}, {-5, 0, 0},
		} {
			off, ts, err := l.OffsetForTimestamp(c.ts)
			if err != nil || off != c.off || ts != c.gotTs {
				t.Fatalf("ts %d: got (%d, %d, %v), want (%d, %d)", c.ts, off, ts, err, c.off, c.gotTs)
			}
		}
	}
	check(l)
	l.Close()
	l = openTest(t, dir, cfg, options{})
	defer l.Close()
	check(l)
	// Log start offset hides earlier records.
	if err := l.AdvanceStartOffset(10); err != nil {
		t.Fatal(err)
	}
	if off, _, _ := l.OffsetForTimestamp(0); off != 10 {
		t.Fatalf("after start offset 10: %d", off)
	}
}

func TestLogAppendTime(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(123456)}
	cfg := DefaultConfig()
	cfg.MessageTimestampType = LogAppendTime
	l := openTest(t, t.TempDir(), cfg, options{now: clock.now})
	defer l.Close()
	info := mustAppend(t, l, batchtest.Make(2, 10, 5, 1))
	if info.LogAppendTime != 123456 || info.MaxTimestamp != 123456 {
		t.Fatalf("info %+v", info)
	}
	hs := readAllBatches(t, l, 0) // validates the rewritten CRC
	if !hs[0].LogAppendTime() || hs[0].MaxTimestamp != 123456 {
		t.Fatalf("stored header %+v", hs[0])
	}
	if off, ts, _ := l.OffsetForTimestamp(100000); off != 0 || ts != 123456 {
		t.Fatalf("by time: %d %d", off, ts)
	}
}

func TestCleanRestartDoesNotRescan(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{})
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batchtest.Make(2, 50, int64(i), byte(i)))
	}
	end := l.EndOffset()
	l.Close()
	l = openTest(t, dir, cfg, options{})
	if n := l.recoveredSegments.Load(); n != 0 || l.EndOffset() != end {
		t.Fatalf("clean open scanned %d segments, end %d want %d", n, l.EndOffset(), end)
	}
	// The marker is consumed: a crash now (no Close) makes the next open scan.
	mustAppend(t, l, batchtest.Make(1, 5, 1, 1))
	if _, err := os.Stat(dir + "/" + cleanShutdownFile); !os.IsNotExist(err) {
		t.Fatalf("marker still present: %v", err)
	}
	l2 := openTest(t, dir, cfg, options{})
	defer l2.Close()
	if l2.recoveredSegments.Load() == 0 || l2.EndOffset() != end+1 {
		t.Fatalf("unclean open: scanned %d end %d", l2.recoveredSegments.Load(), l2.EndOffset())
	}
	l.Close()
}

func TestDamagedIndexRebuiltOnCleanOpen(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 100
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{})
	for i := 0; i < 30; i++ {
		mustAppend(t, l, batchtest.Make(2, 50, int64(i), byte(i)))
	}
	l.Close()
	// A torn last entry (not a multiple of 8 bytes).
	p := segmentPath(dir, 0, indexSuffix)
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)-3], 0o644)
	l = openTest(t, dir, cfg, options{})
	defer l.Close()
	if l.EndOffset() != 60 || len(readAllBatches(t, l, 0)) != 30 {
		t.Fatalf("end %d", l.EndOffset())
	}
}

// writeCountingConn is a socket for Slice.WriteTo whose Write counts the
// bytes written through it. It has no ReadFrom, so a fallback copy cannot
// bypass Write.
type writeCountingConn struct {
	syscall.Conn // the socket's descriptor, for sendfile
	w            io.Writer
	written      int
}

func (c *writeCountingConn) Write(p []byte) (int, error) {
	c.written += len(p)
	return c.w.Write(p)
}

// TestSendfileOverTCP: a Slice copied to a TCP socket is sent whole by
// sendfile(2), while another copy of the same segment runs, and arrives
// intact.
func TestSendfileOverTCP(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	var want []byte
	for i := 0; i < 200; i++ {
		b := batchtest.Make(5, 200, int64(i), byte(i))
		mustAppend(t, l, b)
	}
	s, err := l.Read(0, 1<<30, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err = s.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := any(conn).(*net.TCPConn); !ok {
		t.Fatal("not a TCP conn")
	}
	// Two concurrent copies of overlapping Slices must not share a file position.
	s2, _ := l.Read(0, 1<<30, l.EndOffset())
	defer s2.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	var discardErr error
	go func() {
		defer wg.Done()
		_, discardErr = s2.WriteTo(io.Discard)
	}()
	// The socket with its Write counted: a byte that does not go through
	// sendfile(2) goes through Write (the fallback copies with it).
	counted := &writeCountingConn{Conn: conn.(syscall.Conn), w: conn}
	n, err := io.Copy(counted, s)
	if counted.written != 0 {
		t.Fatalf("%d of %d bytes were written through the socket's Write, not sent by sendfile", counted.written, len(want))
	}
	conn.Close()
	wg.Wait()
	if err != nil || n != int64(len(want)) || discardErr != nil {
		t.Fatalf("copy: %d %v %v", n, err, discardErr)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("received %d bytes differing from the log (%d)", len(b), len(want))
	}
}
