package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	c.waitFor("the members to share the partitions", time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		a, b := slices.Sorted(slices.Values(owned["a"])), slices.Sorted(slices.Values(owned["b"]))
		all := slices.Sorted(slices.Values(append(append([]int32(nil), a...), b...)))
		return len(a) == 3 && len(b) == 3 && slices.Equal(all, []int32{0, 1, 2, 3, 4, 5})
	})
}

// pythonGroupMember is a kafka-python group consumer that reports on stdout
// its assignment ("assigned 0,3,4") and how many records it has consumed
// ("consumed N") whenever they change, until the file named by its last
// argument exists; then it closes (committing) and prints "closed".
const pythonGroupMember = `
import os, sys, time
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

// TestClusterKafkaPythonGroupShares: two kafka-python consumers of one group,
// each bootstrapped from a different broker, find the same coordinator,
// split the six partitions three and three, consume every record once
// between them and commit it all.
func TestClusterKafkaPythonGroupShares(t *testing.T) {
	const topic, group, perPartition = "pyshared", "pysharers", 500
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 6)
	dir := t.TempDir()
	stop := filepath.Join(dir, "stop")
	var outs []string
	var exits []chan struct{}
	errs := make([]error, 2)
	for i, seed := range []int32{c.initial[0], c.initial[2]} {
		out := filepath.Join(dir, fmt.Sprint("member-", i, ".out"))
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/usr/bin/python3", "-c", pythonGroupMember, c.nodes[seed].addr, topic, group, stop)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exit := make(chan struct{})
		go func() {
			errs[i] = cmd.Wait()
			f.Close()
			close(exit)
		}()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exit
			if t.Failed() {
				b, _ := os.ReadFile(out)
				t.Logf("--- kafka-python member %d ---\n%s", i, tail(b, 4096))
			}
		})
		outs, exits = append(outs, out), append(exits, exit)
	}
	// running fails the test when a member has exited.
	running := func() {
		for i, exit := range exits {
			select {
			case <-exit:
				t.Fatalf("kafka-python member %d exited: %v", i, errs[i])
			default:
			}
		}
	}
	// last returns the value of the member's latest report of kind.
	last := func(member int, kind string) string {
		b, _ := os.ReadFile(outs[member])
		v := ""
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, kind+" "); ok {
				v = rest
			}
		}
		return v
	}
	c.waitFor("the members to share the partitions", 90*time.Second, func() bool {
		running()
		a, b := last(0, "assigned"), last(1, "assigned")
		all := slices.Sorted(slices.Values(strings.Split(a+","+b, ",")))
		return len(a) == len("0,1,2") && len(b) == len("0,1,2") && slices.Equal(all, []string{"0", "1", "2", "3", "4", "5"})
	})
	assigned := []string{last(0, "assigned"), last(1, "assigned")}

	// gzip: Debian's kafka-python has no snappy library.
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.GzipCompression()))
	var recs []*kgo.Record
	for i := range 6 * perPartition {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 6), Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.waitFor("every record consumed", 90*time.Second, func() bool {
		running()
		a, _ := strconv.Atoi(last(0, "consumed"))
		b, _ := strconv.Atoi(last(1, "consumed"))
		return a+b >= 6*perPartition
	})
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, exit := range exits {
		select {
		case <-exit:
			if errs[i] != nil {
				t.Fatalf("kafka-python member %d: %v", i, errs[i])
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("kafka-python member %d did not close", i)
		}
	}
	for i := range outs {
		if got := last(i, "assigned"); got != assigned[i] {
			t.Errorf("member %d: assigned %s while consuming, %s before", i, got, assigned[i])
		}
		if got := last(i, "consumed"); got != strconv.Itoa(3*perPartition) {
			t.Errorf("member %d consumed %s records, want %d (three partitions, each record once)", i, got, 3*perPartition)
		}
	}
	committed, err := c.admin().FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != 6*perPartition {
		t.Errorf("%s committed %d in all, want %d", group, sum, 6*perPartition)
	}
}
