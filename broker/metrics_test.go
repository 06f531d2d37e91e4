package broker

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/internal/zktest"

	"millrace/internal/waitfor"
)

// TestReplicationHealthMetrics drives a real ISR shrink and expansion on a
// leader and checks what its /metrics says at each step: broker 2 is first a
// registration only that never fetches, so broker 1 (leader and controller)
// removes it from the ISR after replica.lag.time.max.ms; then a real broker
// 2 takes its place, catches up and is added back.
func TestReplicationHealthMetrics(t *testing.T) {
	const topic, records = "health", 10
	server := zktest.Start(t)
	logger := slog.New(slog.DiscardHandler)
	config := func(id int32) Config {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Kafka.Listener = "127.0.0.1:0"
		cfg.Kafka.BrokerID = id
		cfg.ZooKeeper = server.Connect()
		cfg.Cluster.SessionTimeout = 4 * time.Second
		cfg.Cluster.ReplicaLagTimeMax = time.Second
		cfg.Cluster.ProduceAckTimeout = 10 * time.Second
		return cfg
	}
	// start runs a broker reporting to its own registry until the test ends.
	start := func(id int32) (*Broker, *prometheus.Registry) {
		t.Helper()
		reg := prometheus.NewRegistry()
		cfg := config(id)
		cfg.Metrics = reg
		b, stop := runBroker(t, cfg, logger)
		t.Cleanup(stop)
		return b, reg
	}
	// waitMetrics waits until reg reports exactly want (exposition text
	// without HELP and TYPE lines) for the metrics it names.
	waitMetrics := func(what string, reg *prometheus.Registry, want string) {
		t.Helper()
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
			names = append(names, strings.Fields(line)[0])
		}
		expected := exposition(t, reg, want)
		var err error
		defer func() {
			if t.Failed() {
				t.Logf("%s: last comparison: %v", what, err)
			}
		}()
		waitfor.Until(t, 30*time.Second, what, func() bool {
			err = testutil.GatherAndCompare(reg, strings.NewReader(expected), names...)
			return err == nil
		})
	}

	peer := registerSilentBroker(t, server.Connect(), 2)
	b1, reg1 := start(1)
	if _, err := b1.cluster.CreateTopic(cluster.TopicSpec{Name: topic, Partitions: -1, ReplicationFactor: -1,
		Assignment: map[int32][]int32{0: {1, 2}}}, false); err != nil {
		t.Fatal(err)
	}

	// 1. Broker 2 never fetches: broker 1 shrinks the ISR to itself.
	waitMetrics("the ISR shrink", reg1, `
millrace_broker_isr_shrinks_total 1
millrace_broker_isr_expands_total 0
millrace_broker_under_replicated_partitions 1
millrace_broker_leader_partitions 1
millrace_broker_partitions 1
millrace_broker_active_controller 1
millrace_broker_offline_partitions 0
`)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b1.Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceN(t, cl, topic, records)

	// 2. A real broker 2 replaces the registration, copies the records and
	// is added back.
	if err := peer.Delete("/brokers/ids/2", coord.AnyVersion); err != nil {
		t.Fatal(err)
	}
	_, reg2 := start(2)
	waitMetrics("the ISR expansion", reg1, `
millrace_broker_isr_shrinks_total 1
millrace_broker_isr_expands_total 1
millrace_broker_under_replicated_partitions 0
millrace_broker_leader_partitions 1
millrace_broker_partitions 1
millrace_broker_active_controller 1
`)
	// The follower leads nothing and changes no ISR; only one broker is
	// the controller.
	waitMetrics("the follower's view", reg2, `
millrace_broker_isr_shrinks_total 0
millrace_broker_isr_expands_total 0
millrace_broker_under_replicated_partitions 0
millrace_broker_leader_partitions 0
millrace_broker_partitions 1
millrace_broker_active_controller 0
millrace_broker_offline_partitions 0
`)
}

// exposition turns "name value" lines into the text format
// testutil.GatherAndCompare expects, with the HELP and TYPE lines reg
// gives for each name.
func exposition(t *testing.T, reg *prometheus.Registry, samples string) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(samples), "\n") {
		name := strings.Fields(line)[0]
		found := false
		for _, f := range families {
			if f.GetName() == name {
				fmt.Fprintf(&out, "# HELP %s %s\n# TYPE %s %s\n", name, f.GetHelp(), name, strings.ToLower(f.GetType().String()))
				found = true
			}
		}
		if !found {
			t.Fatalf("%s is not registered", name)
		}
		out.WriteString(line + "\n")
	}
	return out.String()
}
