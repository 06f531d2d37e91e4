package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// leaderCounts counts the partitions of topic each broker leads.
func (c *localCluster) leaderCounts(adm *kadm.Client, topic string) (map[int32]int, error) {
	parts, err := c.partitions(adm, topic)
	if err != nil {
		return nil, err
	}
	counts := map[int32]int{}
	for _, id := range c.initial {
		counts[id] = 0
	}
	for _, p := range parts {
		if p.Leader < 0 {
			return nil, fmt.Errorf("partition %d has no leader", p.Partition)
		}
		counts[p.Leader]++
	}
	return counts, nil
}

func spread(counts map[int32]int) int {
	lo, hi := -1, 0
	for _, n := range counts {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return hi - lo
}

// statusRow is one broker's row of `millrace cluster status` (replicas -1
// for "-").
type statusRow struct {
	leaders, replicas int
	data, free        string
}

// clusterStatus runs `millrace cluster status` and returns its output and
// the row it prints for each broker.
func (c *localCluster) clusterStatus(seeds []string) (string, map[int32]statusRow) {
	c.t.Helper()
	out := run(c.t, 30*time.Second, "", millraceBin, "cluster", "status", "--brokers", strings.Join(seeds, ","))
	row := regexp.MustCompile(`^(\d+)\s+127\.0\.0\.1:\d+\s+\S+\s+(\d+)\s+(\d+|-)\s+(\S+)\s+(\S+)$`)
	rows := map[int32]statusRow{}
	for _, line := range strings.Split(out, "\n") {
		if m := row.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			id, _ := strconv.Atoi(m[1])
			leaders, _ := strconv.Atoi(m[2])
			replicas, err := strconv.Atoi(m[3])
			if err != nil {
				replicas = -1 // "-": the broker did not describe its log directories
			}
			rows[int32(id)] = statusRow{leaders, replicas, m[4], m[5]}
		}
	}
	return out, rows
}

