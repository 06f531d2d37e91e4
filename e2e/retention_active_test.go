package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestRetentionDeletesExpiredActiveSegment: records whose timestamps are
// all older than retention.ms, on a topic too quiet to roll its only
// segment, are deleted as Kafka deletes them: the active segment is rolled
// and deleted, the start offset moves to the end, and the next record is
// appended there and is all a consumer from the start reads.
func TestRetentionDeletesExpiredActiveSegment(t *testing.T) {
	t.Parallel()
	const topic = "backfill"
	b := startBroker(t, "--set", "log.retention.check.interval.ms=100")
	b.createTopic(t, topic, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := b.client(t)
	old := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for range 3 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("old"), Timestamp: old})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	adm := kadm.NewClient(cl)
	waitfor.Until(t, 30*time.Second, "the expired records deleted", func() bool {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return false
		}
		o, ok := starts.Lookup(topic, 0)
		return ok && o.Err == nil && o.Offset == 3
	})
	if end := endOffset(ctx, t, cl, topic); end != 3 {
		t.Fatalf("end offset %d after retention, want 3", end)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatalf("produce after retention: %v", err)
	}
	consumer := b.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	fetches := consumer.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	got := fetches.Records()
	if len(got) != 1 || got[0].Offset != 3 || string(got[0].Value) != "new" {
		t.Fatalf("read %d records from the start, first %+v; want only the new one at offset 3", len(got), got)
	}
}
