package broker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/cluster"
	"millrace/internal/waitfor"
	"millrace/internal/zktest"
)

// TestFollowerFetchesALeaderOverOneClient: broker 2 follows every
// partition of a topic broker 1 leads through its one client to broker 1
// (broker/interbroker), not a connection per partition. acks=all produces
// to every partition complete, so broker 2 copied each; once the test's
// own client is gone broker 1 holds at most the two connections a
// franz-go client keeps to a broker (the fetch connection and the one for
// other requests), where a connection per followed partition would be
// six.
func TestFollowerFetchesALeaderOverOneClient(t *testing.T) {
	const topic, partitions = "pooled", 6
	server := zktest.Start(t)
	logger := slog.New(slog.DiscardHandler)
	start := func(id int32, reg prometheus.Registerer) *Broker {
		t.Helper()
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Kafka.Listener = "127.0.0.1:0"
		cfg.Kafka.BrokerID = id
		cfg.ZooKeeper = server.Connect()
		cfg.Cluster.SessionTimeout = 4 * time.Second
		cfg.Cluster.ProduceAckTimeout = 20 * time.Second
		cfg.Metrics = reg
		b, stop := runBroker(t, cfg, logger)
		t.Cleanup(stop)
		return b
	}
	reg1 := prometheus.NewRegistry()
	b1 := start(1, reg1)
	start(2, prometheus.NewRegistry())
	waitfor.Until(t, 30*time.Second, "broker 2 registered", func() bool { _, ok := b1.cluster.Broker(2); return ok })
	assignment := map[int32][]int32{}
	for p := range int32(partitions) {
		assignment[p] = []int32{1, 2}
	}
	if _, err := b1.cluster.CreateTopic(cluster.TopicSpec{Name: topic, Partitions: -1, ReplicationFactor: -1, Assignment: assignment}, false); err != nil {
		t.Fatal(err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b1.Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("r")}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("acks=all produce to partition %d: %v", p, err)
		}
	}
	for p := range int32(partitions) {
		if state, _, ok := b1.cluster.Partition(topic, p); !ok || len(state.ISR) != 2 {
			t.Fatalf("partition %d: state %+v, want broker 2 in the ISR", p, state)
		}
	}
	cl.Close()

	connections := func() float64 {
		families, err := reg1.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "millrace_broker_connections" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no millrace_broker_connections")
		return 0
	}
	waitfor.Until(t, 20*time.Second, "broker 1 holding no more than one client's connections", func() bool { return connections() <= 2 })
}
