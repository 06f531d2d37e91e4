package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker's memory is bounded: idle with 100 topics of 6 partitions it
// stays under 150 MiB, and under 512 MiB while a producer and a consumer
// push a million records through it.
func TestBrokerMemoryBounds(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := b.admin(t)
	var names []string
	for i := 0; i < 100; i++ {
		names = append(names, fmt.Sprintf("idle-%03d", i))
	}
	resps, err := adm.CreateTopics(ctx, 6, 1, nil, names...)
	if err != nil || resps.Error() != nil {
		t.Fatalf("create 100 topics: %v %v", err, resps.Error())
	}
	// One record in every partition, so every log has an active segment.
	cl := b.client(t)
	var records []*kgo.Record
	for _, n := range names {
		for p := int32(0); p < 6; p++ {
			records = append(records, &kgo.Record{Topic: n, Partition: p, Value: []byte("x")})
		}
	}
	manual := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := manual.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	time.Sleep(2 * time.Second) // let the broker settle after the burst
	if rss := rssKiB(t, b); rss > 150<<10 {
		t.Errorf("idle broker with 600 partitions uses %d MiB RSS, want < 150", rss>>10)
	} else {
		t.Logf("idle RSS with 100 topics x 6 partitions: %d MiB", rss>>10)
	}

	// Under load: sample RSS while a million records go through.
	b.createTopic(t, "load", 6, nil)
	var peak int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if rss, err := b.rssKiB(); err == nil {
				peak = max(peak, rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	producer := b.client(t, kgo.DefaultProduceTopic("load"), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	value := make([]byte, 100)
	for i := 0; i < 1_000_000; i++ {
		producer.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	consumer := b.client(t, kgo.ConsumeTopics("load"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 1_000_000 && ctx.Err() == nil; {
		f := consumer.PollFetches(ctx)
		if err := f.Err(); err != nil {
			t.Fatal(err)
		}
		n += f.NumRecords()
	}
	close(stop)
	wg.Wait()
	if peak > 512<<10 {
		t.Errorf("broker peak RSS under load %d MiB, want < 512", peak>>10)
	} else {
		t.Logf("peak RSS under load: %d MiB", peak>>10)
	}
}
