package tier

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"millrace/broker/log"
	"millrace/internal/recordbatch"
	"millrace/internal/recordbatch/batchtest"
)

// producerBatch is a one-record batch of idempotent producer pid at
// sequence seq.
func producerBatch(pid int64, seq int32) []byte {
	b := batchtest.Make(1, 100, time.Now().UnixMilli(), byte(seq))
	be := binary.BigEndian
	be.PutUint64(b[recordbatch.PosProducerID:], uint64(pid))
	be.PutUint16(b[recordbatch.PosProducerEpoch:], 0)
	be.PutUint32(b[recordbatch.PosBaseSequence:], uint32(seq))
	return batchtest.FixCRC(b)
}

// TestRebuildReplica: a new replica of a partition whose leader uploaded
// [0,2] [3,5] [6,7] and keeps [6, ...) locally restarts empty at 6 with
// the remote end, the epoch in effect at 5 (where epoch 3 began) and the
// producer snapshot uploaded with [3,5]; having copied the leader's tail
// it has the leader's producers and epoch boundaries.
func TestRebuildReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := log.DefaultConfig()
	cfg.RemoteStorageEnable, cfg.Retention = true, -1
	leaderLog, err := log.Open(filepath.Join(t.TempDir(), "t-0"), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leaderLog.Close() })
	epochs := [][]int32{{1, 1, 1}, {2, 2, 3}, {3, 3}, {4}} // three closed segments, then the active one
	seq := map[int64]int32{}
	for i, segment := range epochs {
		for _, epoch := range segment {
			pid := int64(1 + leaderLog.EndOffset()%2) // producers 1 and 2 alternate
			if _, err := leaderLog.Append(producerBatch(pid, seq[pid]), epoch); err != nil {
				t.Fatal(err)
			}
			seq[pid]++
		}
		if i < len(epochs)-1 {
			if err := leaderLog.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.manager(nil, leader(leaderLog, 4)).RunOnce(context.Background())
	if want := [][2]int64{{0, 2}, {3, 5}, {6, 7}}; !reflect.DeepEqual(ranges(e.state()), want) {
		t.Fatalf("remote ranges %v, want %v", ranges(e.state()), want)
	}

	follower := openTieredLog(t) // a stale replica: one record at 0
	p := Partition{Topic: "t", TopicID: testTopicID, Partition: 0, Log: follower}
	m := e.manager(nil)
	if err := m.RebuildReplica(context.Background(), p, 6); err != nil {
		t.Fatal(err)
	}
	if follower.StartOffset() != 6 || follower.EndOffset() != 6 || follower.RemoteEnd() != 8 {
		t.Fatalf("follower [%d, %d), remote end %d; want empty at 6, remote end 8", follower.StartOffset(), follower.EndOffset(), follower.RemoteEnd())
	}
	if got := follower.LatestEpoch(); got != 3 {
		t.Fatalf("latest epoch %d, want 3 (in effect at 5)", got)
	}
	if e, end := follower.EndOffsetForEpoch(2); e != 2 || end != 5 {
		t.Fatalf("end of epoch 2: %d, %d; want 2, 5", e, end)
	}

	// Copy the leader's tail as the fetcher does, a segment per read.
	for follower.EndOffset() < leaderLog.EndOffset() {
		s, err := leaderLog.Read(follower.EndOffset(), 1<<20, leaderLog.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		batches, err := s.ReadAll()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendReplicated(batches); err != nil {
			t.Fatal(err)
		}
	}
	want, err := leaderLog.Producers()
	if err != nil {
		t.Fatal(err)
	}
	got, err := follower.Producers()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("follower's producers %+v, %v; want the leader's %+v", got, err, want)
	}
	for epoch := int32(1); epoch <= 4; epoch++ {
		le, lend := leaderLog.EndOffsetForEpoch(epoch)
		fe, fend := follower.EndOffsetForEpoch(epoch)
		if epoch >= 2 && (le != fe || lend != fend) {
			t.Errorf("end of epoch %d: follower %d, %d; leader %d, %d", epoch, fe, fend, le, lend)
		}
	}
}

// TestRebuildReplicaWithoutRemote: with nothing uploaded, or the leader's
// local start below every remote segment, the replica restarts at the
// leader's local start with no epochs and no producers.
func TestRebuildReplicaWithoutRemote(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	follower := openTieredLog(t, 2)
	p := Partition{Topic: "t", TopicID: testTopicID, Partition: 0, Log: follower}
	if err := e.manager(nil).RebuildReplica(context.Background(), p, 10); err != nil {
		t.Fatal(err)
	}
	if follower.StartOffset() != 10 || follower.EndOffset() != 10 || follower.LatestEpoch() != log.UndefinedEpoch || follower.RemoteEnd() != 0 {
		t.Fatalf("follower [%d, %d) at epoch %d, remote end %d", follower.StartOffset(), follower.EndOffset(), follower.LatestEpoch(), follower.RemoteEnd())
	}
	got, err := follower.Producers()
	if err != nil || len(got) != 0 {
		t.Fatalf("producers %+v, %v", got, err)
	}
}

// TestSegmentHolding picks the segment a reader of the offset would
// (state.go: the first whose last offset reaches it), overlaps included.
func TestSegmentHolding(t *testing.T) {
	t.Parallel()
	st := State{LogStartOffset: 2, Segments: []Segment{{BaseOffset: 0, LastOffset: 4}, {BaseOffset: 3, LastOffset: 9}, {BaseOffset: 12, LastOffset: 15}}}
	for _, c := range []struct {
		offset int64
		base   int64
		found  bool
	}{{1, 0, false}, {2, 0, true}, {4, 0, true}, {5, 3, true}, {9, 3, true}, {10, 0, false}, {15, 12, true}, {16, 0, false}} {
		s, ok := segmentHolding(st, c.offset)
		if ok != c.found || ok && s.BaseOffset != c.base {
			t.Errorf("offset %d: segment at %d, %v; want at %d, %v", c.offset, s.BaseOffset, ok, c.base, c.found)
		}
	}
}
