package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"millrace/broker/coord"
	"millrace/broker/coord/embedded"
	"millrace/broker/log"

	"millrace/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t      *testing.T
	dir    string
	server *embedded.Server
	store  coord.Store
	logs   *log.Manager
	c      *Cluster
}

func openEnv(t *testing.T, dir string) *env {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	e := &env{t: t, dir: dir}
	var err error
	if e.server, err = embedded.Open(dir+"/coord", logger); err != nil {
		t.Fatal(err)
	}
	if e.store, err = e.server.Session(); err != nil {
		t.Fatal(err)
	}
	if e.logs, err = log.OpenManager(dir+"/data", log.DefaultConfig(), logger); err != nil {
		t.Fatal(err)
	}
	if e.c, err = Open(DefaultConfig(), e.store, e.logs, log.DefaultConfig(), logger); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.c == nil {
		return
	}
	if err := e.c.Close(); err != nil {
		e.t.Error(err)
	}
	e.logs.Close()
	e.store.Close()
	e.server.Close()
	e.c = nil
}

// waitBrokers waits until the broker watch has seen n brokers.
func (e *env) waitBrokers(n int) {
	e.t.Helper()
	waitfor.Until(e.t, 10*time.Second, fmt.Sprintf("%d brokers listed", n), func() bool { return len(e.c.Brokers()) == n })
}

func TestValidateTopicName(t *testing.T) {
	for name, ok := range map[string]bool{
		"orders": true, "a.b_c-D9": true, strings.Repeat("x", 249): true,
		"": false, ".": false, "..": false, strings.Repeat("x", 250): false,
		"a b": false, "a/b": false, "tópico": false, "a\x00": false,
	} {
		if err := ValidateTopicName(name); (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%v", name, err, ok)
		} else if err != nil && !errors.Is(err, ErrInvalidTopic) {
			t.Errorf("%q: %v does not wrap ErrInvalidTopic", name, err)
		}
	}
}

