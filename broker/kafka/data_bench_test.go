package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/cluster"
	"millrace/broker/coord/embedded"
	"millrace/broker/group"
	"millrace/broker/log"
)

// startBenchBroker runs an in-process broker for a benchmark and returns its
// address; everything is closed by b.Cleanup.
func startBenchBroker(b *testing.B) (string, *cluster.Cluster) {
	b.Helper()
	dir := b.TempDir()
	logger := slog.New(slog.DiscardHandler)
	server, err := embedded.Open(dir+"/coord", logger)
	if err != nil {
		b.Fatal(err)
	}
	store, err := server.Session()
	if err != nil {
		b.Fatal(err)
	}
	logs, err := log.OpenManager(dir+"/data", log.DefaultConfig(), logger)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listener = "127.0.0.1:0"
	cl, err := cluster.Open(cluster.Config{BrokerID: 0, DefaultPartitions: 1, DefaultReplicationFactor: 1}, store, logs, log.DefaultConfig(), logger)
	if err != nil {
		b.Fatal(err)
	}
	gcfg := group.DefaultConfig()
	groups := group.New(store, gcfg, logger)
	broker, err := New(cfg, Deps{Cluster: cl, Groups: groups, Logs: logs, Store: store}, logger)
	if err != nil {
		b.Fatal(err)
	}
	if err := broker.Listen(); err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- broker.Serve(context.Background()) }()
	b.Cleanup(func() {
		broker.Close()
		<-served
		groups.Close()
		cl.Close()
		logs.Close()
		store.Close()
		server.Close()
	})
	return broker.Addr().String(), cl
}

// BenchmarkProduceFetch produces b.N 100-byte records through franz-go
// (idempotent, acks=all) and consumes them all back.
func BenchmarkProduceFetch(b *testing.B) {
	for _, partitions := range []int32{1, 6} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			addr, cl := startBenchBroker(b)
			topic := "bench"
			if _, err := cl.CreateTopic(cluster.TopicSpec{Name: topic, Partitions: partitions, ReplicationFactor: 1}, false); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			prod := newClient(b, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			cons := newClient(b, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			value := make([]byte, 100)
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for i := range b.N {
				prod.Produce(ctx, &kgo.Record{Value: value, Partition: int32(i) % partitions}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := prod.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			for got := 0; got < b.N; {
				fs := cons.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				got += fs.NumRecords()
			}
		})
	}
}
