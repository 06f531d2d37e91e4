package cluster

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"millrace/broker/coord"
)

// openThreeBrokers opens a cluster as broker 0 with brokers 1 and 2
// registered beside it.
func openThreeBrokers(t *testing.T) *env {
	t.Helper()
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"1", "2"} {
		s, err := e.server.Session()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Create("/brokers/ids/"+id, []byte(`{"host":"h`+id+`","port":9092}`), coord.Ephemeral); err != nil {
			t.Fatal(err)
		}
	}
	e.waitBrokers(3)
	return e
}

// TestAlterReassignmentsMergesAndCancels: moves join a pending request,
// a new target replaces a pending one and keeps the original replicas, a
// cancel goes back to them, and bad moves fail alone.
func TestAlterReassignmentsMergesAndCancels(t *testing.T) {
	e := openThreeBrokers(t)
	if _, err := e.c.CreateTopic(TopicSpec{Name: "moving", Partitions: -1, ReplicationFactor: -1,
		Assignment: map[int32][]int32{0: {0, 1}, 1: {1, 2}}}, false); err != nil {
		t.Fatal(err)
	}
	request := func() string {
		t.Helper()
		data, _, err := e.store.Get(reassignPath)
		if errors.Is(err, coord.ErrNoNode) {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	alter := func(want []error, moves ...Reassignment) {
		t.Helper()
		errs, err := AlterReassignments(e.store, moves)
		if err != nil {
			t.Fatal(err)
		}
		for i := range moves {
			if !errors.Is(errs[i], want[i]) || (want[i] == nil) != (errs[i] == nil) {
				t.Errorf("move %+v: %v, want %v", moves[i], errs[i], want[i])
			}
		}
	}

	alter([]error{ErrNoReassignmentInProgress, ErrInvalidReplicaAssignment},
		Reassignment{Topic: "moving", Partition: 0}, Reassignment{Topic: "moving", Partition: 1, Replicas: []int32{1, 9}})
	if got := request(); got != "none" {
		t.Fatalf("rejected moves wrote a request: %s", got)
	}
	alter([]error{nil}, Reassignment{Topic: "moving", Partition: 0, Replicas: []int32{1, 2}})
	alter([]error{nil, nil, ErrUnknownTopic},
		Reassignment{Topic: "moving", Partition: 1, Replicas: []int32{0, 2}},
		Reassignment{Topic: "moving", Partition: 0, Replicas: []int32{2, 0}},
		Reassignment{Topic: "moving", Partition: 2, Replicas: []int32{0}})
	if got, want := request(), `{"version":1,"partitions":[`+
		`{"topic":"moving","partition":0,"replicas":[2,0],"original":[0,1]},`+
		`{"topic":"moving","partition":1,"replicas":[0,2],"original":[1,2]}]}`; got != want {
		t.Fatalf("request %s\nwant    %s", got, want)
	}
	alter([]error{nil}, Reassignment{Topic: "moving", Partition: 0})
	pending, err := PendingReassignments(e.store)
	if err != nil || len(pending) != 2 || !slices.Equal(pending[0].Replicas, []int32{0, 1}) {
		t.Fatalf("after cancelling partition 0: %+v %v; want it moving back to [0 1]", pending, err)
	}

	// A move another tool wrote has no original replicas; the controller
	// records them before its first step, and a cancel goes back to them.
	if err := e.store.Delete(reassignPath, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Create(reassignPath, []byte(`{"version":1,"partitions":[{"topic":"moving","partition":1,"replicas":[0,1]}]}`), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	e.c.reassignPass(1)
	if got, want := request(), `{"version":1,"partitions":[{"topic":"moving","partition":1,"replicas":[0,1],"original":[1,2]}]}`; got != want {
		t.Fatalf("after a controller pass: request %s\nwant    %s", got, want)
	}
	alter([]error{nil}, Reassignment{Topic: "moving", Partition: 1})
	pending, err = PendingReassignments(e.store)
	if err != nil || len(pending) != 1 || !slices.Equal(pending[0].Replicas, []int32{1, 2}) {
		t.Fatalf("after cancelling the other tool's move: %+v %v; want it moving back to [1 2]", pending, err)
	}
}

// TestReassignmentRequestAndSteps writes a reassignment request and drives
// the controller's passes over it, playing the partition leader's part
// (adding the new replica to the ISR) in between.
func TestReassignmentRequestAndSteps(t *testing.T) {
	e := openThreeBrokers(t)
	if _, err := e.c.CreateTopic(TopicSpec{Name: "moving", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {0, 1}}}, false); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []struct {
		moves []Reassignment
		want  error
	}{
		{nil, ErrInvalidReplicaAssignment},
		{[]Reassignment{{Topic: "nope", Partition: 0, Replicas: []int32{1}}}, ErrUnknownTopic},
		{[]Reassignment{{Topic: "moving", Partition: 1, Replicas: []int32{1}}}, ErrUnknownTopic},
		{[]Reassignment{{Topic: "moving", Partition: 0, Replicas: nil}}, ErrInvalidReplicaAssignment},
		{[]Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, 1}}}, ErrInvalidReplicaAssignment},
		{[]Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, 9}}}, ErrInvalidReplicaAssignment},
	} {
		if err := RequestReassignment(e.store, bad.moves); !errors.Is(err, bad.want) {
			t.Errorf("RequestReassignment(%v) = %v, want %v", bad.moves, err, bad.want)
		}
	}
	if err := RequestReassignment(e.store, []Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	data, _, err := e.store.Get(reassignPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2],"original":[0,1]}]}`; string(data) != want {
		t.Errorf("request znode %s, want %s", data, want)
	}
	if err := RequestReassignment(e.store, []Reassignment{{Topic: "moving", Partition: 0, Replicas: []int32{2}}}); !errors.Is(err, ErrReassignmentInProgress) {
		t.Errorf("a second request: %v, want ErrReassignmentInProgress", err)
	}

	// reload re-reads the topic the way the sync goroutine does after a
	// watch fires.
	reload := func() *PartitionState {
		t.Helper()
		topic, err := e.c.readTopic("moving")
		if err != nil {
			t.Fatal(err)
		}
		e.c.adminMu.Lock()
		e.c.applyModelLocked(map[string]*Topic{"moving": topic})
		e.c.adminMu.Unlock()
		return topic.Partitions[0]
	}
	const epoch = 7
	before := reload()

	e.c.reassignPass(epoch)
	p := reload()
	if !slices.Equal(p.Replicas, []int32{1, 2, 0}) || p.LeaderEpoch != before.LeaderEpoch+1 || p.Leader != 0 || p.ControllerEpoch != epoch {
		t.Fatalf("after adding replicas: %+v", p)
	}
	e.c.reassignPass(epoch) // broker 2 is not in the ISR yet: nothing to do
	if q := reload(); q.StateVersion != p.StateVersion {
		t.Fatalf("the controller wrote while waiting for the ISR: %+v", q)
	}

	// The leader adds broker 2 once it caught up.
	in := p.clone()
	in.ISR = []int32{0, 1, 2}
	if _, err := e.store.Set(partitionStatePath("moving", 0), encodePartitionState(in), p.StateVersion); err != nil {
		t.Fatal(err)
	}
	reload()
	e.c.reassignPass(epoch)
	p = reload()
	if p.Leader != 1 || p.LeaderEpoch != before.LeaderEpoch+2 {
		t.Fatalf("leader not moved into the target: %+v", p)
	}
	e.c.reassignPass(epoch)
	p = reload()
	if !slices.Equal(p.Replicas, []int32{1, 2}) || !slices.Equal(p.ISR, []int32{1, 2}) || p.Leader != 1 {
		t.Fatalf("old replica not removed: %+v", p)
	}
	if _, l, _ := e.c.Partition("moving", 0); l != nil {
		t.Errorf("broker 0 still has a log for the partition it no longer hosts")
	}
	e.c.reassignPass(epoch)
	if pending, err := PendingReassignments(e.store); err != nil || pending != nil {
		t.Fatalf("request still pending after the move: %v %v", pending, err)
	}
}

// interleavingStore runs once before the first read of a partition state,
// as if another broker's write landed between the topic's reads.
type interleavingStore struct {
	coord.Store
	once func()
}

func (s *interleavingStore) Get(path string) ([]byte, coord.Stat, error) {
	if s.once != nil && strings.HasSuffix(path, "/state") {
		f := s.once
		s.once = nil
		f()
	}
	return s.Store.Get(path)
}

// TestReadTopicPairsAssignmentWithState: a reassignment step lands between
// the read of a topic's assignment and the read of its partition state;
// the model must not pair the old replica list with the new leader epoch.
func TestReadTopicPairsAssignmentWithState(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "racing", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	p, err := e.c.readTopic("racing")
	if err != nil {
		t.Fatal(err)
	}
	old := p.Partitions[0]
	step := old.next(3)
	step.Replicas = []int32{0, 5}
	data, stat, err := e.store.Get(topicPath("racing"))
	if err != nil {
		t.Fatal(err)
	}
	var z topicZnode
	if err := json.Unmarshal(data, &z); err != nil {
		t.Fatal(err)
	}
	z.Partitions["0"] = step.Replicas
	e.c.store = &interleavingStore{Store: e.store, once: func() {
		err := e.store.Multi(
			coord.SetOp{Path: partitionStatePath("racing", 0), Data: encodePartitionState(step), Version: old.StateVersion},
			coord.SetOp{Path: topicPath("racing"), Data: mustJSON(z), Version: stat.Version})
		if err != nil {
			t.Error(err)
		}
	}}
	defer func() { e.c.store = e.store }()
	got, err := e.c.readTopic("racing")
	if err != nil {
		t.Fatal(err)
	}
	if q := got.Partitions[0]; q.LeaderEpoch != step.LeaderEpoch || !slices.Equal(q.Replicas, step.Replicas) {
		t.Fatalf("read replicas %v with leader epoch %d; want %v with %d", q.Replicas, q.LeaderEpoch, step.Replicas, step.LeaderEpoch)
	}
}
