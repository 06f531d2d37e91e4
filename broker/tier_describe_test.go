package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/tier"
	"millrace/internal/waitfor"
)

// TestDescribeLogDirsOfATieredTopic: DescribeLogDirs stays Kafka's on a
// tiered topic, its size the local segments' alone, and carries the
// remote start, end and size in millrace's tagged field, which an
// untiered topic's partitions do not have.
func TestDescribeLogDirsOfATieredTopic(t *testing.T) {
	t.Parallel()
	b, cl := startTieredBroker(t)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for topic, configs := range map[string]map[string]*string{
		"tiered": tieredTopicConfig(),
		"plain":  {"segment.bytes": ptr("400")},
	} {
		if resp, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
		produceN(t, cl, topic, 30)
	}

	_, l, _ := b.cluster.Partition("tiered", 0)
	var (
		sizes  map[string]int64
		remote tier.Remote
		tagged map[string]bool
	)
	waitfor.Until(t, 20*time.Second, "the remote part described", func() bool {
		st, _, _, err := tier.ReadState(b.store, "tiered", 0)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrDescribeLogDirsRequest()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		sizes, tagged = map[string]int64{}, map[string]bool{}
		for _, d := range resp.Dirs {
			for _, topic := range d.Topics {
				for _, p := range topic.Partitions {
					sizes[topic.Topic] = p.Size
					data, ok := tagValue(&p.UnknownTags, tier.DescribeLogDirsTag)
					if tagged[topic.Topic] = ok; ok && topic.Topic == "tiered" {
						if remote, err = tier.DecodeRemote(data); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
		// Local retention may delete a segment between the answer and
		// this check: compare the sizes of one moment.
		return len(st.Segments) > 2 && len(l.Segments()) == 1 && sizes["tiered"] == l.Size() &&
			remote == tier.Remote{LogStartOffset: 0, EndOffset: st.End(), Size: st.Size()}
	})
	if sizes["tiered"] != l.Size() || sizes["tiered"] >= remote.Size {
		t.Errorf("tiered partition's size %d, want the local %d (below the remote %d)", sizes["tiered"], l.Size(), remote.Size)
	}
	if tagged["plain"] || !tagged["tiered"] {
		t.Errorf("tagged partitions %v, want only the tiered one", tagged)
	}
}

// tagValue is the value of a tagged field, if present.
func tagValue(tags *kmsg.Tags, key uint32) (value []byte, ok bool) {
	tags.Each(func(k uint32, v []byte) {
		if k == key {
			value, ok = v, true
		}
	})
	return value, ok
}
