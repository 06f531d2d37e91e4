package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// TestClusterSinkCoordinatorKilled: a sink lands a replicated topic of a
// 3-broker cluster; the broker coordinating its group, which also leads some
// of the topic's partitions, is killed with SIGKILL midway. Once its
// registration expires the group moves to another broker, and back when it
// returns; the committed offsets (kept in ZooKeeper) survive both moves, and
// every event lands exactly once.
func TestClusterSinkCoordinatorKilled(t *testing.T) {
	const (
		total = 60_000
		topic = "clicks"
		group = "lake"
	)
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 6)
	want := produceClicks(t, c, topic, 0, total, 3, nil)
	root := t.TempDir()
	sink := startSink(t, c, "sink", group, topic, "file://"+root, "--roll-rows", "2000")
	waitMidway(t, c, group, topic, total/4, time.Minute)

	// A new client each time: a client keeps the coordinator it found until
	// that broker answers NOT_COORDINATOR, and a dead one answers nothing.
	coordinator := func() int32 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		groups, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
		if err != nil || groups[group].Err != nil {
			return -1
		}
		return groups[group].Coordinator.NodeID
	}
	victim := coordinator()
	if victim < 0 {
		t.Fatal("the group has no coordinator")
	}
	// Every broker names the same coordinator, so every member of the group
	// (and every admin tool) reaches the same one.
	cl := c.client()
	for _, id := range c.initial {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cl.Broker(int(id)).Request(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("FindCoordinator at broker %d: %v", id, err)
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		named := r.NodeID
		if len(r.Coordinators) > 0 {
			named = r.Coordinators[0].NodeID
		}
		if named != victim {
			t.Errorf("broker %d names broker %d as the coordinator, broker %d was found first", id, named, victim)
		}
	}
	t.Logf("killing broker %d, the group's coordinator", victim)
	c.signal(victim, syscall.SIGKILL)
	waitfor.Until(c.t, 60*time.Second, "another coordinator", func() bool {
		now := coordinator()
		return now >= 0 && now != victim
	})
	c.restart(victim)
	waitfor.Until(c.t, 60*time.Second, "the coordinator back on its broker", func() bool { return coordinator() == victim })

	waitLanded(t, c, group, topic, 2*time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("sink: status %d after SIGTERM", sink.exitCode())
	}
	checkLake(t, root+"/clicks/**/*.parquet", want)
}
