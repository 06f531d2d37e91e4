package e2e

// Fetch from the closest replica (KIP-392) on a real three-broker cluster
// in racks a, b and c with Kafka's RackAwareReplicaSelector: kcat
// (librdkafka) and franz-go consumers that name their rack read from the
// follower in it, as each broker's follower-fetch metrics show; a consumer
// in the leader's rack, or in the rack of a follower that fell out of the
// ISR, reads from the leader; a follower asked directly answers as Kafka
// does.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"millrace/internal/waitfor"
)

const rackSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

var brokerRacks = map[int32]string{1: "a", 2: "b", 3: "c"}

// rackCounters are one broker's KIP-392 counters.
type rackCounters struct {
	followerRequests, followerBytes, redirects float64
}

func (c *localCluster) rackCounters(id int32) rackCounters {
	c.t.Helper()
	url := "http://" + c.state[fmt.Sprintf("BROKER_METRICS_%d", id)] + "/metrics"
	return rackCounters{
		followerRequests: scrapeCounter(c.t, url, "millrace_broker_follower_fetch_requests_total"),
		followerBytes:    scrapeCounter(c.t, url, "millrace_broker_follower_fetch_bytes_total"),
		redirects:        scrapeCounter(c.t, url, "millrace_broker_preferred_read_replica_answers_total"),
	}
}

func (c *localCluster) allRackCounters() map[int32]rackCounters {
	out := map[int32]rackCounters{}
	for id := range c.nodes {
		out[id] = c.rackCounters(id)
	}
	return out
}

// produceValues writes values to partition 0 of topic with acks=all.
func (c *localCluster) produceValues(topic string, values []string, opts ...kgo.Opt) {
	c.t.Helper()
	cl := c.client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Value: []byte(v), Partition: 0})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		c.t.Fatalf("produce: %v", err)
	}
}

