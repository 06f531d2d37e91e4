package tier

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"millrace/broker/log"
)

// TestExpireCount: total retention over the remote segments, as Kafka's
// RemoteLogManager applies it (KIP-405): below the log start offset,
// retention.ms by each segment's largest timestamp, then retention.bytes
// over the remote segments plus the local records not yet remote, always
// from the oldest.
func TestExpireCount(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	hoursAgo := func(h int) int64 { return now.Add(-time.Duration(h) * time.Hour).UnixMilli() }
	segments := []Segment{
		{BaseOffset: 0, LastOffset: 9, MaxTimestamp: hoursAgo(30), Size: 100},
		{BaseOffset: 10, LastOffset: 19, MaxTimestamp: hoursAgo(20), Size: 100},
		{BaseOffset: 15, LastOffset: 29, MaxTimestamp: hoursAgo(10), Size: 100}, // straddles
	}
	cases := []struct {
		name           string
		logStart       int64
		retention      time.Duration
		retentionBytes int64
		localBytes     int64
		wantN          int
		wantStart      int64
	}{
		{"nothing expired", 0, 48 * time.Hour, -1, 0, 0, 0},
		{"unlimited", 0, -1, -1, 0, 0, 0},
		{"retention.ms takes the older two", 0, 15 * time.Hour, -1, 0, 2, 20},
		{"retention.ms takes all", 0, time.Hour, -1, 0, 3, 30},
		{"retention.ms stops at the first young segment", 0, 25 * time.Hour, -1, 0, 1, 10},
		{"retention.bytes counts local bytes too", 0, -1, 200, 100, 2, 20},
		{"retention.bytes keeps a segment it cannot wholly spare", 0, -1, 250, 100, 1, 10},
		{"retention.bytes within the limit", 0, -1, 400, 100, 0, 0},
		{"log start offset (DeleteRecords) inside the second", 12, -1, -1, 0, 1, 12},
		{"log start offset past the second", 20, -1, -1, 0, 2, 20},
	}
	for _, c := range cases {
		cfg := log.DefaultConfig()
		cfg.Retention, cfg.RetentionBytes = c.retention, c.retentionBytes
		n, start := expireCount(State{LogStartOffset: c.logStart, Segments: segments}, cfg, c.localBytes, now)
		if n != c.wantN || start != c.wantStart {
			t.Errorf("%s: expire %d, start %d; want %d, %d", c.name, n, start, c.wantN, c.wantStart)
		}
	}
}

// TestTotalRetentionRemovesStateThenObjects: expired remote segments
// leave the state, their objects the store, and the log start offset
// moves past them, locally too.
func TestTotalRetentionRemovesStateThenObjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 2, 2) // [0,1] [2,3] [4,5] active [6]
	m := e.manager(nil, leader(l, 1))
	m.RunOnce(context.Background())
	if len(e.state().Segments) != 3 {
		t.Fatalf("uploaded %v", ranges(e.state()))
	}
	cfg := l.Config()
	cfg.RetentionBytes = l.Size() - l.Segments()[0].Size // one closed segment too many
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	m.RunOnce(context.Background())
	st := e.state()
	if want := [][2]int64{{2, 3}, {4, 5}}; !slices.Equal(ranges(st), want) || st.LogStartOffset != 2 {
		t.Fatalf("after retention: %v from %d, want %v from 2", ranges(st), st.LogStartOffset, want)
	}
	for _, name := range e.objects() {
		if strings.Contains(name, "/00000000000000000000-") {
			t.Fatalf("expired object %s left", name)
		}
	}
	if got := len(e.objects()); got != 2*len(suffixes) {
		t.Fatalf("%d objects, want %d", got, 2*len(suffixes))
	}
	if l.StartOffset() != 2 {
		t.Fatalf("local log start %d, want the remote one, 2", l.StartOffset())
	}
}

// TestDeleteRecordsRemovesRemoteData: DeleteRecords below the local
// start moves the remote log start and removes what lies wholly below.
func TestDeleteRecordsRemovesRemoteData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2, 2, 2)
	p := leader(l, 1)
	m := e.manager(nil, p)
	m.RunOnce(context.Background())
	start, err := m.DeleteRecords(context.Background(), p, 3)
	if err != nil || start != 3 {
		t.Fatalf("DeleteRecords: %d, %v", start, err)
	}
	st := e.state()
	if want := [][2]int64{{2, 3}, {4, 5}}; !slices.Equal(ranges(st), want) || st.LogStartOffset != 3 {
		t.Fatalf("after DeleteRecords: %v from %d", ranges(st), st.LogStartOffset)
	}
	if got := len(e.objects()); got != 2*len(suffixes) {
		t.Fatalf("%d objects, want %d", got, 2*len(suffixes))
	}
	if start, err := m.DeleteRecords(context.Background(), p, 1); err != nil || start != 3 {
		t.Fatalf("DeleteRecords below the start: %d, %v; want 3", start, err)
	}
}