// iecBytes reads a size as `cluster status` prints it (0B, 6.1KiB, 1.2GiB).
func iecBytes(s string) (int64, bool) {
	m := regexp.MustCompile(`^(\d+(?:\.\d)?)(B|KiB|MiB|GiB|TiB)$`).FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	shift := map[string]int{"B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return int64(v * float64(int64(1)<<shift)), true
}

// TestClusterPreferredLeadersRestored kills a broker, lets its leaderships
// move, restarts it and waits for the preferred-leader rebalance: leader
// counts per broker end differing by at most one. `cluster status` shows
// the dead broker's absence, the under-replicated partitions while it is
// down, and the balanced counts afterwards.
func TestClusterPreferredLeadersRestored(t *testing.T) {
	const topic, partitions = "balance", 6
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, partitions)
	adm := c.admin()
	var counts map[int32]int
	// Each broker learns of the topic from ZooKeeper on its own; wait
	// until the one asked knows it.
	waitfor.Until(c.t, 10*time.Second, "every broker to know the topic", func() bool {
		var err error
		counts, err = c.leaderCounts(adm, topic)
		return err == nil
	})
	if spread(counts) > 1 {
		t.Fatalf("a new topic's leaders are not spread evenly: %v", counts)
	}

	const victim = int32(1)
	c.signal(victim, syscall.SIGKILL)
	rest := c.others(victim)
	restAdm := kadm.NewClient(c.clientOf(rest))
	waitfor.Until(c.t, 30*time.Second, "the killed broker's leaderships to move and it to leave every ISR", func() bool {
		counts, err := c.leaderCounts(restAdm, topic)
		if err != nil || counts[victim] != 0 {
			return false
		}
		parts, err := c.partitions(restAdm, topic)
		if err != nil {
			return false
		}
		for _, p := range parts {
			if slices.Contains(p.ISR, victim) {
				return false
			}
		}
		return true
	})
	var seeds []string
	for _, id := range rest {
		seeds = append(seeds, c.nodes[id].addr)
	}
	out, _ := c.clusterStatus(seeds)
	t.Logf("cluster status with broker %d down:\n%s", victim, out)
	if !strings.Contains(out, "brokers 2\n") || !strings.Contains(out, "offline partitions: 0\n") {
		t.Errorf("cluster status with one broker down should list 2 brokers and no offline partition:\n%s", out)
	}
	if strings.Contains(out, "under-replicated partitions: 0\n") || !strings.Contains(out, fmt.Sprintf("%s/0 (isr", topic)) {
		t.Errorf("cluster status should list the under-replicated partitions while broker %d is down:\n%s", victim, out)
	}

	c.restart(victim)
	waitfor.Until(c.t, 60*time.Second, "preferred leaders restored", func() bool {
		counts, err := c.leaderCounts(adm, topic)
		return err == nil && counts[victim] > 0 && spread(counts) <= 1 && c.fullyReplicated(adm, topic)
	})
	counts, _ = c.leaderCounts(adm, topic)
	t.Logf("leaders per broker after broker %d returned: %v", victim, counts)

	// Data for the disk columns: every broker holds a replica of every
	// partition, and acks=all has it on each of them when acknowledged.
	producer := c.clientOf(c.initial, kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := bytes.Repeat([]byte("0123456789abcdef"), 64)
	for i := 0; i < 200; i++ {
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	out, rows := c.clusterStatus(c.seeds())
	t.Logf("cluster status after the rebalance:\n%s", out)
	md, err := adm.Metadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := map[int32]int{}
	for _, td := range md.Topics {
		for _, p := range td.Partitions {
			for _, r := range p.Replicas {
				held[r]++
			}
		}
	}
	printed := map[int32]int{}
	for id, row := range rows {
		printed[id] = row.leaders
		if row.replicas != held[id] {
			t.Errorf("cluster status prints %d replicas on broker %d, Metadata assigns it %d", row.replicas, id, held[id])
		}
		if n, ok := iecBytes(row.data); !ok || n < 200*1024 {
			t.Errorf("broker %d: data %q, want at least the 200 KiB of records it holds", id, row.data)
		}
		if free, total, ok := strings.Cut(row.free, "/"); !ok || free == "" || total == "" {
			t.Errorf("broker %d: free %q, want usable/total", id, row.free)
		}
	}
	if !regexp.MustCompile(`controller [1-3]  brokers 3\n`).MatchString(out) {
		t.Errorf("cluster status should name a controller and 3 brokers:\n%s", out)
	}
	if !strings.Contains(out, "under-replicated partitions: 0\n") || !strings.Contains(out, "offline partitions: 0\n") {
		t.Errorf("cluster status should show no under-replicated or offline partition:\n%s", out)
	}
	for _, id := range c.initial {
		if printed[id] != counts[id] {
			t.Errorf("cluster status prints %d leaders for broker %d, Metadata says %d:\n%s", printed[id], id, counts[id], out)
		}
	}
	if spread(printed) > 1 || len(printed) != 3 {
		t.Errorf("cluster status leader counts %v differ by more than one", printed)
	}
}

// TestClusterElectLeaders asks for leader elections through the Kafka
// protocol (kadm.ElectLeaders, as kafka-leader-election.sh does) on a
// cluster that does not restore preferred leaders by itself: a preferred
// election gives a returned broker its leaderships back, and an unclean one
// brings back a partition whose only in-sync replica is gone, on the
// out-of-sync replica that is left.
func TestClusterElectLeaders(t *testing.T) {
	c := startLocalClusterWith(t, 3, 1, "auto.leader.rebalance.enable=false")
	c.createAssignedTopic("pref", [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	c.createAssignedTopic("lonely", [][]int32{{2, 3}})
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leaderOf := func(topic string, p int32) int32 {
		parts, err := c.partitions(adm, topic)
		if err != nil || int(p) >= len(parts) {
			return -2
		}
		return parts[p].Leader
	}

	c.signal(1, syscall.SIGKILL)
	waitfor.Until(c.t, 30*time.Second, "pref/0 to get another leader", func() bool {
		l := leaderOf("pref", 0)
		return l == 2 || l == 3
	})
	c.restart(1)
	waitfor.Until(c.t, 30*time.Second, "broker 1 back in sync", func() bool { return c.fullyReplicated(adm, "pref") })
	if l := leaderOf("pref", 0); l == 1 {
		t.Fatal("broker 1 leads pref/0 again without an election: is auto.leader.rebalance.enable=false honoured?")
	}
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := res["pref"][0].Err; err != nil {
		t.Errorf("preferred election of pref/0: %v", err)
	}
	for p := int32(1); p < 3; p++ {
		if err := res["pref"][p].Err; !errors.Is(err, kerr.ElectionNotNeeded) {
			t.Errorf("preferred election of pref/%d, led by its preferred replica: %v, want ELECTION_NOT_NEEDED", p, err)
		}
	}
	waitfor.Until(c.t, 10*time.Second, "broker 1 to lead pref/0 again", func() bool { return leaderOf("pref", 0) == 1 })

	// lonely/0 on 2 and 3: 3 dies (2 alone in sync), then 2 (offline), then 3
	// returns, out of sync: it may not lead but by an unclean election.
	c.signal(3, syscall.SIGKILL)
	waitfor.Until(c.t, 30*time.Second, "lonely/0's ISR to shrink to broker 2", func() bool {
		parts, err := c.partitions(adm, "lonely")
		return err == nil && slices.Equal(parts[0].ISR, []int32{2})
	})
	c.signal(2, syscall.SIGKILL)
	c.restart(3)
	lonely := kadm.TopicsSet{}
	lonely.Add("lonely", 0)
	waitfor.Until(c.t, 30*time.Second, "lonely/0 offline with broker 3 back", func() bool {
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == 2 && leaderOf("lonely", 0) == -1
	})
	// Through `millrace cluster elect` this time.
	live := c.nodes[1].addr + "," + c.nodes[3].addr
	out, errOut, err := runErr(time.Minute, "", millraceBin, "cluster", "elect", "--brokers", live, "--topic", "lonely")
	if err == nil || !strings.Contains(out, "lonely/0: PREFERRED_LEADER_NOT_AVAILABLE") || !strings.Contains(out, "0 elected, 0 not needed, 1 failed\n") {
		t.Errorf("cluster elect with the preferred replica dead: %v\n%s%s", err, out, errOut)
	}
	out = run(t, time.Minute, "", millraceBin, "cluster", "elect", "--brokers", live, "--unclean", "--topic", "lonely", "--partition", "0")
	if !strings.Contains(out, "lonely/0: new leader elected\n") || !strings.Contains(out, "1 elected, 0 not needed, 0 failed\n") {
		t.Fatalf("cluster elect --unclean:\n%s", out)
	}
	waitfor.Until(c.t, 10*time.Second, "broker 3 to lead lonely/0", func() bool { return leaderOf("lonely", 0) == 3 })
	if res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, lonely); err != nil || !errors.Is(res["lonely"][0].Err, kerr.ElectionNotNeeded) {
		t.Errorf("unclean election with a live leader: %v %v", err, res)
	}
}