// consumeRack reads n records of topic from the start with franz-go as a
// consumer in rack.
func (c *localCluster) consumeRack(topic, rack string, n int, opts ...kgo.Opt) []string {
	c.t.Helper()
	cl := c.client(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Rack(rack)}, opts...)...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			c.t.Fatalf("rack %s: read %d of %d records: %v", rack, len(got), n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { c.t.Logf("rack %s: fetch error: %v", rack, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func TestFetchFromClosestReplica(t *testing.T) {
	t.Parallel()
	c := startLocalClusterUp(t, 3, 1, []string{"--racks", "a,b,c", "--metrics"},
		"replica.selector.class="+rackSelector, "auto.leader.rebalance.enable=false")

	md, err := metadataFrom(c.nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.Rack == nil || *b.Rack != brokerRacks[b.NodeID] {
			t.Fatalf("Metadata: broker %d has rack %v, want %s", b.NodeID, b.Rack, brokerRacks[b.NodeID])
		}
	}

	const topic = "closest"
	c.createReplicatedTopic(topic, 1)
	parts, err := c.partitions(c.admin(), topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := parts[0].Leader
	var followers []int32
	for _, id := range parts[0].Replicas {
		if id != leader {
			followers = append(followers, id)
		}
	}
	slices.Sort(followers)
	values := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"}
	c.produceValues(topic, values)
	want := strings.Join(values, "\n")

	// kcat, as a consumer in the first follower's rack.
	before := c.allRackCounters()
	out := run(t, 60*time.Second, "", "kcat", "-b", strings.Join(c.seeds(), ","), "-C", "-t", topic, "-p", "0",
		"-o", "beginning", "-c", "10", "-q", "-f", "%s\n", "-X", "client.rack="+brokerRacks[followers[0]])
	if got := strings.Join(outputLines(out), "\n"); got != want {
		t.Fatalf("kcat in rack %s read %q, want %q", brokerRacks[followers[0]], got, want)
	}
	after := c.allRackCounters()
	c.wantServedBy(before, after, leader, followers[0], "kcat")

	// franz-go's kgo.Rack, in the other follower's rack.
	before = after
	if got := strings.Join(c.consumeRack(topic, brokerRacks[followers[1]], 10), "\n"); got != want {
		t.Fatalf("franz-go in rack %s read %q, want %q", brokerRacks[followers[1]], got, want)
	}
	after = c.allRackCounters()
	c.wantServedBy(before, after, leader, followers[1], "franz-go")

	// In the leader's rack: the leader serves, no follower does.
	before = after
	if got := strings.Join(c.consumeRack(topic, brokerRacks[leader], 10), "\n"); got != want {
		t.Fatalf("franz-go in the leader's rack read %q, want %q", got, want)
	}
	after = c.allRackCounters()
	for id := range c.nodes {
		if after[id] != before[id] {
			t.Errorf("a consumer in the leader's rack changed broker %d's counters: %+v -> %+v", id, before[id], after[id])
		}
	}

	c.checkFollowerAnswers(topic, followers[0], parts[0].LeaderEpoch)

	// A follower that fell out of the ISR is no longer offered: a consumer
	// in its rack reads everything, the new records too, from the leader.
	lagging := followers[0]
	c.signal(lagging, syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			c.signal(lagging, syscall.SIGCONT)
		}
	}()
	var live []string
	for id, node := range c.nodes {
		if id != lagging {
			live = append(live, node.addr)
		}
	}
	seeds := kgo.SeedBrokers(live...)
	adm := kadm.NewClient(c.client(seeds))
	waitfor.Until(c.t, 30*time.Second, "the stopped follower to leave the ISR", func() bool {
		parts, err := c.partitions(adm, topic)
		return err == nil && len(parts[0].ISR) == 2 && !slices.Contains(parts[0].ISR, lagging)
	})
	// Not idempotent: a producer ID could be asked of the stopped broker.
	more := append(slices.Clone(values), "r10", "r11")
	c.produceValues(topic, more[10:], seeds, kgo.DisableIdempotentWrite())
	before = c.countersExcept(lagging)
	if got := strings.Join(c.consumeRack(topic, brokerRacks[lagging], len(more), seeds), "\n"); got != strings.Join(more, "\n") {
		t.Fatalf("franz-go in the out-of-sync follower's rack read %q, want %q", got, strings.Join(more, "\n"))
	}
	after = c.countersExcept(lagging)
	for id, b := range before {
		if after[id].redirects != b.redirects || after[id].followerRequests != b.followerRequests {
			t.Errorf("with the rack's follower out of the ISR, broker %d redirected or served as a follower: %+v -> %+v", id, b, after[id])
		}
	}
	c.signal(lagging, syscall.SIGCONT)
	stopped = false
}

// countersExcept reads the counters of every broker but skip (stopped).
func (c *localCluster) countersExcept(skip int32) map[int32]rackCounters {
	out := map[int32]rackCounters{}
	for id := range c.nodes {
		if id != skip {
			out[id] = c.rackCounters(id)
		}
	}
	return out
}

// wantServedBy checks that between before and after the leader sent a
// consumer away and follower, alone, served it records.
func (c *localCluster) wantServedBy(before, after map[int32]rackCounters, leader, follower int32, who string) {
	c.t.Helper()
	if after[leader].redirects <= before[leader].redirects {
		c.t.Errorf("%s: leader %d never answered with a preferred read replica: %+v -> %+v", who, leader, before[leader], after[leader])
	}
	f := after[follower]
	if f.followerRequests <= before[follower].followerRequests || f.followerBytes <= before[follower].followerBytes {
		c.t.Errorf("%s: follower %d (rack %s) served no records: %+v -> %+v", who, follower, brokerRacks[follower], before[follower], f)
	}
	for id := range c.nodes {
		if id != follower && after[id].followerRequests != before[id].followerRequests {
			c.t.Errorf("%s: broker %d served as a follower too: %+v -> %+v", who, id, before[id], after[id])
		}
	}
}

// checkFollowerAnswers sends consumer fetches straight to a follower:
// within its high watermark it serves records, past its log end it answers
// OFFSET_OUT_OF_RANGE, with an old leader epoch FENCED_LEADER_EPOCH, and a
// fetch version before KIP-392 (v10) NOT_LEADER_OR_FOLLOWER.
func (c *localCluster) checkFollowerAnswers(topic string, follower, epoch int32) {
	c.t.Helper()
	fetch := func(maxVersions *kversion.Versions, offset int64, epoch int32) kmsg.FetchResponseTopicPartition {
		c.t.Helper()
		cl := c.client(kgo.SeedBrokers(c.nodes[follower].addr), kgo.MaxVersions(maxVersions))
		defer cl.Close()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, 0, 1, 1<<20, -1
		req.Rack = brokerRacks[follower]
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes, rp.LogStartOffset = 0, offset, epoch, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl.Broker(int(follower)))
		if err != nil {
			c.t.Fatalf("fetch from follower %d: %v", follower, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			c.t.Fatalf("fetch from follower %d: malformed answer %+v", follower, resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	v3 := kversion.V3_0_0() // Fetch v12: topic names, KIP-392's fields
	if p := fetch(v3, 0, epoch); p.ErrorCode != 0 || p.HighWatermark != 10 || len(p.RecordBatches) == 0 || p.PreferredReadReplica != -1 {
		c.t.Errorf("follower %d at offset 0: error %v, high watermark %d, %d record bytes, preferred replica %d; want records below 10",
			follower, kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches), p.PreferredReadReplica)
	}
	if p := fetch(v3, 10, epoch); p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		c.t.Errorf("follower %d at its high watermark: error %v, %d record bytes; want none", follower, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}
	if p := fetch(v3, 11, epoch); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		c.t.Errorf("follower %d past its log end: %v, want OFFSET_OUT_OF_RANGE", follower, kerr.ErrorForCode(p.ErrorCode))
	}
	if epoch > 0 {
		if p := fetch(v3, 0, epoch-1); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
			c.t.Errorf("follower %d with an old leader epoch: %v, want FENCED_LEADER_EPOCH", follower, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if p := fetch(v3, 0, epoch+1); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		c.t.Errorf("follower %d with a newer leader epoch: %v, want UNKNOWN_LEADER_EPOCH", follower, kerr.ErrorForCode(p.ErrorCode))
	}
	if p := fetch(kversion.V2_2_0(), 0, epoch); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		c.t.Errorf("follower %d asked with Fetch v10: %v, want NOT_LEADER_OR_FOLLOWER", follower, kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestRackAwarePlacement: with brokers in racks a, b, a, every partition
// of a new topic (CreateTopics and CreatePartitions) has a replica in each
// rack; a rack-unaware round robin would put some partition on brokers 1
// and 3 alone.
func TestRackAwarePlacement(t *testing.T) {
	t.Parallel()
	c := startLocalClusterUp(t, 3, 1, []string{"--racks", "a,b"})
	racks := map[int32]string{1: "a", 2: "b", 3: "a"}
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const topic = "placed"
	if resp, err := adm.CreateTopic(ctx, 6, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	// kadm asks for the current partition count first, of any broker.
	waitfor.Until(c.t, 20*time.Second, "every broker to know the new topic", func() bool {
		for _, node := range c.nodes {
			if !knowsTopic(node, topic, 6) {
				return false
			}
		}
		return true
	})
	resps, err := adm.CreatePartitions(ctx, 6, topic)
	if err == nil {
		err = resps[topic].Err
	}
	if err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	var parts map[int32]kadm.PartitionDetail
	waitfor.Until(c.t, 20*time.Second, "12 partitions with leaders", func() bool {
		p, err := c.partitions(adm, topic)
		if err != nil || len(p) != 12 {
			return false
		}
		for _, d := range p {
			if d.Leader < 0 {
				return false
			}
		}
		parts = p
		return true
	})
	for p, d := range parts {
		seen := map[string]bool{}
		for _, id := range d.Replicas {
			seen[racks[id]] = true
		}
		if len(d.Replicas) != 2 || !seen["a"] || !seen["b"] {
			t.Errorf("partition %d: replicas %v, want one in rack a and one in rack b", p, d.Replicas)
		}
	}
}