// TestDeletedTopicRemoved: the controller removes the objects and state
// of a topic that no longer exists once its state is older than the
// grace, and keeps those of live topics.
func TestDeletedTopicRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(nil, leader(openTieredLog(t, 2), 1))
	m.RunOnce(context.Background())
	gone := leader(openTieredLog(t, 2), 1)
	gone.Topic, gone.TopicID = "gone", [16]byte{9}
	e.manager(nil, gone).RunOnce(context.Background())
	if len(e.objects()) != 2*len(suffixes) {
		t.Fatalf("objects %v", e.objects())
	}

	m.RunOnce(context.Background()) // within the grace: kept
	if _, _, exists, _ := ReadState(e.coord, "gone", 0); !exists {
		t.Fatal("state of the deleted topic removed within the grace")
	}
	m.now = func() time.Time { return time.Now().Add(2 * m.cfg.SweepGrace) }
	m.RunOnce(context.Background())
	if _, _, exists, _ := ReadState(e.coord, "gone", 0); exists {
		t.Fatal("state of the deleted topic kept")
	}
	if ok, _, _ := e.coord.Exists(Root + "/gone"); ok {
		t.Fatal("topic node of the deleted topic kept")
	}
	for _, name := range e.objects() {
		if !strings.HasPrefix(name, TopicPrefix("t", EncodeTopicID(testTopicID))) {
			t.Fatalf("object %s of the deleted topic kept", name)
		}
	}
	if len(e.state().Segments) != 1 || len(e.objects()) != len(suffixes) {
		t.Fatalf("live topic's data: %v, %v", ranges(e.state()), e.objects())
	}
}

// TestDeletedTopicWithoutStateRemoved: a leader that published a
// segment's objects and crashed before the partition's first state write
// leaves objects no state names; once the topic is deleted, the
// controller, which saw the topic's ID, removes them after the grace
// (and only then), while a re-created topic of the same name keeps its own.
func TestDeletedTopicWithoutStateRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := openTieredLog(t, 2)
	crashing := &failingCoord{Store: e.coord, fail: true}
	e.manager(crashing, leader(l, 1)).RunOnce(context.Background())
	if _, _, exists, _ := ReadState(e.coord, "t", 0); exists || len(e.objects()) != len(suffixes) {
		t.Fatalf("want objects without a state; state exists %v, objects %v", exists, e.objects())
	}

	topics := map[string][16]byte{"t": testTopicID}
	cfg := DefaultConfig()
	cfg.Enable, cfg.URL = true, "file://"+e.store.Root()
	controller, err := New(cfg, e.store, e.coord, Host{
		Partitions: func() []Partition { return nil },
		TopicIDs:   func() map[string][16]byte { return maps.Clone(topics) },
		Controller: func() bool { return true },
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	controller.now = func() time.Time { return start }
	controller.RunOnce(context.Background()) // sees the topic

	// Deleted, and re-created under a new ID with objects of its own.
	recreated := leader(openTieredLog(t, 2), 1)
	recreated.TopicID = [16]byte{7}
	topics["t"] = recreated.TopicID
	e.manager(nil, recreated).RunOnce(context.Background())
	controller.RunOnce(context.Background())
	if got := len(e.objects()); got != 2*len(suffixes) {
		t.Fatalf("%d objects right after the deletion, want both topics' %d: the grace protects uploads under way", got, 2*len(suffixes))
	}

	controller.now = func() time.Time { return start.Add(2 * cfg.SweepGrace) }
	controller.RunOnce(context.Background())
	old := TopicPrefix("t", EncodeTopicID(testTopicID))
	for _, name := range e.objects() {
		if strings.HasPrefix(name, old) {
			t.Fatalf("object %s of the deleted topic kept", name)
		}
	}
	if got := len(e.objects()); got != len(suffixes) {
		t.Fatalf("%d objects left, want the re-created topic's %d", got, len(suffixes))
	}
	controller.mu.Lock()
	defer controller.mu.Unlock()
	if len(controller.vanished) != 0 {
		t.Fatalf("still tracking %v after removing everything", controller.vanished)
	}
}
