package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

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
