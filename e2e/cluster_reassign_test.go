package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/broker/coord/zk"
	"millrace/internal/waitfor"
)

// notController returns a broker that is not the controller (the one a test
// stops while the controller goes on) and the others, in ID order.
func (c *localCluster) notController(adm *kadm.Client) (int32, []int32) {
	c.t.Helper()
	// A broker that has not read /controller yet answers -1: the first
	// broker would then be picked, and it may be the controller.
	var md kadm.Metadata
	waitfor.Until(c.t, 30*time.Second, "a broker to name the controller", func() bool {
		var err error
		md, err = adm.Metadata(c.t.Context())
		return err == nil && slices.Contains(c.initial, md.Controller)
	})
	var pick int32 = -1
	var others []int32
	for _, id := range c.initial {
		if id != md.Controller && pick < 0 {
			pick = id
		} else {
			others = append(others, id)
		}
	}
	return pick, others
}

// createAssignedTopic creates a topic with an explicit replica list per
// partition and min.insync.replicas=2, and waits for full replication.
func (c *localCluster) createAssignedTopic(topic string, assignment [][]int32) {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, replicas := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	two := "2"
	cfg.Name, cfg.Value = "min.insync.replicas", &two
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.client())
	if err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	adm := c.admin()
	waitfor.Until(c.t, 20*time.Second, "the new topic to be fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
}

// checkIdenticalOn stops every broker and compares each partition's log
// byte for byte across the given brokers.
func (c *localCluster) checkIdenticalOn(topic string, partitions int, ids []int32) {
	c.t.Helper()
	c.stopAll()
	for p := int32(0); p < int32(partitions); p++ {
		first := readLogDirect(c.t, c.nodes[ids[0]].data, topic, p)
		if len(first) == 0 {
			c.t.Errorf("partition %d: broker %d's log is empty", p, ids[0])
		}
		for _, id := range ids[1:] {
			if b := readLogDirect(c.t, c.nodes[id].data, topic, p); !bytes.Equal(first, b) {
				c.t.Errorf("partition %d: broker %d's log (%d bytes) differs from broker %d's (%d bytes)", p, id, len(b), ids[0], len(first))
			}
		}
	}
}

// joinIDs writes broker IDs as the CLI does: 1,2,3.
func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// hostedPartitions lists the topic's partition directories in a broker's
// data directory.
func hostedPartitions(dataDir, topic string) []string {
	entries, _ := os.ReadDir(filepath.Join(dataDir, "logs"))
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), topic+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestClusterReassignOntoNewBroker moves a topic from brokers 1,2,3 onto
// 1,2,4 with `millrace cluster reassign` while an acks=all producer writes:
// broker 4 ends with the same data as 1 and 2, broker 3 no longer hosts the
// topic, and nothing acknowledged is lost.
func TestClusterReassignOntoNewBroker(t *testing.T) {
	const topic, partitions = "reassign", 3
	c := startLocalCluster(t, 4, 1)
	c.createAssignedTopic(topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	adm := c.admin()
	if got := hostedPartitions(c.nodes[4].data, topic); len(got) != 0 {
		t.Fatalf("broker 4 hosts %v before the reassignment", got)
	}

	// The producer's records never outlive a cancelled context here, so
	// any failure is the reassignment's doing.
	producer := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RecordDeliveryTimeout(60*time.Second))
	acks := &ackLog{acked: map[int32][]ackedRecord{}}
	var failures []error
	var stop atomic.Bool
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		for n := int64(0); !stop.Load(); n++ {
			if n%20 == 0 {
				// Paced: writes always in flight during the move, few
				// enough to read back quickly.
				time.Sleep(2 * time.Millisecond)
			}
			v := n
			producer.Produce(context.Background(), &kgo.Record{Value: []byte(strconv.FormatInt(v, 10))}, func(r *kgo.Record, err error) {
				acks.mu.Lock()
				defer acks.mu.Unlock()
				if err != nil {
					acks.failed++
					failures = append(failures, err)
					return
				}
				acks.acked[r.Partition] = append(acks.acked[r.Partition], ackedRecord{r.Offset, v})
			})
		}
	}()
	// Two seconds of traffic first, so the partitions move under load.
	time.Sleep(2 * time.Second)
	start := time.Now()
	out := run(t, 60*time.Second, "", millraceBin, "cluster", "reassign", "--zookeeper", c.zk, "--topic", topic, "--brokers", "1,2,4", "--wait")
	t.Logf("cluster reassign (%v):\n%s", time.Since(start).Round(time.Millisecond), out)
	// And a second of traffic on the new replicas before the producer stops.
	time.Sleep(time.Second)
	stop.Store(true)
	<-producerDone
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	if err := producer.Flush(ctx); err != nil {
		t.Fatalf("flushing the producer: %v", err)
	}
	cancel()
	if len(failures) > 0 {
		t.Errorf("%d writes failed during the reassignment, first: %v", len(failures), failures[0])
	}

	waitfor.Until(c.t, 30*time.Second, "every partition on 1,2,4 and fully replicated", func() bool {
		parts, err := c.partitions(adm, topic)
		if err != nil || !c.fullyReplicated(adm, topic) {
			return false
		}
		for _, p := range parts {
			r := slices.Clone(p.Replicas)
			slices.Sort(r)
			if !slices.Equal(r, []int32{1, 2, 4}) {
				return false
			}
		}
		return true
	})
	waitfor.Until(c.t, 20*time.Second, "broker 3 to drop the topic's logs", func() bool { return len(hostedPartitions(c.nodes[3].data, topic)) == 0 })
	if got := hostedPartitions(c.nodes[4].data, topic); len(got) != partitions {
		t.Errorf("broker 4 hosts %v, want all %d partitions", got, partitions)
	}
	t.Logf("records acknowledged: %d (failed: %d)", acks.count(), acks.failed)
	if acks.count() == 0 {
		t.Fatal("nothing was acknowledged")
	}
	checkAcknowledged(t, acks, readAll(t, c, topic, partitions))
	c.checkIdenticalOn(topic, partitions, []int32{1, 2, 4})
}

