package cli

// What `topic describe` shows of each partition's storage: its local size
// and, on a tiered topic, its remote part. Both come from one
// DescribeLogDirs request to each leader: the partition's size is Kafka's
// (the local segments), and a broker with tiered storage adds the remote
// start, end and size in a tagged field that Kafka clients skip
// (broker/tier/summary.go). The CLI has nothing but the Kafka protocol to
// reach a cluster with (no coordination store, no metrics address), and the
// remote figures are exactly what Kafka's tooling lacks (kafka-log-dirs.sh
// shows local sizes; the remote size is only a metric, KIP-963), so this
// is the request that already carries the local ones.

import (
	"context"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/tier"
	"millrace/pipeline/monitor"
)

// partitionDir is what a partition's leader reports of it.
type partitionDir struct {
	size   int64       // bytes of its local segments
	remote tier.Remote // its remote part, when tiered
	tiered bool        // remote is set: the leader reported a remote part
}

// readLeaderDirs asks each partition's leader (leaders: partition ->
// broker), all at once and within monitor.AnswerTimeout, to describe its
// log directory for topic's partitions it leads. A leader that does not
// answer, or answers with an error, leaves its partitions out.
func readLeaderDirs(ctx context.Context, cl *kgo.Client, topic string, leaders map[int32]int32) map[int32]partitionDir {
	ctx, cancel := context.WithTimeout(ctx, monitor.AnswerTimeout)
	defer cancel()
	led := map[int32][]int32{} // broker -> the partitions it leads
	for p, leader := range leaders {
		if leader >= 0 {
			led[leader] = append(led[leader], p)
		}
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[int32]partitionDir{}
	)
	for id, partitions := range led {
		slices.Sort(partitions)
		wg.Go(func() {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = topic, partitions
			req.Topics = []kmsg.DescribeLogDirsRequestTopic{rt}
			resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
			if err != nil || resp.ErrorCode != 0 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, d := range resp.Dirs {
				if d.ErrorCode != 0 {
					continue
				}
				for _, t := range d.Topics {
					if t.Topic != topic {
						continue
					}
					for _, p := range t.Partitions {
						if leaders[p.Partition] == id {
							out[p.Partition] = dirOf(p)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	return out
}

// dirOf reads one partition of a DescribeLogDirs answer. A remote field
// that does not decode (another tag's use of the number) is ignored.
func dirOf(p kmsg.DescribeLogDirsResponseDirTopicPartition) partitionDir {
	d := partitionDir{size: p.Size}
	p.UnknownTags.Each(func(key uint32, value []byte) {
		if key != tier.DescribeLogDirsTag {
			return
		}
		if r, err := tier.DecodeRemote(value); err == nil {
			d.remote, d.tiered = r, true
		}
	})
	return d
}
