package monitor

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"millrace/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Brokers: []string{"127.0.0.1:9092"}}, true},
		{"no brokers", Config{}, false},
		{"interval too short", Config{Brokers: []string{"x:1"}, Interval: time.Millisecond}, false},
		{"negative lookback", Config{Brokers: []string{"x:1"}, Lookback: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.withDefaults().Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// A collector against an in-memory Kafka-protocol cluster sees the topic,
// its produce rate, a group's lag, and a component's throughput from the
// metric samples on the ops topic (written before it started: it reads the
// topic from its recent past).
func TestCollectorReadsClusterAndMetrics(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events", DefaultMetricsTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("events"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(n int) {
		t.Helper()
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x"), Partition: 0}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(30)
	adm := kadm.NewClient(cl)
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "events", Partition: 0, At: 10, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "audit", offsets); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, v := range []float64{100, 160} {
		rec := &kgo.Record{Topic: DefaultMetricsTopic, Value: sampleJSON("millrace_lake_rows_total", "counter", v,
			`{"sink":"clicks","topic":"clicks"}`, now.Add(time.Duration(i-1)*10*time.Second), "h:up")}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	col, err := New(Config{Brokers: c.ListenAddrs(), Interval: 200 * time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := col.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer col.Shutdown(context.Background())

	var s Snapshot
	var producedAfter uint64 // the last read before the second batch
	bestRate := 0.0          // highest produce rate on events since the batch
	for {
		updated := col.Updated()
		s = col.Latest()
		if producedAfter > 0 && s.Seq > producedAfter {
			records := int64(0)
			for _, tp := range s.Topics {
				if tp.Name == "events" {
					bestRate = max(bestRate, tp.ProduceRate)
					records = tp.Records
				}
			}
			if bestRate > 0 && len(s.Components) > 0 && records == 50 {
				break
			}
		}
		if producedAfter == 0 && s.Seq >= 1 {
			producedAfter = s.Seq
			produce(20) // between two reads: a produce rate
		}
		select {
		case <-updated:
		case <-ctx.Done():
			t.Fatalf("no produce rate (best %v) or no components: %+v", bestRate, s)
		}
	}
	var events *Topic
	for i := range s.Topics {
		if s.Topics[i].Name == "events" {
			events = &s.Topics[i]
		}
	}
	if events == nil || len(events.Partitions) != 2 || events.Records != 50 || events.Partitions[0].Leader < 0 {
		t.Fatalf("events topic %+v", events)
	}
	if len(s.Groups) != 1 || s.Groups[0].Name != "audit" || s.Groups[0].Lag != 40 {
		t.Fatalf("groups %+v", s.Groups)
	}
	comp := s.Components[0]
	if comp.Kind != "sink" || comp.Name != "clicks" || comp.Total != 160 || comp.Rate != 6 {
		t.Fatalf("component %+v", comp)
	}
	if len(s.Brokers) != 1 || s.Controller < 0 {
		t.Fatalf("brokers %+v controller %d", s.Brokers, s.Controller)
	}
}
