package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// TestTieredPartitionReassignedToNewBroker: a tiered partition on broker 1
// (small segments, local.retention.bytes=1, a file:// remote shared by the
// brokers) has most of its records remote and only the tail local. It is
// reassigned to broker 2, which had no replica: broker 2's fetch below
// broker 1's local log start gets OFFSET_MOVED_TO_TIERED_STORAGE, and it
// restarts its log at that start from the remote state (KIP-405's
// follower fetch), copies only the tail, joins the ISR and, once broker 1
// is removed, leads and keeps uploading past the remote end. A consumer
// then reads every record from offset 0 through broker 2: the old offsets,
// on no broker's disk any more, come from the remote store.
func TestTieredPartitionReassignedToNewBroker(t *testing.T) {
	t.Parallel()
	const topic = "tiered-move"
	remote := t.TempDir()
	c := startLocalClusterWith(t, 2, 1,
		"remote.log.storage.system.enable=true",
		"millrace.remote.storage.url=file://"+remote,
		"remote.log.manager.task.interval.ms=200",
		"log.retention.check.interval.ms=200")
	createTieredTopicOn(t, c, topic, 1)

	producer := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceTiered := func(from, n int) {
		t.Helper()
		value := strings.Repeat("x", 200)
		for i := from; i < from+n; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d %s", i, value)}).FirstErr()
			cancel()
			if err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	const records = 100 // about five 4 KiB segments
	produceTiered(0, records)
	local1 := filepath.Join(c.nodes[1].data, "logs", topic+"-0")
	waitfor.Until(t, 60*time.Second, "broker 1 keeps only the tail locally", func() bool {
		return len(remoteObjects(t, remote, ".log")) >= 3 && len(localSegments(t, local1)) == 1
	})
	remoteBefore := remoteObjects(t, remote, ".log")
	remoteEnd := lastRemoteOffset(t, remoteBefore) + 1

	adm := c.admin()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{2})
	resp, err := adm.AlterPartitionAssignments(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 60*time.Second, "broker 2 the partition's only replica, leader and in-sync", func() bool {
		parts, err := c.partitions(adm, topic)
		return err == nil && len(parts) == 1 && parts[0].Leader == 2 &&
			slices.Equal(parts[0].Replicas, []int32{2}) && slices.Equal(parts[0].ISR, []int32{2})
	})
	waitfor.Until(t, 30*time.Second, "broker 1 to drop the partition", func() bool { return len(hostedPartitions(c.nodes[1].data, topic)) == 0 })

	local2 := filepath.Join(c.nodes[2].data, "logs", topic+"-0")
	segments := localSegments(t, local2)
	if len(segments) == 0 {
		t.Fatal("broker 2 holds no segment")
	}
	first, err := strconv.ParseInt(strings.TrimSuffix(segments[0], ".log"), 10, 64)
	if err != nil || first == 0 || first > remoteEnd {
		t.Fatalf("broker 2's first local segment %s; want one starting above 0, at or below the remote end %d", segments[0], remoteEnd)
	}
	localBytes, remoteBytes := dirBytes(t, local2, ".log"), dirBytes(t, remote, ".log")
	t.Logf("broker 2 starts at %d with %d bytes of segments; %d bytes are remote up to %d", first, localBytes, remoteBytes, remoteEnd)
	if localBytes*2 > remoteBytes {
		t.Fatalf("broker 2 holds %d bytes of segments, the remote store %d: it copied more than the tail", localBytes, remoteBytes)
	}

	// The new leader uploads what follows the remote end.
	produceTiered(records, records/2)
	waitfor.Until(t, 60*time.Second, "broker 2 uploads past the old remote end", func() bool {
		return lastRemoteOffset(t, remoteObjects(t, remote, ".log")) >= remoteEnd+records/4
	})

	// Offset 0 is on neither broker's disk: broker 2 serves it from remote.
	const total = records + records/2
	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for next := int64(0); next < total; {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading from offset 0 through broker 2: at offset %d of %d after 60 s", next, total)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != next || !strings.HasPrefix(string(r.Value), fmt.Sprintf("%d ", next)) {
				t.Fatalf("offset %d holds %.20q; want offset %d, record %d", r.Offset, r.Value, next, next)
			}
			next++
		})
	}
}

// createTieredTopicOn creates a one-partition tiered topic with 4 KiB
// segments and local.retention.bytes=1 whose only replica is broker id.
func createTieredTopicOn(t *testing.T, c *localCluster, topic string, id int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{id}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for name, value := range map[string]string{"remote.storage.enable": "true", "segment.bytes": "4096", "local.retention.bytes": "1"} {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.client())
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	adm := c.admin()
	waitfor.Until(t, 20*time.Second, "the new topic to have its leader", func() bool { return c.fullyReplicated(adm, topic) })
}

// lastRemoteOffset is the largest last offset among remote .log objects
// (named <base>-<last>.log), -1 for none.
func lastRemoteOffset(t *testing.T, objects []string) int64 {
	t.Helper()
	last := int64(-1)
	for _, o := range objects {
		name := strings.TrimSuffix(filepath.Base(o), ".log")
		_, end, ok := strings.Cut(name, "-")
		n, err := strconv.ParseInt(end, 10, 64)
		if !ok || err != nil {
			t.Fatalf("remote object %s is not named <base>-<last>.log", o)
		}
		last = max(last, n)
	}
	return last
}

// dirBytes is the total size of the files under dir whose names end in
// suffix.
func dirBytes(t *testing.T, dir, suffix string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), suffix) {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
