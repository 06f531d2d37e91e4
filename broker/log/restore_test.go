package log

import (
	"os"
	"reflect"
	"testing"

	"millrace/internal/recordbatch"
)

// leaderBatches appends batches to a fresh log at the given leader epochs
// (one batch each) and returns the log and its stored bytes from offset 0.
func leaderBatches(t *testing.T, epochs []int32, batch func(i int) []byte) (*Log, []byte) {
	t.Helper()
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	t.Cleanup(func() { l.Close() })
	for i, e := range epochs {
		v, err := l.ValidateProduce(batch(i), l.now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendValidated(v, e); err != nil {
			t.Fatal(err)
		}
	}
	s, err := l.Read(0, 1<<20, l.EndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return l, b
}

// batchesFrom is the stored batches of b from offset on.
func batchesFrom(t *testing.T, b []byte, offset int64) []byte {
	t.Helper()
	for pos := 0; pos < len(b); {
		h, err := parseHeaderForTest(b[pos:])
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset >= offset {
			return b[pos:]
		}
		pos += h.Size()
	}
	return nil
}

// TestResetToRestartsEmptyWithEpochsAndProducers restarts a stale log at
// 20 with the epoch entries and producer snapshot of the remote segment
// before it (KIP-405's follower rebuild): it holds nothing, keeps the
// epochs that started below 20, the producer's sequence continues from
// the snapshot, and all of it survives a reopen.
func TestResetToRestartsEmptyWithEpochsAndProducers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	mustAppend(t, l, idempotentBatch(3, 0, 0, 4))
	const pid = 7
	snap := encodeProducerSnapshot(producerSnapshot{offset: 20, producers: map[int64]*producerEntry{
		pid: {epoch: 2, lastTimestamp: l.now().UnixMilli(), batches: []producerBatch{{firstSeq: 0, lastSeq: 9, firstOffset: 10, lastOffset: 19}}},
	}})
	epochs := []EpochEntry{{Epoch: 1, StartOffset: 5}, {Epoch: 3, StartOffset: 15}, {Epoch: 4, StartOffset: 25}}
	if err := l.ResetTo(20, epochs, snap); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if l.StartOffset() != 20 || l.EndOffset() != 20 || l.Size() != 0 {
			t.Fatalf("log [%d, %d) of %d bytes, want empty at 20", l.StartOffset(), l.EndOffset(), l.Size())
		}
		if e := l.LatestEpoch(); e != 3 {
			t.Fatalf("latest epoch %d, want 3 (4 starts after 20)", e)
		}
		if e, end := l.EndOffsetForEpoch(1); e != 1 || end != 15 {
			t.Fatalf("end of epoch 1: %d, %d; want 1, 15 (where epoch 3 started, remotely)", e, end)
		}
		got, err := l.Producers()
		if err != nil || len(got) != 1 || got[0].ID != pid || got[0].Epoch != 2 || got[0].LastSequence != 9 {
			t.Fatalf("producers %+v, %v; want producer %d at epoch 2, sequence 9", got, err, pid)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, DefaultConfig(), options{})
	defer l.Close()
	check(l)
	// The snapshot's last batch is a duplicate; the next sequence appends at 20.
	if info, err := appendProduced(t, l, idempotentBatch(pid, 2, 10, 1)); err != nil || info.Duplicate || info.FirstOffset != 20 {
		t.Fatalf("next sequence: %+v, %v", info, err)
	}
}

// TestResetToPendingSnapshot restarts at 2 with a snapshot of offset 4:
// the state is built from the copied batches until the log reaches 4,
// across a reopen, then it is the snapshot's plus the batches after it.
func TestResetToPendingSnapshot(t *testing.T) {
	t.Parallel()
	const a, b = 11, 12
	// The leader's log: a's batches at 0, 1, 2, 3, then b's at 4.
	leader, stored := leaderBatches(t, []int32{5, 5, 5, 6, 6}, func(i int) []byte {
		if i < 4 {
			return idempotentBatch(a, 0, int32(i), 1)
		}
		return idempotentBatch(b, 0, 0, 1)
	})
	if err := leader.Roll(); err != nil { // a roll writes the snapshot at 5
		t.Fatal(err)
	}
	snapAt4 := encodeProducerSnapshot(producerSnapshot{offset: 4, producers: map[int64]*producerEntry{
		a: {epoch: 0, lastTimestamp: leader.now().UnixMilli(), batches: []producerBatch{{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}}},
	}})

	dir := t.TempDir()
	l := openTest(t, dir, DefaultConfig(), options{})
	if err := l.ResetTo(2, []EpochEntry{{Epoch: 5, StartOffset: 0}}, snapAt4); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/" + pendingProducerSnapshotFile); err != nil {
		t.Fatalf("no pending snapshot kept: %v", err)
	}
	rest := batchesFrom(t, stored, 2)
	first, _ := parseHeaderForTest(rest)
	if _, err := l.AppendReplicated(rest[:first.Size()]); err != nil {
		t.Fatal(err)
	}
	got, err := l.Producers()
	if err != nil || len(got) != 1 || got[0].LastSequence != 2 {
		t.Fatalf("before the snapshot's offset: %+v, %v; want only the copied batch of producer %d", got, err, a)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, dir, DefaultConfig(), options{})
	defer l.Close()
	if _, err := l.AppendReplicated(rest[first.Size():]); err != nil {
		t.Fatal(err)
	}
	got, err = l.Producers()
	want := []int64{a, b}
	if err != nil || len(got) != 2 || got[0].ID != want[0] || got[1].ID != want[1] || got[0].LastSequence != 3 || got[1].LastSequence != 0 {
		t.Fatalf("after the snapshot's offset: %+v, %v; want %v at sequences 3 and 0", got, err, want)
	}
	if _, err := os.Stat(dir + "/" + pendingProducerSnapshotFile); !os.IsNotExist(err) {
		t.Fatalf("pending snapshot still there: %v", err)
	}
	if e, end := l.EndOffsetForEpoch(5); e != 5 || end != 3 {
		t.Fatalf("end of epoch 5: %d, %d; want 5, 3", e, end)
	}
	if l.LatestEpoch() != 6 {
		t.Fatalf("latest epoch %d, want 6", l.LatestEpoch())
	}
}