func TestZnodeFormats(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h", 9092, "r1"); err != nil {
		t.Fatal(err)
	}
	topic, err := e.c.CreateTopic(TopicSpec{Name: "z", Partitions: 2, ReplicationFactor: 1, Config: map[string]string{"retention.ms": "1000"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, into any) {
		t.Helper()
		data, _, err := e.store.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var tz struct {
		Version    int                `json:"version"`
		Partitions map[string][]int32 `json:"partitions"`
		TopicID    string             `json:"topic_id"`
	}
	get("/brokers/topics/z", &tz)
	if tz.Version != 2 || len(tz.Partitions) != 2 || tz.Partitions["1"][0] != 0 || tz.TopicID != TopicIDString(topic.ID) || len(tz.TopicID) != 22 {
		t.Fatalf("topic znode %+v", tz)
	}
	var sz struct {
		Leader          int32   `json:"leader"`
		LeaderEpoch     int32   `json:"leader_epoch"`
		ISR             []int32 `json:"isr"`
		ControllerEpoch int32   `json:"controller_epoch"`
	}
	get("/brokers/topics/z/partitions/1/state", &sz)
	if sz.Leader != 0 || sz.LeaderEpoch != 0 || len(sz.ISR) != 1 || sz.ControllerEpoch != 1 {
		t.Fatalf("state znode %+v", sz)
	}
	var cz struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}
	get("/config/topics/z", &cz)
	if cz.Version != 1 || cz.Config["retention.ms"] != "1000" {
		t.Fatalf("config znode %+v", cz)
	}
	var bz struct {
		Host string `json:"host"`
		Port int32  `json:"port"`
		Rack string `json:"rack"`
	}
	get("/brokers/ids/0", &bz)
	if bz.Host != "h" || bz.Port != 9092 || bz.Rack != "r1" {
		t.Fatalf("broker znode %+v", bz)
	}

	if err := e.c.DeleteTopic("z"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/brokers/topics/z", "/config/topics/z"} {
		if ok, _, _ := e.store.Exists(p); ok {
			t.Fatalf("%s survived the deletion", p)
		}
	}
	if err := e.c.DeleteTopic("z"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestAssignmentOverBrokers(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	// Two more brokers, registered by their own sessions.
	for _, id := range []string{"1", "2"} {
		s, err := e.server.Session()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Create("/brokers/ids/"+id, []byte(`{"host":"h`+id+`","port":9092}`), coord.Ephemeral); err != nil {
			t.Fatal(err)
		}
	}
	e.waitBrokers(3)

	topic, err := e.c.CreateTopic(TopicSpec{Name: "spread", Partitions: 6, ReplicationFactor: 2}, true)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for _, p := range topic.Partitions {
		if len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] || p.Leader != p.Replicas[0] {
			t.Fatalf("partition %d: %+v", p.Partition, p)
		}
		leaders[p.Leader]++
	}
	if leaders[0] != 2 || leaders[1] != 2 || leaders[2] != 2 {
		t.Fatalf("preferred leaders not spread evenly: %v", leaders)
	}

	bad := []struct {
		spec TopicSpec
		want error
	}{
		{TopicSpec{Name: "rf", Partitions: 1, ReplicationFactor: 4}, ErrInvalidReplicationFactor},
		{TopicSpec{Name: "gap", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {0}, 2: {1}}}, ErrInvalidReplicaAssignment},
		{TopicSpec{Name: "dup", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {1, 1}}}, ErrInvalidReplicaAssignment},
		{TopicSpec{Name: "uneven", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {0, 1}, 1: {2}}}, ErrInvalidReplicaAssignment},
		{TopicSpec{Name: "dead", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {9}}}, ErrInvalidReplicaAssignment},
		{TopicSpec{Name: "both", Partitions: 1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {0}}}, ErrInvalidReplicaAssignment},
	}
	for _, tc := range bad {
		if _, err := e.c.CreateTopic(tc.spec, false); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.spec.Name, err, tc.want)
		}
	}

	// An explicit assignment that leaves this broker out opens no log here.
	_, err = e.c.CreateTopic(TopicSpec{Name: "elsewhere", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {1}, 1: {0}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, l, ok := e.c.Partition("elsewhere", 0); !ok || l != nil {
		t.Fatalf("partition 0 is on broker 1 only, but a log is open here")
	}
	if _, l, ok := e.c.Partition("elsewhere", 1); !ok || l == nil {
		t.Fatalf("partition 1 is on this broker but has no log")
	}
	// Names differing only in '.' and '_' collide, as in Kafka.
	if _, err := e.c.CreateTopic(TopicSpec{Name: "else.where", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "else_where", Partitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("colliding name: %v", err)
	}
}

func TestReregisterAfterSessionExpiry(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h", 1, ""); err != nil {
		t.Fatal(err)
	}
	e.waitBrokers(1)
	before := e.store.SessionID()
	e.server.ExpireSession(before)
	waitfor.Until(t, 10*time.Second, "a new registration after the session expired", func() bool {
		ok, stat, err := e.store.Exists("/brokers/ids/0")
		return err == nil && ok && stat.EphemeralOwner != before
	})
	e.waitBrokers(1)
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := e.store.Exists("/brokers/ids/0"); ok {
		t.Fatal("registration left behind by Close")
	}
}

func TestConfigOverrides(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h", 1, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "c", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.c.AlterConfig("c", map[string]string{"segment.ms": "1000", "min.insync.replicas": "2"}, false); err != nil {
		t.Fatal(err)
	}
	values, overrides, err := e.c.TopicConfigValues("c")
	if err != nil || values["segment.ms"] != "1000" || values["retention.ms"] != "604800000" || len(overrides) != 2 || values["min.insync.replicas"] != "2" {
		t.Fatalf("values %v overrides %v err %v", values, overrides, err)
	}
	_, l, _ := e.c.Partition("c", 0)
	if l.Config().SegmentAge != time.Second {
		t.Fatalf("open log not reconfigured: %v", l.Config().SegmentAge)
	}
	for _, bad := range []map[string]string{{"segment.ms": "x"}, {"nope": "1"}, {"min.insync.replicas": "0"}, {"cleanup.policy": "compacted"}, {"min.cleanable.dirty.ratio": "1.5"}} {
		if err := e.c.AlterConfig("c", bad, false); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if err := e.c.AlterConfig("nope", nil, false); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("unknown topic: %v", err)
	}
	// Reopen: overrides come back from the store.
	dir := e.dir
	e.close()
	e = openEnv(t, dir)
	if t2, ok := e.c.Topic("c"); !ok || t2.Config["segment.ms"] != "1000" {
		t.Fatalf("after reopen: %+v", t2)
	}
}
