package tier

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"millrace/store"
)

// TestUploadRecordsClosedSegments: the leader uploads every closed
// segment below the high watermark, each with its five objects, records
// them in order, and tells the log how far it is remote; the active
// segment and anything at or above the high watermark stay local.
func TestUploadRecordsClosedSegments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 3, 1) // [0,1] [2,4] [5] and the active [6]
	p := leader(l, 3)
	p.HighWatermark = 5 // [5] is not wholly committed
	m := e.manager(nil, p)
	m.RunOnce(context.Background())

	st := e.state()
	if want := [][2]int64{{0, 1}, {2, 4}}; !slices.Equal(ranges(st), want) {
		t.Fatalf("remote ranges %v, want %v", ranges(st), want)
	}
	if st.TopicID != EncodeTopicID(testTopicID) || st.LeaderEpoch != 3 || st.LogStartOffset != 0 || st.End() != 5 {
		t.Fatalf("state %+v", st)
	}
	for _, seg := range st.Segments {
		if seg.LeaderEpoch != 3 || seg.MaxTimestamp < 0 {
			t.Errorf("segment %+v", seg)
		}
		e.checkLogObject(l, seg)
	}
	if got := len(e.objects()); got != 2*len(suffixes) {
		t.Fatalf("%d objects, want %d: %v", got, 2*len(suffixes), e.objects())
	}
	if l.RemoteEnd() != 5 {
		t.Fatalf("RemoteEnd %d, want 5", l.RemoteEnd())
	}
	if want := "t-" + EncodeTopicID(testTopicID) + "/0/00000000000000000002-00000000000000000004"; st.Segments[1].Key != want {
		t.Fatalf("key %q, want %q", st.Segments[1].Key, want)
	}

	// The high watermark passes [5]; the active segment still stays.
	p.HighWatermark = 7
	m = e.manager(nil, p)
	m.RunOnce(context.Background())
	if want := [][2]int64{{0, 1}, {2, 4}, {5, 5}}; !slices.Equal(ranges(e.state()), want) {
		t.Fatalf("remote ranges %v, want %v", ranges(e.state()), want)
	}
}

// TestFollowerLearnsRemoteEnd: a follower uploads nothing but lets its
// local retention delete what the leader recorded.
func TestFollowerLearnsRemoteEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.manager(nil, leader(openTieredLog(t, 2, 2), 1)).RunOnce(context.Background())
	follower := leader(openTieredLog(t, 1, 3), 1)
	follower.Leader = false
	before := e.state()
	e.manager(nil, follower).RunOnce(context.Background())
	if follower.Log.RemoteEnd() != 4 {
		t.Fatalf("follower's RemoteEnd %d, want 4", follower.Log.RemoteEnd())
	}
	if !slices.Equal(ranges(e.state()), ranges(before)) {
		t.Fatalf("a follower changed the state: %v", ranges(e.state()))
	}
}

// TestCrashBetweenObjectsAndState: a leader that publishes a segment's
// objects but dies before recording them leaves only unreferenced
// objects. Its successor's upload of the same range lands on the same
// names (store.ErrExists, checked), so nothing is duplicated; objects no
// successor re-uploads are what the sweep removes once past the grace.
func TestCrashBetweenObjectsAndState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 2)
	crashing := &failingCoord{Store: e.coord, fail: true}
	m := e.manager(crashing, leader(l, 1))
	m.RunOnce(context.Background())
	if st := e.state(); len(st.Segments) != 0 {
		t.Fatalf("state recorded %v despite the failed write", ranges(st))
	}
	if got := len(e.objects()); got != len(suffixes) {
		t.Fatalf("%d objects after the crash, want one segment's %d", got, len(suffixes))
	}
	if l.RemoteEnd() != 0 {
		t.Fatalf("RemoteEnd %d before anything was recorded", l.RemoteEnd())
	}

	// The sweep within the grace keeps them: the upload may be under way.
	sweeper := e.manager(nil, leader(l, 2))
	if n, err := sweeper.sweep(context.Background(), PartitionPrefix("t", EncodeTopicID(testTopicID), 0), e.state()); err != nil || n != 0 {
		t.Fatalf("sweep within the grace removed %d (%v)", n, err)
	}
	// Past the grace they go.
	sweeper.now = func() time.Time { return time.Now().Add(2 * sweeper.cfg.SweepGrace) }
	if n, err := sweeper.sweep(context.Background(), PartitionPrefix("t", EncodeTopicID(testTopicID), 0), e.state()); err != nil || n != len(suffixes) {
		t.Fatalf("sweep past the grace removed %d (%v), want %d", n, err, len(suffixes))
	}
	if objs := e.objects(); len(objs) != 0 {
		t.Fatalf("left after the sweep: %v", objs)
	}

	// Crash again, then a new leader re-uploads over the leftovers.
	m.RunOnce(context.Background())
	next := e.manager(nil, leader(l, 2))
	next.RunOnce(context.Background())
	st := e.state()
	if want := [][2]int64{{0, 1}, {2, 3}}; !slices.Equal(ranges(st), want) {
		t.Fatalf("remote ranges %v, want %v", ranges(st), want)
	}
	if got := len(e.objects()); got != 2*len(suffixes) {
		t.Fatalf("%d objects, want %d: the re-upload stored copies", got, 2*len(suffixes))
	}
	for _, seg := range st.Segments {
		e.checkLogObject(l, seg)
	}
}

