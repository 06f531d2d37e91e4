package cluster

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// reopen closes the cluster and opens it again on the same store and data,
// as a broker restart does.
func (e *env) reopen(cfg Config) {
	e.t.Helper()
	if err := e.c.Close(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.logs.Close(); err != nil {
		e.t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	var err error
	if e.logs, err = log.OpenManager(e.dir+"/data", log.DefaultConfig(), logger); err != nil {
		e.t.Fatal(err)
	}
	if e.c, err = Open(cfg, e.store, e.logs, log.DefaultConfig(), logger); err != nil {
		e.t.Fatal(err)
	}
}

// reload applies the store to the model the way the sync goroutine does
// after a watch fires.
func (e *env) reload() {
	e.t.Helper()
	e.c.adminMu.Lock()
	defer e.c.adminMu.Unlock()
	read, pending, err := e.c.readModel(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c.applyModelLocked(read)
	e.c.applyDeletionsLocked(pending)
}

func (e *env) exists(path string) bool {
	e.t.Helper()
	ok, _, err := e.store.Exists(path)
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

func (e *env) partitionDirs(topic string) []string {
	entries, _ := os.ReadDir(filepath.Join(e.dir, "data"))
	var out []string
	for _, d := range entries {
		if tp, ok := parseDir(d.Name()); ok && tp == topic {
			out = append(out, d.Name())
		}
	}
	return out
}

func parseDir(name string) (string, bool) {
	i := len(name) - 1
	for i > 0 && name[i] >= '0' && name[i] <= '9' {
		i--
	}
	return name[:i], i > 0 && name[i] == '-'
}

// peer registers another broker with its own session; closing the session
// is that broker dying.
func (e *env) peer(id string) coord.Store {
	e.t.Helper()
	s, err := e.server.Session()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	if _, err := s.Create("/brokers/ids/"+id, []byte(`{"host":"h`+id+`","port":9092}`), coord.Ephemeral); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestDeletionWaitsForEveryReplica runs a replicated deletion step by step:
// the topic is gone for clients at once, the name stays taken, and the
// nodes go only once every replica confirmed, the one that was down
// included.
func TestDeletionWaitsForEveryReplica(t *testing.T) {
	e := openEnv(t, t.TempDir())
	cfg := DefaultConfig()
	cfg.Replicated = true
	e.reopen(cfg)
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	e.peer("1")
	two := e.peer("2")
	e.waitBrokers(3)
	spec := TopicSpec{Name: "gone", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {0, 1}, 1: {1, 2}}}
	if _, err := e.c.CreateTopic(spec, false); err != nil {
		t.Fatal(err)
	}
	_, l, _ := e.c.Partition("gone", 0)
	appendRecord(t, l)
	two.Close() // broker 2 dies
	e.waitBrokers(2)

	if err := e.c.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.c.Topic("gone"); ok {
		t.Fatal("the topic is still visible after DeleteTopic")
	}
	if _, _, ok := e.c.Partition("gone", 0); ok {
		t.Fatal("a partition of the deleted topic is still visible")
	}
	if dirs := e.partitionDirs("gone"); len(dirs) != 0 {
		t.Fatalf("partition directories left after DeleteTopic: %v", dirs)
	}
	if !e.exists(deletionConfirmPath("gone", 0)) {
		t.Fatal("this broker did not confirm deleting its replica")
	}
	if _, err := e.c.CreateTopic(spec, false); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("re-creating during the deletion: %v, want ErrTopicExists", err)
	}
	if err := e.c.DeleteTopic("gone"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("deleting again: %v, want ErrUnknownTopic", err)
	}
	if names, err := PendingDeletions(e.store); err != nil || !slices.Equal(names, []string{"gone"}) {
		t.Fatalf("pending deletions %v %v", names, err)
	}

	const epoch = 7
	e.c.deletionPass(epoch) // fences the leaders
	e.reload()
	for p := int32(0); p < 2; p++ {
		data, _, err := e.store.Get(partitionStatePath("gone", p))
		if err != nil {
			t.Fatal(err)
		}
		st := &PartitionState{Topic: "gone", Partition: p}
		if err := decodePartitionState(st, data); err != nil {
			t.Fatal(err)
		}
		if st.Leader != -1 || st.LeaderEpoch != 1 || st.ControllerEpoch != epoch {
			t.Fatalf("partition %d not fenced: %+v", p, st)
		}
	}

	e.c.deletionPass(epoch) // waits for broker 1 (alive) and 2 (down)
	if _, err := e.store.Create(deletionConfirmPath("gone", 1), nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	e.c.deletionPass(epoch) // still waits for broker 2
	if !e.exists(topicPath("gone")) || !e.exists(deletionPath("gone")) {
		t.Fatal("the topic was removed while a replica was down")
	}

	// Broker 2 returns and confirms (as its Open does); then the nodes go.
	e.peer("2")
	e.waitBrokers(3)
	if _, err := e.store.Create(deletionConfirmPath("gone", 2), nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	e.c.deletionPass(epoch)
	for _, path := range []string{topicPath("gone"), topicConfigPath("gone"), deletionPath("gone")} {
		if e.exists(path) {
			t.Errorf("%s left after the deletion finished", path)
		}
	}
	e.reload()
	if names, _ := PendingDeletions(e.store); len(names) != 0 {
		t.Fatalf("still pending: %v", names)
	}

	// The name is free again, and the new topic starts empty.
	if _, err := e.c.CreateTopic(spec, false); err != nil {
		t.Fatal(err)
	}
	if _, l, ok := e.c.Partition("gone", 0); !ok || l == nil || l.EndOffset() != 0 {
		t.Fatalf("re-created topic: log %v, ok %v", l, ok)
	}
}

// TestOpenRemovesStrayAndPendingLogs restarts a broker over partition
// directories the store no longer gives it: a topic whose nodes vanished
// (a crash between the store and the disk), and a topic marked for
// deletion while it was down. Both are deleted rather than served, and the
// pending one is confirmed.
func TestOpenRemovesStrayAndPendingLogs(t *testing.T) {
	e := openEnv(t, t.TempDir())
	cfg := DefaultConfig()
	cfg.Replicated = true
	e.reopen(cfg)
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep", "vanished", "pending"} {
		if _, err := e.c.CreateTopic(TopicSpec{Name: name, Partitions: 2, ReplicationFactor: 1}, false); err != nil {
			t.Fatal(err)
		}
		_, l, _ := e.c.Partition(name, 0)
		appendRecord(t, l)
	}
	// While the broker is down: one topic's nodes disappear, another is
	// marked for deletion by another broker.
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.deleteTopicNodes("vanished"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Create(deletionPath("pending"), nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	e.reopen(cfg)

	if dirs := e.partitionDirs("keep"); len(dirs) != 2 {
		t.Errorf("the live topic's directories: %v", dirs)
	}
	for _, name := range []string{"vanished", "pending"} {
		if dirs := e.partitionDirs(name); len(dirs) != 0 {
			t.Errorf("%s: directories kept: %v", name, dirs)
		}
		if _, ok := e.c.Topic(name); ok {
			t.Errorf("%s is visible", name)
		}
	}
	if !e.exists(deletionConfirmPath("pending", 0)) {
		t.Error("the deletion pending at startup was not confirmed")
	}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "pending", Partitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, ErrTopicExists) {
		t.Errorf("re-creating a topic pending deletion: %v", err)
	}
}

// TestSingleBrokerDeletesAtOnce: without replication there is nobody to
// wait for; the name is free as soon as DeleteTopic returns.
func TestSingleBrokerDeletesAtOnce(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	spec := TopicSpec{Name: "once", Partitions: 2, ReplicationFactor: 1}
	if _, err := e.c.CreateTopic(spec, false); err != nil {
		t.Fatal(err)
	}
	_, l, _ := e.c.Partition("once", 1)
	appendRecord(t, l)
	if err := e.c.DeleteTopic("once"); err != nil {
		t.Fatal(err)
	}
	if dirs := e.partitionDirs("once"); len(dirs) != 0 {
		t.Fatalf("directories left: %v", dirs)
	}
	if e.exists(topicPath("once")) || e.exists(deletionPath("once")) {
		t.Fatal("store nodes left")
	}
	if _, err := e.c.CreateTopic(spec, false); err != nil {
		t.Fatal(err)
	}
	if _, l, _ := e.c.Partition("once", 1); l.EndOffset() != 0 {
		t.Fatalf("re-created partition starts at %d", l.EndOffset())
	}
}

// appendRecord appends a one-record v2 batch.
func appendRecord(t *testing.T, l *log.Log) {
	t.Helper()
	r := kmsg.Record{Value: []byte("v")}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: 1, Records: r.AppendTo(nil)}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	if _, err := l.Append(out, 0); err != nil {
		t.Fatal(err)
	}
}
