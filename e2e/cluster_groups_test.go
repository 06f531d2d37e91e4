package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestClusterGroupMembersShareThroughAnyBroker: two members of one group,
// each knowing only a different broker of the cluster, end in one group and
// share the topic's partitions (three each), as they do with Kafka.
func TestClusterGroupMembersShareThroughAnyBroker(t *testing.T) {
	const topic, group = "shared", "sharers"
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 6)

	var mu sync.Mutex
	owned := map[string][]int32{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for _, m := range []struct {
		name string
		seed int32
	}{{"a", c.initial[0]}, {"b", c.initial[2]}} {
		drop := func(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			owned[m.name] = slices.DeleteFunc(owned[m.name], func(p int32) bool { return slices.Contains(gone[topic], p) })
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[m.seed].addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, added map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				owned[m.name] = append(owned[m.name], added[topic]...)
			}),
			kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
	}
	waitfor.Until(c.t, time.Minute, "the members to share the partitions", func() bool {
		mu.Lock()
		defer mu.Unlock()
		a, b := slices.Sorted(slices.Values(owned["a"])), slices.Sorted(slices.Values(owned["b"]))
		all := slices.Sorted(slices.Values(append(append([]int32(nil), a...), b...)))
		return len(a) == 3 && len(b) == 3 && slices.Equal(all, []int32{0, 1, 2, 3, 4, 5})
	})
}

// clientProc is a Kafka client program run by a test (kafka-python, kcat),
// its standard output and error in one file.
type clientProc struct {
	t    *testing.T
	name string
	out  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited; err is set then
	err  error
}

func startClient(t *testing.T, name string, argv ...string) *clientProc {
	t.Helper()
	p := &clientProc{t: t, name: name, out: filepath.Join(t.TempDir(), name+".out"), done: make(chan struct{})}
	f, err := os.Create(p.out)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("--- %s ---\n%s", name, tail([]byte(p.output()), 4096))
		}
	})
	return p
}

func (p *clientProc) output() string {
	b, _ := os.ReadFile(p.out)
	return string(b)
}

// running fails the test if the program has exited.
func (p *clientProc) running() {
	p.t.Helper()
	select {
	case <-p.done:
		p.t.Fatalf("%s exited: %v", p.name, p.err)
	default:
	}
}

// waitExit waits for the program to exit on its own, successfully.
func (p *clientProc) waitExit(timeout time.Duration) {
	p.t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			p.t.Fatalf("%s: %v", p.name, p.err)
		}
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit in %v", p.name, timeout)
	}
}

// produceSpread writes perPartition records to each of the topic's six
// partitions, gzip-compressed (Debian's kafka-python has no snappy library).
func produceSpread(t *testing.T, c *localCluster, topic string, perPartition int) {
	t.Helper()
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.GzipCompression()))
	var recs []*kgo.Record
	for i := range 6 * perPartition {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 6), Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// splitThreeThree reports whether two assignments (sorted partition lists)
// hold three partitions each and all six between them.
func splitThreeThree(a, b []int) bool {
	all := slices.Sorted(slices.Values(append(slices.Clone(a), b...)))
	return len(a) == 3 && len(b) == 3 && slices.Equal(all, []int{0, 1, 2, 3, 4, 5})
}

// checkCommitted fails the test unless the group's committed offsets add up
// to want.
func checkCommitted(t *testing.T, c *localCluster, group string, want int64) {
	t.Helper()
	committed, err := c.admin().FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != want {
		t.Errorf("%s committed %d in all, want %d", group, sum, want)
	}
}

// pythonGroupMember is a kafka-python group consumer that reports on stdout
// its assignment ("assigned 0,3,4") and how many records it has consumed
// ("consumed N") whenever they change, until the file named by its last
// argument exists; then it closes (committing) and prints "closed".
const pythonGroupMember = `
import os, sys
from kafka import KafkaConsumer
addr, topic, group, stop = sys.argv[1:5]
c = KafkaConsumer(topic, bootstrap_servers=addr, group_id=group, auto_offset_reset='earliest',
                  enable_auto_commit=True, auto_commit_interval_ms=500)
assigned, consumed, reported = None, 0, -1
while not os.path.exists(stop):
    for msgs in c.poll(timeout_ms=200).values():
        consumed += len(msgs)
    a = sorted(tp.partition for tp in c.assignment())
    if a != assigned:
        assigned = a
        print('assigned', ','.join(map(str, a)), flush=True)
    if consumed != reported:
        reported = consumed
        print('consumed', consumed, flush=True)
c.close()
print('closed', flush=True)
`

// lastReport returns the value of the latest "kind value" line in out.
func lastReport(out, kind string) string {
	v := ""
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, kind+" "); ok {
			v = rest
		}
	}
	return v
}

