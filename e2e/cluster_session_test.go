package e2e

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"strconv"
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

// clientOf is a client that knows only the given brokers as seeds, for
// when another broker is paused and a request to it would hang.
func (c *localCluster) clientOf(ids []int32, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	var seeds []string
	for _, id := range ids {
		seeds = append(seeds, c.nodes[id].addr)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// others returns the initial brokers other than id.
func (c *localCluster) others(id int32) []int32 {
	return slices.DeleteFunc(slices.Clone(c.initial), func(x int32) bool { return x == id })
}

// leaderOf returns the current leader of a partition per Metadata (-1 when
// unknown).
func (c *localCluster) leaderOf(adm *kadm.Client, topic string, p int32) int32 {
	parts, err := c.partitions(adm, topic)
	if err != nil {
		return -1
	}
	d, ok := parts[p]
	if !ok || d.Err != nil {
		return -1
	}
	return d.Leader
}

// rawBatch encodes values as one uncompressed, non-idempotent record batch.
func rawBatch(values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the length varint of 0 is one byte
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: recs}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:21], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// directClient is a client for rawProduce: requests go to addr only.
// Produce v13 names topics by ID; the versions are capped below it so a
// request can name the topic. kgo sets a Produce request's acks from the
// client's, so acks is chosen here: -1 or 1.
func directClient(t *testing.T, addr string, acks int16) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V3_0_0())}
	if acks == 1 {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// rawProduce sends one Produce request for partition 0 straight to the
// broker cl (a directClient) was seeded with: no metadata, no retries, no
// redirection. It returns the partition's error code.
func rawProduce(ctx context.Context, cl *kgo.Client, topic string, values ...string) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = rawBatch(values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return 0, kerr.UnknownServerError
	}
	return pr.Topics[0].Partitions[0].ErrorCode, nil
}

// checkValues asserts that partition 0 holds exactly the values 0..n-1, each
// once and in order.
func checkValues(t *testing.T, got map[int32][]ackedRecord, n int) {
	t.Helper()
	var values []int64
	for _, r := range got[0] {
		values = append(values, r.value)
	}
	if len(values) != n {
		t.Errorf("the log holds %d records, want %d: %v", len(values), n, values)
		return
	}
	for i, v := range values {
		if v != int64(i) {
			t.Fatalf("record %d holds value %d, want %d", i, v, i)
		}
	}
}

// TestClusterSessionExpiryFencesPausedLeader pauses a partition's leader
// with SIGSTOP past the ZooKeeper session timeout: the others elect a new
// leader that acknowledges writes; once resumed, the old leader answers
// acks=all writes sent straight to it with an error (never success, as a
// stale leader would), then rejoins the ISR as a follower and ends with a
// log identical to the others'. Preferred-leader rebalancing is off: it
// would soon make the old leader the leader again, legitimately, at a new
// epoch, and this test tells stale answers from legitimate ones by
// the broker never leading again.
func TestClusterSessionExpiryFencesPausedLeader(t *testing.T) {
	const topic = "session-expiry"
	c := startLocalClusterWith(t, 3, 1, "auto.leader.rebalance.enable=false")
	c.createReplicatedTopic(topic, 1)
	adm := c.admin()
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	for i, err := range produceSyncValues(producer, topic, 0, 100) {
		if err != nil {
			t.Fatalf("write %d with all replicas up: %v", i, err)
		}
	}
	old := c.leaderOf(adm, topic, 0)
	if old < 0 {
		t.Fatal("no leader")
	}
	others := c.others(old)
	otherAdm := kadm.NewClient(c.clientOf(others))

	paused := time.Now()
	c.signal(old, syscall.SIGSTOP)
	waitfor.Until(c.t, 30*time.Second, "a new leader while the old one is paused", func() bool {
		l := c.leaderOf(otherAdm, topic, 0)
		return l >= 0 && l != old
	})
	t.Logf("broker %d paused; broker %d leads after %v", old, c.leaderOf(otherAdm, topic, 0), time.Since(paused).Round(time.Millisecond))
	during := c.clientOf(others, kgo.RequiredAcks(kgo.AllISRAcks()))
	for i, err := range produceSyncValues(during, topic, 100, 100) {
		if err != nil {
			t.Fatalf("write %d to the new leader while the old one is paused: %v", i, err)
		}
	}

	// The old leader wakes up believing it leads, with a stale ISR; every
	// acks=all write it gets must fail until it has learnt otherwise, and
	// after.
	direct := directClient(t, c.nodes[old].addr, -1)
	c.signal(old, syscall.SIGCONT)
	resumed := time.Now()
	codes := map[int16]int{}
	// Not a waitfor.Until: the probes go on for at least 4 s as well as
	// until NOT_LEADER_OR_FOLLOWER, and every answer is checked; the pauses
	// below only space them.
	for i := 0; time.Since(resumed) < 4*time.Second || codes[kerr.NotLeaderForPartition.Code] == 0; i++ {
		if time.Since(resumed) > 40*time.Second {
			t.Fatalf("the resumed broker never answered NOT_LEADER_OR_FOLLOWER; codes seen: %v", codes)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		code, err := rawProduce(ctx, direct, topic, strconv.Itoa(-1-i))
		cancel()
		if err != nil {
			t.Logf("produce to the resumed broker: %v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		codes[code]++
		switch code {
		case 0:
			t.Fatalf("the resumed old leader acknowledged an acks=all write %v after SIGCONT", time.Since(resumed))
		case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code:
		default:
			t.Errorf("the resumed old leader answered %v, want NOT_LEADER_OR_FOLLOWER or a fencing error", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("answers of the resumed broker to acks=all writes: %v", codes)

	waitfor.Until(c.t, 40*time.Second, "the old leader back in the ISR", func() bool {
		parts, err := c.partitions(adm, topic)
		return err == nil && slices.Contains(parts[0].ISR, old) && c.fullyReplicated(adm, topic)
	})
	for i, err := range produceSyncValues(producer, topic, 200, 100) {
		if err != nil {
			t.Fatalf("write %d after the old leader rejoined: %v", i, err)
		}
	}
	checkValues(t, readAll(t, c, topic, 1), 300)
	c.checkReplicasIdentical(topic, 1)
}
