package broker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/cluster"
	"millrace/broker/tier"
	"millrace/internal/waitfor"
	"millrace/internal/zktest"
)

// TestReassignedTieredPartitionCopiesOnlyTheTail: a tiered partition on
// broker 1 whose closed segments are remote and deleted locally is
// reassigned to broker 2, which had no replica. Broker 2's fetch below
// broker 1's local log start gets OFFSET_MOVED_TO_TIERED_STORAGE; it
// restarts its log at that start from the remote state (the idempotent
// producer's state included) and joins the ISR having copied only the
// tail; as the partition's only replica it then leads, keeps uploading
// from the remote end, and the producer's next batch is in sequence.
func TestReassignedTieredPartitionCopiesOnlyTheTail(t *testing.T) {
	t.Parallel()
	server := zktest.Start(t)
	remote := "file://" + t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	start := func(id int32) *Broker {
		t.Helper()
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Kafka.Listener = "127.0.0.1:0"
		cfg.Kafka.BrokerID = id
		cfg.ZooKeeper = server.Connect()
		cfg.Cluster.SessionTimeout = 4 * time.Second
		cfg.Cluster.ProduceAckTimeout = 20 * time.Second
		cfg.Metrics = prometheus.NewRegistry()
		cfg.RetentionCheckInterval = 20 * time.Millisecond
		cfg.Tier.Enable, cfg.Tier.URL = true, remote
		cfg.Tier.TaskInterval = 20 * time.Millisecond
		b, stop := runBroker(t, cfg, logger)
		t.Cleanup(stop)
		return b
	}
	b1, b2 := start(1), start(2)
	waitfor.Until(t, 30*time.Second, "broker 2 registered", func() bool { _, ok := b1.cluster.Broker(2); return ok })

	cl, err := kgo.NewClient(kgo.SeedBrokers(b1.Addr().String(), b2.Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if _, err := b1.cluster.CreateTopic(cluster.TopicSpec{Name: "tiered", Partitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {1}},
		Config: map[string]string{"remote.storage.enable": "true", "segment.bytes": "400", "local.retention.bytes": "1"}}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "tiered", 30)
	_, l1, _ := b1.cluster.Partition("tiered", 0)
	waitfor.Until(t, 20*time.Second, "broker 1 keeps only the tail locally", func() bool {
		return l1.StartOffset() > 0 && len(l1.Segments()) == 1
	})

	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("tiered", 0, []int32{2})
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 30*time.Second, "broker 2 leads the partition alone", func() bool {
		state, _, ok := b2.cluster.Partition("tiered", 0)
		return ok && state.Leader == 2 && len(state.ISR) == 1 && state.ISR[0] == 2
	})
	_, l2, _ := b2.cluster.Partition("tiered", 0)
	if l2.StartOffset() == 0 || l2.EndOffset() != 30 {
		t.Fatalf("broker 2's log [%d, %d); want a local start above 0 and the end at 30", l2.StartOffset(), l2.EndOffset())
	}
	st, _, _, err := tier.ReadState(b2.store, "tiered", 0)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Size() >= st.Size() {
		t.Fatalf("broker 2 holds %d bytes locally, the remote segments %d: it copied more than the tail", l2.Size(), st.Size())
	}
	if _, err := os.Stat(filepath.Join(l2.Dir(), "00000000000000000000.log")); !os.IsNotExist(err) {
		t.Fatalf("broker 2 has the first segment: %v", err)
	}

	// The same producer continues in sequence on the new leader, which
	// uploads past the old remote end.
	end := st.End()
	produceN(t, cl, "tiered", 30)
	waitfor.Until(t, 20*time.Second, "broker 2 uploads past the old remote end", func() bool {
		st, _, _, err = tier.ReadState(b2.store, "tiered", 0)
		return err == nil && st.End() > end && st.LeaderEpoch > 0
	})
	producers, err := l2.Producers()
	if err != nil || len(producers) != 1 || producers[0].LastSequence != 59 {
		t.Fatalf("broker 2's producers %+v, %v; want the one producer at sequence 59", producers, err)
	}
}