// TestClusterReassignThroughKafkaAPI drives reassignments the way Kafka's
// tools do, with AlterPartitionReassignments and ListPartitionReassignments
// (franz-go's kadm): a move onto a stopped broker is listed while it waits
// for that broker and is cancelled back to its original replicas; a move
// onto a live broker completes, and every acknowledged record is still
// there.
func TestClusterReassignThroughKafkaAPI(t *testing.T) {
	const topic = "apimove"
	c := startLocalCluster(t, 3, 1)
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The broker to stop is not the controller, which answers the
	// reassignment requests; the topic starts on the other two.
	stopped, others := c.notController(adm)
	c.createAssignedTopic(topic, [][]int32{others, {others[1], others[0]}})
	producer := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := 0; i < 200; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tryAlter := func(assign func(*kadm.AlterPartitionAssignmentsReq)) error {
		var req kadm.AlterPartitionAssignmentsReq
		assign(&req)
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = resp.Error()
		}
		return err
	}
	alter := func(assign func(*kadm.AlterPartitionAssignmentsReq)) {
		t.Helper()
		if err := tryAlter(assign); err != nil {
			t.Fatalf("AlterPartitionReassignments: %v", err)
		}
	}
	listed := func(p int32) (kadm.ListPartitionReassignmentsResponse, bool) {
		t.Helper()
		s := kadm.TopicsSet{}
		s.Add(topic, p)
		l, err := adm.ListPartitionReassignments(ctx, s)
		if err != nil {
			t.Fatalf("ListPartitionReassignments: %v", err)
		}
		r, ok := l[topic][p]
		return r, ok
	}
	sorted := func(ids ...int32) []int32 {
		out := slices.Clone(ids)
		slices.Sort(out)
		return out
	}
	replicasOf := func(p int32) []int32 {
		parts, err := c.partitions(adm, topic)
		if err != nil || int(p) >= len(parts) {
			return nil
		}
		return sorted(parts[p].Replicas...)
	}
	target := []int32{stopped, others[0]}

	// The stopped broker stays registered (for the 4 s session timeout)
	// but cannot catch up, so the move waits with it added and others[1]
	// not yet removed. Only the controller is asked meanwhile: the client
	// knows it from the listing before the stop.
	if _, moving := listed(0); moving {
		t.Fatal("partition 0 is moving before any request")
	}
	c.signal(stopped, syscall.SIGSTOP)
	alter(func(r *kadm.AlterPartitionAssignmentsReq) { r.Assign(topic, 0, target) })
	var waiting kadm.ListPartitionReassignmentsResponse
	waitfor.Until(c.t, 3*time.Second, "the waiting move to list the stopped broker among the replicas", func() bool {
		r, ok := listed(0)
		waiting = r
		return ok && slices.Equal(sorted(r.Replicas...), sorted(stopped, others[0], others[1])) &&
			slices.Equal(r.AddingReplicas, []int32{stopped}) && slices.Equal(r.RemovingReplicas, []int32{others[1]})
	})
	t.Logf("listed while waiting: %+v", waiting)
	// `cluster status` lists the move too, and does not hang on the
	// stopped broker's disk columns.
	status := run(t, 60*time.Second, "", millraceBin, "cluster", "status", "--brokers", c.nodes[others[0]].addr)
	t.Logf("cluster status while the move waits:\n%s", status)
	if want := fmt.Sprintf("reassignments in progress: 1\n  %s/0 (replicas %s, adding %d, removing %d)\n", topic,
		joinIDs(waiting.Replicas), stopped, others[1]); !strings.Contains(status, want) {
		t.Errorf("cluster status does not show %q", want)
	}
	alter(func(r *kadm.AlterPartitionAssignmentsReq) { r.CancelAssign(topic, 0) })
	c.signal(stopped, syscall.SIGCONT)
	waitfor.Until(c.t, 30*time.Second, "the cancelled move to go back to its original replicas", func() bool {
		_, moving := listed(0)
		return !moving && slices.Equal(replicasOf(0), sorted(others...)) && c.fullyReplicated(adm, topic)
	})
	waitfor.Until(c.t, 20*time.Second, "the stopped broker to drop its copy of partition 0", func() bool {
		return len(hostedPartitions(c.nodes[stopped].data, topic)) == 0
	})

	// The stopped broker's session may have expired meanwhile (status can
	// wait on it): a move onto it needs it registered again.
	// The controller refuses a move onto a broker its view lacks
	// (INVALID_REPLICA_ASSIGNMENT) until it has seen the registration,
	// which another broker's metadata may show first.
	waitfor.Until(c.t, 30*time.Second, "the controller to take a move onto the stopped broker, registered again", func() bool {
		err := tryAlter(func(r *kadm.AlterPartitionAssignmentsReq) { r.Assign(topic, 1, target) })
		if errors.Is(err, kerr.InvalidReplicaAssignment) {
			return false
		}
		if err != nil {
			t.Fatalf("AlterPartitionReassignments: %v", err)
		}
		return true
	})
	waitfor.Until(c.t, 30*time.Second, "partition 1 to move onto the target", func() bool {
		_, moving := listed(1)
		return !moving && slices.Equal(replicasOf(1), sorted(target...)) && c.fullyReplicated(adm, topic)
	})
	waitfor.Until(c.t, 20*time.Second, "the replaced broker to drop its copy of partition 1", func() bool {
		return !slices.Contains(hostedPartitions(c.nodes[others[1]].data, topic), topic+"-1")
	})
	for p, recs := range readAll(t, c, topic, 2) {
		if len(recs) != 100 {
			t.Errorf("partition %d: %d records after the moves, want the 100 acknowledged", p, len(recs))
		}
	}
}

