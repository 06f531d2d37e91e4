package broker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/broker/coord/zk"
	"millrace/broker/replication"
	"millrace/internal/zktest"

	"millrace/internal/waitfor"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRestartedLeaderServesCheckpointedHighWatermark restarts the leader of
// a partition whose other ISR member (broker 2, a registration only) never
// fetches, so the leader cannot advance its high watermark on its own: what
// consumers see after the restart is exactly what the high-watermark
// checkpoint says, clamped to the log end, and nothing from a damaged one.
func TestRestartedLeaderServesCheckpointedHighWatermark(t *testing.T) {
	const topic, records = "hw", 10
	server := zktest.Start(t)
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Kafka.Listener = "127.0.0.1:0"
	cfg.Kafka.BrokerID = 1
	cfg.ZooKeeper = server.Connect()
	cfg.Cluster.SessionTimeout = 4 * time.Second
	cfg.Cluster.ReplicaLagTimeMax = time.Hour // broker 2 stays in the ISR
	cfg.Cluster.ProduceAckTimeout = 10 * time.Second
	checkpoint := filepath.Join(cfg.DataDir, "logs", replication.HighWatermarkCheckpointFile)

	peer := registerSilentBroker(t, server.Connect(), 2)
	statePath := "/brokers/topics/" + topic + "/partitions/0/state"
	setState := func(epoch int32, isr string) {
		t.Helper()
		_, stat, err := peer.Get(statePath)
		if err != nil {
			t.Fatal(err)
		}
		state := fmt.Sprintf(`{"version":1,"leader":1,"leader_epoch":%d,"isr":%s,"controller_epoch":1}`, epoch, isr)
		if _, err := peer.Set(statePath, []byte(state), stat.Version); err != nil {
			t.Fatal(err)
		}
	}

	// start runs broker 1 and returns an admin client and a stop function.
	start := func() (*kgo.Client, func()) {
		t.Helper()
		b, stop := runBroker(t, cfg, logger)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		return cl, func() {
			cl.Close()
			stop()
		}
	}
	// waitLeading waits until Metadata shows broker 1 leading at epoch.
	waitLeading := func(cl *kgo.Client, epoch int32) {
		t.Helper()
		waitfor.Until(t, 30*time.Second, fmt.Sprintf("broker 1 leading at epoch %d", epoch), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			md, err := kadm.NewClient(cl).Metadata(ctx, topic)
			cancel()
			if err != nil || md.Topics[topic].Err != nil || len(md.Topics[topic].Partitions) != 1 {
				return false
			}
			p := md.Topics[topic].Partitions[0]
			return p.Leader == 1 && p.LeaderEpoch == epoch
		})
	}
	endOffset := func(cl *kgo.Client) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup(topic, 0)
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		return o.Offset
	}
	// consume reads until n records arrived or the wait is over.
	consume := func(cl *kgo.Client, n int, wait time.Duration) int {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		got := 0
		for got < n && ctx.Err() == nil {
			got += cl.PollFetches(ctx).NumRecords()
		}
		return got
	}

	// 1. Broker 1 leads with an ISR of itself (as after broker 2 fell
	// behind), so the records are committed; a clean stop checkpoints them.
	cl, stop := start()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	resp, err := req.RequestWith(ctx, cl)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	setState(1, "[1]")
	waitLeading(cl, 1)
	produceN(t, cl, topic, records)
	if got := consume(cl, records, 20*time.Second); got != records {
		t.Fatalf("read %d records before the restart, want %d", got, records)
	}
	stop()
	if data, err := os.ReadFile(checkpoint); err != nil || string(data) != fmt.Sprintf("0\n1\n%s 0 %d\n", topic, records) {
		t.Fatalf("checkpoint after a clean stop: %q %v", data, err)
	}

	// 2. While it is down broker 2 is back in the ISR, and it never
	// fetches: only the checkpoint tells the restarted leader what is
	// committed.
	setState(2, "[1,2]")
	cl, stop = start()
	waitLeading(cl, 2)
	if got := consume(cl, records, 20*time.Second); got != records {
		t.Errorf("read %d records after the restart, want the %d checkpointed", got, records)
	}
	if end := endOffset(cl); end != records {
		t.Errorf("high watermark after the restart %d, want %d", end, records)
	}
	stop()

	// 3. A checkpoint beyond the log end is clamped to it.
	if err := os.WriteFile(checkpoint, []byte(fmt.Sprintf("0\n1\n%s 0 %d\n", topic, 5*records)), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, stop = start()
	waitLeading(cl, 2)
	if end := endOffset(cl); end != records {
		t.Errorf("high watermark from a checkpoint past the log end: %d, want %d", end, records)
	}
	stop()

	// 4. A torn checkpoint is reported and ignored: the broker starts, from
	// high watermark 0.
	if err := os.WriteFile(checkpoint, []byte(fmt.Sprintf("0\n1\n%s 0 %d", topic, records)), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, stop = start()
	waitLeading(cl, 2)
	if end := endOffset(cl); end != 0 {
		t.Errorf("high watermark with a torn checkpoint: %d, want 0", end)
	}
	if !strings.Contains(logs.String(), "ignoring the high-watermark checkpoint") {
		t.Error("the torn checkpoint was not reported")
	}
	stop()
}

// TestDataDirectoryIdentity: a data directory is refused by another broker
// ID and by a coordination store of another cluster, with its partition
// logs untouched, rather than opened and emptied as strays.
func TestDataDirectoryIdentity(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Kafka.Listener = "127.0.0.1:0"
	cfg.Kafka.BrokerID = 1
	b, err := Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.cluster.CreateTopic(cluster.TopicSpec{Name: "kept", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	clusterID := b.cluster.ClusterID()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	meta, ok, err := readMeta(cfg.DataDir)
	if err != nil || !ok || meta != (dataMeta{BrokerID: 1, ClusterID: clusterID}) {
		t.Fatalf("meta.properties: %+v %v %v", meta, ok, err)
	}

	other := cfg
	other.Kafka.BrokerID = 2
	if _, err := Open(other, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "belongs to broker 1") {
		t.Fatalf("another broker ID: %v", err)
	}
	// The embedded store is lost: a new one is a new cluster.
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "coord")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), clusterID) {
		t.Fatalf("another cluster's store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "logs", "kept-0")); err != nil {
		t.Fatalf("the partition log was touched: %v", err)
	}
}

// produceN writes records 0 to n-1 to topic, each acknowledged before the next.
func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}

// runBroker opens a broker with cfg and runs it until stop is called; stop
// reports an error Run returned.
func runBroker(t *testing.T, cfg Config, logger *slog.Logger) (b *Broker, stop func()) {
	t.Helper()
	b, err := Open(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	return b, func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// registerSilentBroker registers broker id through its own ZooKeeper session,
// as a broker that is alive but never fetches: the leader sees a replica
// that does not catch up. The session ends with the test.
func registerSilentBroker(t *testing.T, connect string, id int) *zk.Store {
	t.Helper()
	peer, err := zk.Connect(connect, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	if err := coord.EnsurePath(peer, "/brokers/ids"); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Create(fmt.Sprintf("/brokers/ids/%d", id), []byte(`{"version":4,"host":"127.0.0.1","port":1}`), coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	return peer
}
