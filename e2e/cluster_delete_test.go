package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord/zk"
	"millrace/broker/log"
	"millrace/internal/waitfor"
)

// pendingDeletions reads /admin/delete_topics from the cluster's ZooKeeper.
func (c *localCluster) pendingDeletions() []string {
	c.t.Helper()
	store, err := zk.Connect(c.zk, 10*time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		c.t.Fatal(err)
	}
	defer store.Close()
	names, err := cluster.PendingDeletions(store)
	if err != nil {
		c.t.Fatal(err)
	}
	return names
}

// topicErrorOn asks one broker for the topic's metadata and returns the
// topic's error code.
func (c *localCluster) topicErrorOn(cl *kgo.Client, id int32, topic string) (int16, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	md := resp.(*kmsg.MetadataResponse)
	if len(md.Topics) != 1 {
		return 0, fmt.Errorf("%d topics in the answer", len(md.Topics))
	}
	return md.Topics[0].ErrorCode, nil
}

// TestClusterDeleteTopicWithBrokerDown deletes a replicated topic while one
// of its replicas is down (SIGKILL). The topic is gone for clients at once
// and its name stays taken while the deletion is pending; the live brokers
// delete their data; when the dead broker returns it deletes its
// directories instead of serving them, the controller finishes, and the
// topic re-created under the same name starts empty on every replica.
func TestClusterDeleteTopicWithBrokerDown(t *testing.T) {
	const topic, partitions = "doomed", 3
	const victim = int32(3)
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, partitions)
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i, err := range produceSyncValues(producer, topic, 0, 30) {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for _, id := range c.initial {
		if got := hostedPartitions(c.nodes[id].data, topic); len(got) != partitions {
			t.Fatalf("broker %d hosts %v before the deletion", id, got)
		}
	}

	c.signal(victim, syscall.SIGKILL)
	adm := c.admin()
	waitfor.Until(c.t, 30*time.Second, "the controller to see the killed broker gone", func() bool {
		parts, err := c.partitions(adm, topic)
		if err != nil {
			return false
		}
		for _, p := range parts {
			if p.Leader == victim || slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	})
	var live []string
	for _, id := range c.initial {
		if id != victim {
			live = append(live, c.nodes[id].addr)
		}
	}
	out := run(t, 60*time.Second, "", millraceBin, "topic", "delete", topic, "-b", strings.Join(live, ","))
	if !strings.Contains(out, "deleted topic "+topic) {
		t.Fatalf("topic delete: %q", out)
	}

	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := adm.BrokerMetadata(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	waitfor.Until(c.t, 20*time.Second, "every live broker to answer UNKNOWN_TOPIC_OR_PARTITION", func() bool {
		for _, id := range c.initial {
			if id == victim {
				continue
			}
			if code, err := c.topicErrorOn(cl, id, topic); err != nil || code != kerr.UnknownTopicOrPartition.Code {
				return false
			}
		}
		return true
	})
	waitfor.Until(c.t, 20*time.Second, "the live brokers to delete their replicas", func() bool {
		return len(hostedPartitions(c.nodes[1].data, topic)) == 0 && len(hostedPartitions(c.nodes[2].data, topic)) == 0
	})
	if got := c.pendingDeletions(); !slices.Equal(got, []string{topic}) {
		t.Fatalf("pending deletions with broker %d down: %v", victim, got)
	}
	if got := hostedPartitions(c.nodes[victim].data, topic); len(got) != partitions {
		t.Fatalf("the dead broker's directories: %v", got)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	cancel()
	if err == nil {
		err = resp.Err
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("re-creating while the deletion is pending: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	// Nothing changes while the replica is down.
	time.Sleep(2 * time.Second)
	if got := c.pendingDeletions(); !slices.Equal(got, []string{topic}) {
		t.Fatalf("the deletion finished with broker %d down: pending %v", victim, got)
	}

	c.restart(victim)
	waitfor.Until(c.t, 60*time.Second, "the returning broker to delete its replicas and the deletion to finish", func() bool {
		return len(hostedPartitions(c.nodes[victim].data, topic)) == 0 && len(c.pendingDeletions()) == 0
	})

	// The name is free again (every broker's model catches up within a
	// moment); the new topic starts empty on every replica.
	two := "2"
	waitfor.Until(c.t, 30*time.Second, "the topic to be created again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &two}, topic)
		return err == nil && resp.Err == nil
	})
	waitfor.Until(c.t, 30*time.Second, "the new topic to be fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topic)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("re-created partition %d: end offset %d (%v), want 0", o.Partition, o.Offset, o.Err)
		}
	})
	manual := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < partitions; p++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := manual.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("fresh")}).First()
		cancel()
		if err != nil {
			t.Fatalf("write to the re-created partition %d: %v", p, err)
		}
		if r.Offset != 0 {
			t.Errorf("the first record of the re-created partition %d is at offset %d", p, r.Offset)
		}
	}
	c.stopAll()
	for _, id := range c.initial {
		for p := int32(0); p < partitions; p++ {
			dir := filepath.Join(c.nodes[id].data, "logs", fmt.Sprintf("%s-%d", topic, p))
			l, err := log.Open(dir, log.DefaultConfig(), nil)
			if err != nil {
				t.Fatalf("broker %d partition %d: %v", id, p, err)
			}
			if l.StartOffset() != 0 || l.EndOffset() != 1 {
				t.Errorf("broker %d partition %d holds offsets %d..%d, want only the new record at 0", id, p, l.StartOffset(), l.EndOffset())
			}
			l.Close()
		}
	}
}