// TestClusterReassignWrittenByAnotherTool writes a reassignment request the
// way Kafka's ZooKeeper-era tools do (/admin/reassign_partitions without
// millrace's "original" replicas), moving a partition onto a stopped broker
// (registered: a 60 s session here), where it waits. The controller records
// the replicas before the move, so the Kafka API lists what the move adds
// and removes, and a cancel through it goes back to them.
func TestClusterReassignWrittenByAnotherTool(t *testing.T) {
	const topic = "toolmove"
	c := startLocalClusterWith(t, 3, 1, "zookeeper.session.timeout.ms=60000")
	adm := c.admin()
	ctx := t.Context()
	stopped, others := c.notController(adm)
	c.createAssignedTopic(topic, [][]int32{others})
	c.signal(stopped, syscall.SIGSTOP)
	continued := false
	t.Cleanup(func() {
		if !continued {
			c.signal(stopped, syscall.SIGCONT)
		}
	})
	store, err := zk.Connect(c.zk, 10*time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	request := fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":0,"replicas":[%d,%d]}]}`, topic, stopped, others[0])
	if _, err := store.Create("/admin/reassign_partitions", []byte(request), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(c.t, 15*time.Second, "the controller to record the replicas before the move", func() bool {
		pending, err := cluster.PendingReassignments(store)
		return err == nil && len(pending) == 1 && slices.Equal(pending[0].Original, others)
	})
	which := kadm.TopicsSet{}
	which.Add(topic, 0)
	var listed kadm.ListPartitionReassignmentsResponse
	waitfor.Until(c.t, 15*time.Second, "the move to be listed with the replicas it adds and removes", func() bool {
		l, err := adm.ListPartitionReassignments(ctx, which)
		r, ok := l[topic][0]
		listed = r
		return err == nil && ok && slices.Equal(r.AddingReplicas, []int32{stopped}) && slices.Equal(r.RemovingReplicas, []int32{others[1]})
	})
	t.Logf("listed: %+v", listed)
	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign(topic, 0)
	resp, err := adm.AlterPartitionAssignments(ctx, cancelReq)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("cancelling the other tool's move: %v", err)
	}
	c.signal(stopped, syscall.SIGCONT)
	continued = true
	waitfor.Until(c.t, 30*time.Second, "the cancelled move to go back to the replicas before it", func() bool {
		pending, err := cluster.PendingReassignments(store)
		parts, perr := c.partitions(adm, topic)
		if err != nil || perr != nil || len(pending) > 0 || len(parts) != 1 {
			return false
		}
		r := slices.Sorted(slices.Values(parts[0].Replicas))
		return slices.Equal(r, slices.Sorted(slices.Values(others))) && c.fullyReplicated(adm, topic)
	})
	waitfor.Until(c.t, 20*time.Second, "the stopped broker to drop its copy", func() bool {
		return len(hostedPartitions(c.nodes[stopped].data, topic)) == 0
	})
}