// TestLeaderChangeDoesNotDuplicate: a new leader whose segment boundaries
// differ continues after the highest remote offset, uploading the
// segment that straddles it whole, and never records a range twice; the
// deposed leader, running again, is refused by the leader epoch.
func TestLeaderChangeDoesNotDuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := openTieredLog(t, 2, 2, 2)    // [0,1] [2,3] [4,5] active [6]
	successor := openTieredLog(t, 3, 4) // [0,2] [3,6] active [7]
	oldLeader := leader(old, 1)
	oldLeader.HighWatermark = 4 // only [0,1] [2,3] are committed
	e.manager(nil, oldLeader).RunOnce(context.Background())
	if want := [][2]int64{{0, 1}, {2, 3}}; !slices.Equal(ranges(e.state()), want) {
		t.Fatalf("old leader's ranges %v, want %v", ranges(e.state()), want)
	}

	e.manager(nil, leader(successor, 2)).RunOnce(context.Background())
	st := e.state()
	if want := [][2]int64{{0, 1}, {2, 3}, {3, 6}}; !slices.Equal(ranges(st), want) {
		t.Fatalf("ranges after the leader change %v, want %v", ranges(st), want)
	}
	if st.LeaderEpoch != 2 || st.Segments[2].LeaderEpoch != 2 {
		t.Fatalf("state %+v", st)
	}
	if successor.RemoteEnd() != 7 {
		t.Fatalf("successor's RemoteEnd %d, want 7", successor.RemoteEnd())
	}

	// The deposed leader learns of a higher high watermark but may not write.
	oldLeader.HighWatermark = 7
	deposed := e.manager(nil, oldLeader)
	w, err := deposed.openWriter(oldLeader)
	if !errors.Is(err, errConflict) || w != nil {
		t.Fatalf("deposed leader's writer: %v, %v; want a conflict", w, err)
	}
	deposed.RunOnce(context.Background())
	if !slices.Equal(ranges(e.state()), ranges(st)) {
		t.Fatalf("deposed leader changed the state to %v", ranges(e.state()))
	}
}

// TestStaleTopicStateWaits: a state left by an earlier topic of the same
// name (another topic ID) is neither used nor overwritten.
func TestStaleTopicStateWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := writeState(e.coord, "t", 0, State{TopicID: "old", Segments: []Segment{{BaseOffset: 0, LastOffset: 9, Key: "t-old/0/x"}}}, 0, false); err != nil {
		t.Fatal(err)
	}
	l := openTieredLog(t, 2)
	e.manager(nil, leader(l, 1)).RunOnce(context.Background())
	if st := e.state(); st.TopicID != "old" || len(e.objects()) != 0 || l.RemoteEnd() != 0 {
		t.Fatalf("stale state used: %+v, objects %v", st, e.objects())
	}
}

// downStore is an object store that stopped answering.
type downStore struct{ store.Store }

func (downStore) Create(context.Context, string) (store.Object, error) {
	return nil, errors.New("injected: the object store does not answer")
}

// TestStoreDownLocalRetentionWaits: while the object store fails, uploads
// count errors and record nothing, so the log's local retention keeps
// every segment; once it answers, the next round uploads them.
func TestStoreDownLocalRetentionWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 2)
	cfg := l.Config()
	cfg.LocalRetentionBytes = 0
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	m := e.manager(nil, leader(l, 1))
	m.store = downStore{e.store}
	m.RunOnce(context.Background())
	if got := testutil.ToFloat64(m.metrics.uploadErrors); got != 1 {
		t.Fatalf("upload errors %v, want 1", got)
	}
	if _, err := l.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 0 || len(e.state().Segments) != 0 {
		t.Fatalf("with the store down: local start %d, remote %v", l.StartOffset(), ranges(e.state()))
	}

	m.store = e.store
	m.RunOnce(context.Background())
	if _, err := l.EnforceRetention(time.Now()); err != nil {
		t.Fatal(err)
	}
	if l.StartOffset() != 4 || len(e.state().Segments) != 2 {
		t.Fatalf("with the store back: local start %d, remote %v", l.StartOffset(), ranges(e.state()))
	}
	if got := testutil.ToFloat64(m.metrics.uploadedSegments); got != 2 {
		t.Fatalf("uploaded segments %v, want 2", got)
	}
}
