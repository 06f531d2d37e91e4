package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/tier"
	"millrace/internal/waitfor"
)

// TestTieredTopicIsReadFromTheRemoteStart: the broker opens the read side
// when tiered storage is on, so once the closed segments are remote and
// deleted locally, ListOffsets earliest answers the remote start (0) and
// earliest-local (-4, KIP-1005) the local one, and a consumer from the
// start reads every record in order, the remote ones through the chunk
// cache.
func TestTieredTopicIsReadFromTheRemoteStart(t *testing.T) {
	t.Parallel()
	b, cl := startTieredBroker(t)
	ctx := context.Background()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, tieredTopicConfig(), "tiered")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	const records = 30
	produceN(t, cl, "tiered", records)

	_, l, _ := b.cluster.Partition("tiered", 0)
	waitfor.Until(t, 20*time.Second, "the closed segments remote and deleted locally", func() bool {
		st, _, _, err := tier.ReadState(b.store, "tiered", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(st.Segments) > 2 && len(l.Segments()) == 1 && l.StartOffset() == st.End()
	})
	localStart := l.StartOffset()
	for _, c := range []struct {
		timestamp int64
		want      int64
	}{{-2, 0}, {-4, localStart}} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 9
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "tiered"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = c.timestamp
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != c.want {
			t.Errorf("ListOffsets %d: offset %d, error %d; want %d", c.timestamp, got.Offset, got.ErrorCode, c.want)
		}
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.ConsumeTopics("tiered"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pollCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for next := int64(0); next < records; {
		fetches := consumer.PollFetches(pollCtx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consuming from offset %d: %v", next, err)
		}
		for _, r := range fetches.Records() {
			if r.Offset != next || string(r.Value) != fmt.Sprint(next) {
				t.Fatalf("record at offset %d with value %q; want offset %d, value %d", r.Offset, r.Value, next, next)
			}
			next++
		}
	}
}
