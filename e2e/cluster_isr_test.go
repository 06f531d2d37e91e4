package e2e

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// produceSyncValues writes values with acks=all and returns the error of
// each (nil when acknowledged).
func produceSyncValues(cl *kgo.Client, topic string, from, n int) []error {
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		errs[i] = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(from + i))}).FirstErr()
		cancel()
	}
	return errs
}

// TestClusterISRShrinkRefusesAcksAll is the 2013 Jepsen case: with both
// followers of a partition down, an acks=all write with
// min.insync.replicas=2 fails with NOT_ENOUGH_REPLICAS instead of being
// acknowledged by the leader alone; after the followers return and catch
// up, writes succeed again and nothing acknowledged is missing.
func TestClusterISRShrinkRefusesAcksAll(t *testing.T) {
	const topic = "isr-shrink"
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 1)
	adm := c.admin()
	// producer retries (a leader may still be taking over when Metadata
	// already names it); strict does not, so the refusal is what it sees.
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	strict := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))

	for i, err := range produceSyncValues(producer, topic, 0, 100) {
		if err != nil {
			t.Fatalf("write %d with all replicas up: %v", i, err)
		}
	}
	parts, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := parts[0].Leader
	var followers []int32
	for _, id := range parts[0].Replicas {
		if id != leader {
			followers = append(followers, id)
			c.signal(id, syscall.SIGKILL)
		}
	}
	waitfor.Until(c.t, 30*time.Second, "the ISR to shrink to the leader", func() bool {
		parts, err := c.partitions(adm, topic)
		return err == nil && slices.Equal(parts[0].ISR, []int32{leader})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err = strict.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("refused")}).FirstErr()
	cancel()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with the ISR below min.insync.replicas: got %v, want NOT_ENOUGH_REPLICAS", err)
	}

	for _, id := range followers {
		c.restart(id)
	}
	waitfor.Until(c.t, 60*time.Second, "the followers to rejoin the ISR", func() bool { return c.fullyReplicated(adm, topic) })
	for i, err := range produceSyncValues(producer, topic, 100, 100) {
		if err != nil {
			t.Fatalf("write %d after the followers returned: %v", i, err)
		}
	}
	got := readAll(t, c, topic, 1)
	var values []int64
	for _, r := range got[0] {
		values = append(values, r.value)
	}
	for v := int64(0); v < 200; v++ {
		if !slices.Contains(values, v) {
			t.Errorf("acknowledged value %d is missing", v)
		}
	}
	if len(values) != 200 {
		t.Errorf("the log holds %d records, want the 200 acknowledged (the refused one must not be there)", len(values))
	}
	c.checkReplicasIdentical(topic, 1)
}