// TestResetToDropsPendingOnLeaderAppend: a replica elected before it
// reached the snapshot's offset writes its own history after it.
func TestResetToDropsPendingOnLeaderAppend(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	snap := encodeProducerSnapshot(producerSnapshot{offset: 9, producers: map[int64]*producerEntry{
		1: {epoch: 0, batches: []producerBatch{{0, 0, 8, 8}}},
	}})
	if err := l.ResetTo(5, nil, snap); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		mustAppend(t, l, idempotentBatch(2, 0, int32(l.EndOffset()-5), 1))
	}
	got, err := l.Producers()
	if err != nil || len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("producers %+v, %v; want only producer 2, whose batches the log holds", got, err)
	}
}

// TestResetToRefuses bad epoch entries and snapshots, leaving the log.
func TestResetToRefuses(t *testing.T) {
	t.Parallel()
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	mustAppend(t, l, idempotentBatch(3, 0, 0, 2))
	for name, call := range map[string]func() error{
		"epochs out of order": func() error { return l.ResetTo(9, []EpochEntry{{2, 5}, {1, 6}}, nil) },
		"bad snapshot":        func() error { return l.ResetTo(9, nil, []byte("MRPS junk")) },
		"negative offset":     func() error { return l.ResetTo(-1, nil, nil) },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if l.EndOffset() != 2 {
		t.Fatalf("a refused reset changed the log: end %d", l.EndOffset())
	}
}

// TestBatchAt finds the epoch of the batch holding an offset through
// the segment's files, as broker/tier reads a remote segment's objects.
func TestBatchAt(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 1 // an index entry per batch
	dir := t.TempDir()
	l := openTest(t, dir, cfg, options{})
	epochs := []int32{1, 1, 4, 4, 9}
	for i, e := range epochs {
		if _, err := l.Append(idempotentBatch(1, 0, int32(2*i), 2), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(segmentPath(dir, 0, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	index, err := os.ReadFile(segmentPath(dir, 0, indexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	for _, idx := range [][]byte{index, nil} {
		got = got[:0]
		for off := int64(0); off < 10; off += 2 {
			h, err := BatchAt(f, fi.Size(), idx, 0, off+1)
			if err != nil || h.BaseOffset != off {
				t.Fatalf("batch at %d: %+v, %v", off+1, h, err)
			}
			got = append(got, h.PartitionLeaderEpoch)
		}
		if !reflect.DeepEqual(got, epochs) {
			t.Fatalf("epochs %v (index of %d bytes), want %v", got, len(idx), epochs)
		}
	}
	if _, err := BatchAt(f, fi.Size(), index, 0, 10); err == nil {
		t.Fatal("an offset past the segment has an epoch")
	}
}

func parseHeaderForTest(b []byte) (BatchHeader, error) { return recordbatch.ParseHeader(b) }