// partitionList parses "0,3,4".
func partitionList(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// TestClusterKafkaPythonGroupShares: two kafka-python consumers of one group,
// each bootstrapped from a different broker, find the same coordinator,
// split the six partitions three and three, consume every record once
// between them and commit it all.
func TestClusterKafkaPythonGroupShares(t *testing.T) {
	const topic, group, perPartition = "pyshared", "pysharers", 500
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 6)
	stop := filepath.Join(t.TempDir(), "stop")
	var members []*clientProc
	for i, seed := range []int32{c.initial[0], c.initial[2]} {
		members = append(members, startClient(t, fmt.Sprint("kafka-python-", i),
			"/usr/bin/python3", "-c", pythonGroupMember, c.nodes[seed].addr, topic, group, stop))
	}
	assigned := func(i int) string { return lastReport(members[i].output(), "assigned") }
	waitfor.Until(c.t, 90*time.Second, "the members to share the partitions", func() bool {
		members[0].running()
		members[1].running()
		return splitThreeThree(partitionList(assigned(0)), partitionList(assigned(1)))
	})
	before := []string{assigned(0), assigned(1)}

	produceSpread(t, c, topic, perPartition)
	consumed := func(i int) int {
		n, _ := strconv.Atoi(lastReport(members[i].output(), "consumed"))
		return n
	}
	waitfor.Until(c.t, 90*time.Second, "every record consumed", func() bool {
		members[0].running()
		members[1].running()
		return consumed(0)+consumed(1) >= 6*perPartition
	})
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, m := range members {
		m.waitExit(30 * time.Second)
		if got := assigned(i); got != before[i] {
			t.Errorf("member %d: assigned %s while consuming, %s before", i, got, before[i])
		}
		if got := consumed(i); got != 3*perPartition {
			t.Errorf("member %d consumed %d records, want %d (three partitions, each record once)", i, got, 3*perPartition)
		}
	}
	checkCommitted(t, c, group, 6*perPartition)
}

// kcatRebalance matches kcat's report of a rebalance and its partitions.
var (
	kcatRebalance = regexp.MustCompile(`rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)`)
	kcatPartition = regexp.MustCompile(`\[(\d+)\]`)
)

// kcatAssignment is a kcat group member's current assignment, from the
// latest rebalance it reported (none after a revocation).
func kcatAssignment(out string) []int {
	ms := kcatRebalance.FindAllStringSubmatch(out, -1)
	if len(ms) == 0 || ms[len(ms)-1][1] != "assigned" {
		return nil
	}
	var ps []int
	for _, m := range kcatPartition.FindAllStringSubmatch(ms[len(ms)-1][2], -1) {
		p, _ := strconv.Atoi(m[1])
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// TestClusterKcatGroupShares: the same with librdkafka, two `kcat -G`
// members bootstrapped from different brokers: three partitions each, every
// record consumed once, from its member's own partitions, and committed when
// they stop.
func TestClusterKcatGroupShares(t *testing.T) {
	const topic, group, perPartition = "kcshared", "kcsharers", 500
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 6)
	var members []*clientProc
	for i, seed := range []int32{c.initial[0], c.initial[2]} {
		// -u: unbuffered, so the records show as they are consumed.
		members = append(members, startClient(t, fmt.Sprint("kcat-", i), "kcat", "-b", c.nodes[seed].addr,
			"-u", "-G", group, "-X", "auto.offset.reset=earliest", "-f", "record %p %o\n", topic))
	}
	waitfor.Until(c.t, 90*time.Second, "the members to share the partitions", func() bool {
		members[0].running()
		members[1].running()
		return splitThreeThree(kcatAssignment(members[0].output()), kcatAssignment(members[1].output()))
	})
	before := [][]int{kcatAssignment(members[0].output()), kcatAssignment(members[1].output())}

	produceSpread(t, c, topic, perPartition)
	records := func(i int) []string {
		var out []string
		for _, line := range strings.Split(members[i].output(), "\n") {
			if rec, ok := strings.CutPrefix(line, "record "); ok {
				out = append(out, rec)
			}
		}
		return out
	}
	waitfor.Until(c.t, 90*time.Second, "every record consumed", func() bool {
		members[0].running()
		members[1].running()
		return len(records(0))+len(records(1)) >= 6*perPartition
	})
	for i, m := range members {
		if got := kcatAssignment(m.output()); !slices.Equal(got, before[i]) {
			t.Errorf("member %d: assigned %v while consuming, %v before", i, got, before[i])
		}
	}
	seen := map[string]bool{}
	for i, m := range members {
		// kcat leaves the group and commits what it consumed on SIGTERM.
		m.cmd.Process.Signal(syscall.SIGTERM)
		m.waitExit(30 * time.Second)
		recs := records(i)
		if len(recs) != 3*perPartition {
			t.Errorf("member %d consumed %d records, want %d", i, len(recs), 3*perPartition)
		}
		for _, rec := range recs {
			var p, o int
			if _, err := fmt.Sscan(rec, &p, &o); err != nil || !slices.Contains(before[i], p) || seen[rec] {
				t.Fatalf("member %d: record %q is not from its own partitions %v, or was seen before", i, rec, before[i])
			}
			seen[rec] = true
		}
	}
	checkCommitted(t, c, group, 6*perPartition)
}
