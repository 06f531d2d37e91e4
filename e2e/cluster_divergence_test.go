package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/log"
	"millrace/internal/waitfor"
)

// logEndDirect is the end offset of a partition's log in a stopped broker's
// data directory.
func logEndDirect(t *testing.T, dataDir, topic string, partition int32) int64 {
	t.Helper()
	dir := filepath.Join(dataDir, "logs", fmt.Sprintf("%s-%d", topic, partition))
	l, err := log.Open(dir, log.DefaultConfig(), nil)
	if err != nil {
		t.Fatalf("opening %s: %v", dir, err)
	}
	defer l.Close()
	return l.EndOffset()
}

// TestClusterDivergentTailTruncated kills a leader right after it appended
// a batch no follower has fetched. The followers are paused only briefly
// (well under replica.lag.time.max.ms), so they stay in the ISR and one of
// them takes over cleanly; the batch was written with acks=1, so losing it
// breaks no promise. The old leader returns, truncates the unreplicated
// tail by leader epoch, and ends identical to the others at every offset.
func TestClusterDivergentTailTruncated(t *testing.T) {
	const topic = "divergence"
	c := startLocalCluster(t, 3, 1)
	c.createReplicatedTopic(topic, 1)
	adm := c.admin()
	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	for i, err := range produceSyncValues(producer, topic, 0, 100) {
		if err != nil {
			t.Fatalf("write %d with all replicas up: %v", i, err)
		}
	}
	waitfor.Until(c.t, 20*time.Second, "full replication", func() bool { return c.fullyReplicated(adm, topic) })
	old := c.leaderOf(adm, topic, 0)
	if old < 0 {
		t.Fatal("no leader")
	}
	followers := c.others(old)
	// Straight to the leader: a client's metadata request could go to a
	// paused follower and hang.
	lone := directClient(t, c.nodes[old].addr, 1)

	for _, id := range followers {
		c.signal(id, syscall.SIGSTOP)
	}
	// A follower's fetch already waiting at the leader would carry the new
	// batch to the paused follower, which would read it on SIGCONT: let
	// those long polls end empty first.
	time.Sleep(time.Second)
	var lost []string
	for i := 0; i < 10; i++ {
		lost = append(lost, strconv.Itoa(-1-i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	code, err := rawProduce(ctx, lone, topic, lost...)
	cancel()
	if err != nil || code != 0 {
		t.Fatalf("acks=1 write to the leader alone: %v %v", err, kerr.ErrorForCode(code))
	}
	c.signal(old, syscall.SIGKILL)
	for _, id := range followers {
		c.signal(id, syscall.SIGCONT)
	}
	if end := logEndDirect(t, c.nodes[old].data, topic, 0); end != 110 {
		t.Fatalf("the killed leader's log ends at %d, want 110 (100 replicated + 10 only it has)", end)
	}

	followerAdm := kadm.NewClient(c.clientOf(followers))
	waitfor.Until(c.t, 30*time.Second, "a follower to take over", func() bool {
		l := c.leaderOf(followerAdm, topic, 0)
		return l >= 0 && l != old
	})
	during := c.clientOf(followers, kgo.RequiredAcks(kgo.AllISRAcks()))
	for i, err := range produceSyncValues(during, topic, 100, 100) {
		if err != nil {
			t.Fatalf("write %d to the new leader: %v", i, err)
		}
	}

	c.restart(old)
	waitfor.Until(c.t, 40*time.Second, "the old leader back in the ISR", func() bool { return c.fullyReplicated(adm, topic) })
	for i, err := range produceSyncValues(producer, topic, 200, 100) {
		if err != nil {
			t.Fatalf("write %d after the old leader returned: %v", i, err)
		}
	}
	// 0..299 and none of the acks=1 values: the old leader's tail at 100..109
	// was replaced by the new leader's records.
	checkValues(t, readAll(t, c, topic, 1), 300)
	c.checkReplicasIdentical(topic, 1)
}
